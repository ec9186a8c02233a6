use super::*;

fn users() -> SaslUsers {
    SaslUsers::parse(
        r#"
            // ZooKeeper's server section
            Server {
                org.apache.zookeeper.server.auth.DigestLoginModule required
                user_alice="alice-secret"
                /* a block
                   comment */
                user_bob="bob\"pw";
            };
            Client { org.apache.zookeeper.server.auth.DigestLoginModule required
                username="alice" password="alice-secret"; };
            "#,
    )
    .unwrap()
}

// RFC 2831 section 4, "Example": the response and rspauth values for
// chris/secret on imap/elwood.innosoft.com.
#[test]
fn the_rfc_2831_example_gives_its_response_and_rspauth() {
    let args = |prefix| {
        response_value(
            b"chris",
            b"elwood.innosoft.com",
            b"secret",
            "OA6MG9tEQGm2hh",
            "OA6MHXh6VqTrRk",
            "00000001",
            None,
            "imap/elwood.innosoft.com",
            prefix,
        )
    };
    assert_eq!(args("AUTHENTICATE"), "d388dad90d4bbd760a152321f2143af7");
    assert_eq!(args(""), "ea40f60335c427b5527b84dbabcdfffd");
}

/// A client's response to `challenge`, as pure-sasl and the JDK build it.
fn client_response(user: &str, pw: &str, nonce: &str, nc: &str, uri: &str) -> Vec<u8> {
    let cnonce = "Zm9vYmFyYmF6";
    let r = response_value(
        user.as_bytes(),
        REALM.as_bytes(),
        pw.as_bytes(),
        nonce,
        cnonce,
        nc,
        None,
        uri,
        "AUTHENTICATE",
    );
    format!(
        "charset=utf-8,username=\"{user}\",realm=\"{REALM}\",nonce=\"{nonce}\",nc={nc},\
         cnonce=\"{cnonce}\",digest-uri=\"{uri}\",maxbuf=65536,response={r},qop=auth"
    )
    .into_bytes()
}

fn challenged(s: &mut DigestServer) -> String {
    let Step::Challenge(c) = s.step(b"", &users(), || "N0nce".into()).unwrap() else {
        panic!("a challenge first");
    };
    let c = String::from_utf8(c).unwrap();
    assert!(c.contains("realm=\"zk-sasl-md5\""), "{c}");
    assert!(c.contains("qop=\"auth\""), "{c}");
    "N0nce".into()
}

#[test]
fn a_right_password_authenticates_the_user_and_proves_the_server() {
    let mut s = DigestServer::new();
    let nonce = challenged(&mut s);
    let resp = client_response(
        "alice",
        "alice-secret",
        &nonce,
        "00000001",
        "zookeeper/zk-sasl-md5",
    );
    let Step::Done { token, user } = s.step(&resp, &users(), || unreachable!()).unwrap() else {
        panic!("done");
    };
    assert_eq!(user, "alice");
    let cnonce = "Zm9vYmFyYmF6";
    let expected = response_value(
        b"alice",
        REALM.as_bytes(),
        b"alice-secret",
        &nonce,
        cnonce,
        "00000001",
        None,
        "zookeeper/zk-sasl-md5",
        "",
    );
    assert_eq!(token, format!("rspauth={expected}").into_bytes());
    // The exchange is over: a replayed response is refused.
    assert!(s.step(&resp, &users(), || unreachable!()).is_err());
}

#[test]
fn quoted_passwords_with_escapes_are_taken_from_the_jaas_file() {
    let mut s = DigestServer::new();
    let nonce = challenged(&mut s);
    let resp = client_response(
        "bob",
        "bob\"pw",
        &nonce,
        "00000001",
        "zookeeper/zk-sasl-md5",
    );
    assert!(matches!(
        s.step(&resp, &users(), || unreachable!()),
        Ok(Step::Done { .. })
    ));
}

#[test]
fn hostile_or_wrong_responses_fail_cleanly() {
    let ok_uri = "zookeeper/zk-sasl-md5";
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "wrong password",
            client_response("alice", "nope", "N0nce", "00000001", ok_uri),
        ),
        (
            "unknown user",
            client_response("carol", "x", "N0nce", "00000001", ok_uri),
        ),
        (
            "other nonce",
            client_response("alice", "alice-secret", "Other", "00000001", ok_uri),
        ),
        (
            "wrong nc",
            client_response("alice", "alice-secret", "N0nce", "00000002", ok_uri),
        ),
        (
            "wrong uri",
            client_response(
                "alice",
                "alice-secret",
                "N0nce",
                "00000001",
                "imap/zk-sasl-md5",
            ),
        ),
        ("huge", vec![b'a'; MAX_RESPONSE_BYTES + 1]),
        ("not utf-8", vec![0xff, 0xfe, b'=']),
        ("garbage", b"===,,,\"".to_vec()),
        ("unclosed", b"username=\"alice".to_vec()),
        ("duplicate", b"username=a,username=b".to_vec()),
        ("empty", Vec::new()),
    ];
    for (what, resp) in cases {
        let mut s = DigestServer::new();
        challenged(&mut s);
        assert!(
            s.step(&resp, &users(), || unreachable!()).is_err(),
            "{what}"
        );
        // And after a failure nothing more is taken.
        assert!(s.step(b"", &users(), || unreachable!()).is_err(), "{what}");
    }
    // DIGEST-MD5 has no initial response.
    let mut s = DigestServer::new();
    assert!(s.step(b"username=x", &users(), || unreachable!()).is_err());
}

#[test]
fn nonces_are_random_and_distinct() {
    let a = random_nonce().unwrap();
    assert_ne!(a, random_nonce().unwrap());
    assert!(a.len() >= 32);
}

#[test]
fn jaas_users_come_from_the_server_section_and_never_show() {
    let u = users();
    assert_eq!(u.password("alice"), Some("alice-secret"));
    assert_eq!(u.password("bob"), Some("bob\"pw"));
    assert_eq!(u.len(), 2);
    let shown = format!("{u:?}");
    assert!(
        !shown.contains("secret") && !shown.contains("pw"),
        "{shown}"
    );
}

#[test]
fn jaas_files_wazoo_cannot_honour_are_refused_by_name() {
    let cases = [
        ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"b\"; };", "no `Server` section"),
        ("Server { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab=\"/k\" principal=\"zookeeper/host@REALM\"; };", "Krb5LoginModule"),
        ("Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"b\" }", "not ended"),
        ("Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"b; };", "not closed"),
        ("Server { org.apache.zookeeper.server.auth.DigestLoginModule maybe user_a=\"b\"; };", "control flag"),
        ("Server { org.apache.zookeeper.server.auth.DigestLoginModule required; };", "no user"),
        ("Server { /* never closed", "not closed"),
        ("Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"b\"; };\nServer { };", "twice"),
    ];
    for (text, why) in cases {
        let err = format!("{:#}", SaslUsers::parse(text).unwrap_err());
        assert!(err.contains(why), "{text}: {err}");
        assert!(!err.contains("\"b\""), "no secret in {err}");
    }
}
