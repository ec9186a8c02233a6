//! Access control (ZooKeeper Programmer's Guide, "Data Model", "ZooKeeper access control using ACLs"):
//! matching a connection's identities against a node's ACL, and fixing up
//! the ACL a create or setACL supplies.

use base64::Engine;
use sha1::{Digest, Sha1};
use std::net::IpAddr;
use wazoo_proto::{Acl, ErrorCode, Id};

/// `user:base64(sha1(user:password))`, ZooKeeper's digest id for a
/// `user:password` credential.
pub fn digest_id(credential: &str) -> String {
    let user = credential.split(':').next().unwrap_or("");
    let hash = Sha1::digest(credential.as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// The identities of one connection: its address (`ip`), the digests it
/// authenticated with, and `super` if it proved the super digest.
#[derive(Debug, Clone, Default)]
pub struct AuthInfo {
    pub ids: Vec<Id>,
}

impl AuthInfo {
    pub fn for_addr(ip: Option<IpAddr>) -> AuthInfo {
        let mut ids = Vec::new();
        if let Some(ip) = ip {
            ids.push(Id::new("ip", &ip.to_string()));
        }
        AuthInfo { ids }
    }

    pub fn is_super(&self) -> bool {
        self.ids.iter().any(|i| i.scheme == "super")
    }

    /// Adds an identity unless it is already there.
    pub fn add(&mut self, id: Id) {
        if !self.ids.contains(&id) {
            self.ids.push(id);
        }
    }
}

/// Handles an auth packet. Returns the identities to add, or AuthFailed for
/// a scheme we do not know (ZooKeeper then closes the connection).
pub fn authenticate(
    scheme: &str,
    auth: &[u8],
    super_digest: Option<&str>,
) -> Result<Vec<Id>, ErrorCode> {
    match scheme {
        "digest" => {
            let cred = String::from_utf8_lossy(auth);
            let id = digest_id(&cred);
            let mut out = vec![Id::new("digest", &id)];
            if super_digest == Some(id.as_str()) {
                out.push(Id::new("super", ""));
            }
            Ok(out)
        }
        _ => Err(ErrorCode::AuthFailed),
    }
}

fn ip_matches(client: &str, acl_id: &str) -> bool {
    let (net, bits) = match acl_id.split_once('/') {
        Some((n, b)) => match b.parse::<u32>() {
            Ok(b) => (n, Some(b)),
            Err(_) => return false,
        },
        None => (acl_id, None),
    };
    let (Ok(c), Ok(n)) = (client.parse::<IpAddr>(), net.parse::<IpAddr>()) else {
        return false;
    };
    let (c, n, width) = match (c, n) {
        (IpAddr::V4(c), IpAddr::V4(n)) => (u32::from(c) as u128, u32::from(n) as u128, 32),
        (IpAddr::V6(c), IpAddr::V6(n)) => (u128::from(c), u128::from(n), 128),
        _ => return false,
    };
    let bits = bits.unwrap_or(width).min(width);
    if bits == 0 {
        return true;
    }
    let mask = if bits == 128 {
        u128::MAX
    } else {
        !(u128::MAX >> bits)
    } >> (128 - width);
    (c & mask) == (n & mask)
}

/// Whether `auth` may do `perm` on a node with `acl` (ZooKeeper's checkACL).
pub fn check(acl: &[Acl], perm: i32, auth: &AuthInfo) -> Result<(), ErrorCode> {
    if auth.is_super() || acl.is_empty() {
        return Ok(());
    }
    for a in acl {
        if a.perms & perm == 0 {
            continue;
        }
        if a.id.scheme == "world" && a.id.id == "anyone" {
            return Ok(());
        }
        for id in &auth.ids {
            if id.scheme != a.id.scheme {
                continue;
            }
            let ok = match id.scheme.as_str() {
                "ip" => ip_matches(&id.id, &a.id.id),
                _ => id.id == a.id.id,
            };
            if ok {
                return Ok(());
            }
        }
    }
    Err(ErrorCode::NoAuth)
}

/// The ACL schemes a member registers beyond ZooKeeper's built-in
/// `world`, `auth`, `digest` and `ip`, as ZooKeeper's ProviderRegistry
/// does: an ACL naming a scheme that is not registered is InvalidACL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Schemes {
    /// `sasl`: `authProvider.N=...SASLAuthenticationProvider`.
    pub sasl: bool,
    /// `x509`: a secure client port (TLS client certificates).
    pub x509: bool,
}

impl Schemes {
    /// Every scheme wazoo has.
    pub const ALL: Schemes = Schemes {
        sasl: true,
        x509: true,
    };
}

fn valid_id(id: &Id, schemes: Schemes) -> bool {
    match id.scheme.as_str() {
        "world" => id.id == "anyone",
        "digest" => id.id.contains(':'),
        "ip" => {
            let (net, bits) = match id.id.split_once('/') {
                Some((n, b)) => (n, Some(b)),
                None => (id.id.as_str(), None),
            };
            // ZooKeeper's IPAuthenticationProvider.isValid: the mask may
            // not be longer than the address.
            let Ok(addr) = net.parse::<IpAddr>() else {
                return false;
            };
            let max_bits = if addr.is_ipv4() { 32 } else { 128 };
            bits.is_none_or(|b| b.parse::<u8>().is_ok_and(|b| b <= max_bits))
        }
        "super" => true,
        // ZooKeeper's X509AuthenticationProvider takes any X.500 name (it
        // matches ids by string equality): `attribute=value`, at least.
        "x509" => schemes.x509 && id.id.contains('='),
        // ZooKeeper's SASLAuthenticationProvider.isValid: whatever parses
        // as a Kerberos name (`user`, or `user[/host]@REALM`).
        "sasl" => schemes.sasl && valid_sasl_name(&id.id),
        _ => false,
    }
}

fn valid_sasl_name(id: &str) -> bool {
    let Some((name, realm)) = id.split_once('@') else {
        return true;
    };
    // At most one `/` before the `@`, and none in the realm.
    name.split('/').count() <= 2 && !realm.contains(['@', '/'])
}

/// Validates a supplied ACL and expands `auth` entries into the
/// connection's authenticated identities (ZooKeeper's fixupACL).
pub fn fixup(acl: &[Acl], auth: &AuthInfo, schemes: Schemes) -> Result<Vec<Acl>, ErrorCode> {
    if acl.is_empty() {
        return Err(ErrorCode::InvalidAcl);
    }
    // As ZooKeeper's fixupACL: exact duplicates of the supplied list go
    // first; what `auth` expands to is kept as it comes, duplicates
    // included (an explicit digest id and the same id from `auth` both
    // stay).
    let mut unique: Vec<&Acl> = Vec::with_capacity(acl.len());
    for a in acl {
        if !unique.contains(&a) {
            unique.push(a);
        }
    }
    let mut out: Vec<Acl> = Vec::with_capacity(acl.len());
    let mut push = |a: Acl| out.push(a);
    for a in unique {
        // ZooKeeper keeps whatever perms a client sends (bits above ADMIN
        // included, and negative numbers): only the bits it knows grant
        // anything.
        if a.id.scheme == "auth" {
            let mut any = false;
            for id in auth
                .ids
                .iter()
                .filter(|i| i.scheme != "ip" && i.scheme != "super")
            {
                any = true;
                push(Acl {
                    perms: a.perms,
                    id: id.clone(),
                });
            }
            if !any {
                return Err(ErrorCode::InvalidAcl);
            }
        } else if valid_id(&a.id, schemes) {
            push(a.clone());
        } else {
            return Err(ErrorCode::InvalidAcl);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wazoo_proto::perms;

    #[test]
    fn digest_matches_zookeepers_digest_authentication_provider() {
        // DigestAuthenticationProvider.generateDigest("super:test")
        assert_eq!(
            digest_id("super:test"),
            "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
        );
    }

    #[test]
    fn world_anyone_grants_everyone_and_digest_needs_the_credential() {
        let anon = AuthInfo::for_addr(Some("127.0.0.1".parse().unwrap()));
        assert!(check(&Acl::open_unsafe(), perms::WRITE, &anon).is_ok());
        let acl = vec![Acl::new(perms::READ, "digest", &digest_id("u:p"))];
        assert_eq!(check(&acl, perms::READ, &anon), Err(ErrorCode::NoAuth));
        let mut me = anon.clone();
        for id in authenticate("digest", b"u:p", None).unwrap() {
            me.add(id);
        }
        assert!(check(&acl, perms::READ, &me).is_ok());
        assert_eq!(check(&acl, perms::WRITE, &me), Err(ErrorCode::NoAuth));
    }

    #[test]
    fn ip_acls_match_address_ranges() {
        let me = AuthInfo::for_addr(Some("10.1.2.3".parse().unwrap()));
        assert!(check(
            &[Acl::new(perms::ALL, "ip", "10.0.0.0/8")],
            perms::READ,
            &me
        )
        .is_ok());
        assert!(check(&[Acl::new(perms::ALL, "ip", "10.1.2.3")], perms::READ, &me).is_ok());
        assert!(check(
            &[Acl::new(perms::ALL, "ip", "11.0.0.0/8")],
            perms::READ,
            &me
        )
        .is_err());
    }

    // ZooKeeper Programmer's Guide, "Built-in ACL Schemes": x509 ids are
    // certificate subjects, matched exactly; `auth` expands to them too.
    #[test]
    fn x509_acls_match_the_certificate_subject_exactly() {
        let acl = vec![Acl::new(perms::READ, "x509", "CN=alice,O=wazoo")];
        assert_eq!(
            fixup(&acl, &AuthInfo::default(), Schemes::ALL),
            Ok(acl.clone())
        );
        let mut alice = AuthInfo::for_addr(Some("127.0.0.1".parse().unwrap()));
        alice.add(Id::new("x509", "CN=alice,O=wazoo"));
        assert!(check(&acl, perms::READ, &alice).is_ok());
        let mut bob = AuthInfo::default();
        bob.add(Id::new("x509", "CN=bob,O=wazoo"));
        assert_eq!(check(&acl, perms::READ, &bob), Err(ErrorCode::NoAuth));
        assert_eq!(
            fixup(
                &[Acl::new(perms::ALL, "x509", "not a name")],
                &alice,
                Schemes::ALL
            ),
            Err(ErrorCode::InvalidAcl)
        );
        let expanded = fixup(&[Acl::new(perms::ALL, "auth", "")], &alice, Schemes::ALL).unwrap();
        assert_eq!(
            expanded,
            vec![Acl::new(perms::ALL, "x509", "CN=alice,O=wazoo")]
        );
    }

    #[test]
    fn super_digest_bypasses_acls() {
        let mut me = AuthInfo::default();
        for id in authenticate(
            "digest",
            b"super:test",
            Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU="),
        )
        .unwrap()
        {
            me.add(id);
        }
        assert!(me.is_super());
        assert!(check(&[Acl::new(perms::READ, "digest", "x:y")], perms::ADMIN, &me).is_ok());
    }

    #[test]
    fn fixup_expands_auth_and_rejects_bad_acls() {
        let anon = AuthInfo::for_addr(Some("127.0.0.1".parse().unwrap()));
        assert_eq!(fixup(&[], &anon, Schemes::ALL), Err(ErrorCode::InvalidAcl));
        assert_eq!(
            fixup(&Acl::creator_all(), &anon, Schemes::ALL),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fixup(&[Acl::new(31, "world", "nobody")], &anon, Schemes::ALL),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fixup(&[Acl::new(31, "nope", "x")], &anon, Schemes::ALL),
            Err(ErrorCode::InvalidAcl)
        );
        let mut me = anon.clone();
        me.add(Id::new("digest", "u:hash"));
        assert_eq!(
            fixup(&Acl::creator_all(), &me, Schemes::ALL).unwrap(),
            vec![Acl::new(31, "digest", "u:hash")]
        );
    }

    /// ZooKeeper Programmer's Guide, "ZooKeeper access control using
    /// ACLs": ZooKeeper 3.8 stores perms as sent, bits above ADMIN
    /// included, and refuses an ip mask longer than the address.
    #[test]
    fn acls_keep_any_perms_and_refuse_ip_masks_longer_than_the_address() {
        let anon = AuthInfo::for_addr(Some("127.0.0.1".parse().unwrap()));
        for perms in [32, 63, -1, i32::MAX, i32::MIN] {
            let acl = [Acl::new(perms, "world", "anyone")];
            assert_eq!(
                fixup(&acl, &anon, Schemes::ALL).unwrap(),
                acl.to_vec(),
                "perms {perms}"
            );
        }
        for id in ["127.0.0.1/32", "10.0.0.0/8", "::1/128", "127.0.0.1"] {
            assert!(
                fixup(&[Acl::new(31, "ip", id)], &anon, Schemes::ALL).is_ok(),
                "{id}"
            );
        }
        for id in ["127.0.0.1/33", "::1/129", "10.0.0.0/x", "not-an-ip"] {
            assert_eq!(
                fixup(&[Acl::new(31, "ip", id)], &anon, Schemes::ALL),
                Err(ErrorCode::InvalidAcl),
                "{id}"
            );
        }
    }

    /// ZooKeeper's fixupACL drops exact duplicates from the supplied list,
    /// then expands `auth` without looking for duplicates again.
    #[test]
    fn fixup_drops_supplied_duplicates_but_keeps_what_auth_repeats() {
        let mut me = AuthInfo::for_addr(Some("127.0.0.1".parse().unwrap()));
        me.add(Id::new("digest", "u:hash"));
        let u = Acl::new(31, "digest", "u:hash");
        assert_eq!(
            fixup(&[u.clone(), u.clone()], &me, Schemes::ALL).unwrap(),
            vec![u.clone()]
        );
        let auth = Acl::new(31, "auth", "");
        assert_eq!(
            fixup(&[u.clone(), auth], &me, Schemes::ALL).unwrap(),
            vec![u.clone(), u]
        );
    }

    #[test]
    fn unknown_auth_schemes_fail() {
        assert_eq!(
            authenticate("kerberos", b"x", None),
            Err(ErrorCode::AuthFailed)
        );
    }

    // ZooKeeper Programmer's Guide, "Built-in ACL Schemes": the sasl and
    // x509 schemes exist only where their providers are registered;
    // elsewhere an ACL naming them is InvalidACL, as from ZooKeeper.
    #[test]
    fn sasl_and_x509_acls_are_invalid_where_their_provider_is_not_registered() {
        let anon = AuthInfo::default();
        let sasl = [Acl::new(perms::ALL, "sasl", "alice")];
        let x509 = [Acl::new(perms::ALL, "x509", "CN=alice")];
        let none = Schemes::default();
        assert_eq!(fixup(&sasl, &anon, none), Err(ErrorCode::InvalidAcl));
        assert_eq!(fixup(&x509, &anon, none), Err(ErrorCode::InvalidAcl));
        let sasl_only = Schemes {
            sasl: true,
            x509: false,
        };
        assert_eq!(fixup(&sasl, &anon, sasl_only), Ok(sasl.to_vec()));
        assert_eq!(fixup(&x509, &anon, sasl_only), Err(ErrorCode::InvalidAcl));
        assert_eq!(fixup(&x509, &anon, Schemes::ALL), Ok(x509.to_vec()));
    }
}
