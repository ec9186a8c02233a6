//! SASL for clients: the DIGEST-MD5 mechanism (RFC 2831, server side) as
//! ZooKeeper's server runs it, and the users of a JAAS file's `Server`
//! section.
//!
//! ZooKeeper's Java client (and kazoo with pure-sasl) authenticates with
//! the SASL request (opcode 102) right after its session is established:
//! an empty token, the server's challenge, the client's digest response,
//! the server's `rspauth`. ZooKeeper's server uses realm and server name
//! `zk-sasl-md5`, protocol `zookeeper` and qop `auth` only (no integrity or
//! privacy layer), and names the authenticated client `sasl:<username>`.
//!
//! The exchange's state ([`DigestServer`]) is kept per connection by the
//! shell: only its outcome (the identity, or a failure) reaches the core.
//! Every token is bounded ([`MAX_RESPONSE_BYTES`]) and every failure is a
//! clean [`SaslError`]; a connection gets one nonce and one try.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use md5::{Digest, Md5};

/// The realm and server name ZooKeeper's DIGEST-MD5 server uses.
pub const REALM: &str = "zk-sasl-md5";
/// The protocol (service) ZooKeeper's server and clients use.
pub const PROTOCOL: &str = "zookeeper";
/// The longest client response accepted, as the JDK's DIGEST-MD5 server
/// (RFC 2831 section 2.1.2 bounds it at 4096 bytes).
pub const MAX_RESPONSE_BYTES: usize = 4096;

/// The login module whose users wazoo serves.
const DIGEST_LOGIN_MODULE: &str = "org.apache.zookeeper.server.auth.DigestLoginModule";

/// SASL users from a JAAS file: name to password. The passwords never
/// leave this type (its `Debug` shows names only).
#[derive(Clone, Default)]
pub struct SaslUsers {
    users: BTreeMap<String, String>,
}

impl fmt::Debug for SaslUsers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslUsers")
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SaslUsers {
    /// Reads the `Server` section of a JAAS login configuration file.
    pub fn load(path: &Path) -> Result<SaslUsers> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the JAAS file {}", path.display()))?;
        SaslUsers::parse(&text).with_context(|| format!("JAAS file {}", path.display()))
    }

    /// Parses a JAAS file's text and takes the users of its `Server`
    /// section, which must hold only DigestLoginModule entries.
    pub fn parse(text: &str) -> Result<SaslUsers> {
        let sections = parse_jaas(text)?;
        let Some(modules) = sections.get("Server") else {
            bail!("no `Server` section (the one ZooKeeper's server reads)");
        };
        let mut users = BTreeMap::new();
        for m in modules {
            if m.class != DIGEST_LOGIN_MODULE {
                bail!(
                    "the `Server` section uses the login module {}, which wazoo cannot honour \
                     (only {DIGEST_LOGIN_MODULE}: Kerberos/GSSAPI is not supported, see docs/SECURITY.md)",
                    m.class
                );
            }
            for (k, v) in &m.options {
                if let Some(name) = k.strip_prefix("user_") {
                    if name.is_empty() {
                        bail!("an option `user_` names no user");
                    }
                    users.insert(name.to_string(), v.clone());
                }
            }
        }
        if users.is_empty() {
            bail!("the `Server` section defines no user (`user_NAME=\"password\"`)");
        }
        Ok(SaslUsers { users })
    }

    /// A user's password.
    fn password(&self, user: &str) -> Option<&str> {
        self.users.get(user).map(String::as_str)
    }

    /// How many users there are.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether there is no user.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// One login module entry of a JAAS section.
#[derive(Debug, PartialEq)]
struct LoginModule {
    class: String,
    flag: String,
    options: Vec<(String, String)>,
}

/// A JAAS token (the syntax of the JDK's `ConfigFile`).
#[derive(Debug, PartialEq)]
enum Tok {
    Word(String),
    Quoted(String),
    Punct(char),
}

fn jaas_tokens(text: &str) -> Result<Vec<Tok>> {
    let mut out = Vec::new();
    let mut it = text.chars().peekable();
    let mut line = 1usize;
    while let Some(c) = it.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '/' if it.peek() == Some(&'/') => {
                for c in it.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '/' if it.peek() == Some(&'*') => {
                it.next();
                let mut prev = ' ';
                let mut closed = false;
                for c in it.by_ref() {
                    if c == '\n' {
                        line += 1;
                    }
                    if prev == '*' && c == '/' {
                        closed = true;
                        break;
                    }
                    prev = c;
                }
                if !closed {
                    bail!("line {line}: a /* comment is not closed");
                }
            }
            '"' | '\'' => {
                let quote = c;
                let mut s = String::new();
                let mut closed = false;
                while let Some(c) = it.next() {
                    match c {
                        c if c == quote => {
                            closed = true;
                            break;
                        }
                        '\n' => bail!("line {line}: a quoted string runs past the end of its line"),
                        '\\' => match it.next() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some('r') => s.push('\r'),
                            Some(c) => s.push(c),
                            None => break,
                        },
                        c => s.push(c),
                    }
                }
                if !closed {
                    bail!("line {line}: a quoted string is not closed");
                }
                out.push(Tok::Quoted(s));
            }
            '{' | '}' | ';' | '=' => out.push(Tok::Punct(c)),
            c if is_word_char(c) => {
                let mut s = String::from(c);
                while let Some(&c) = it.peek() {
                    if !is_word_char(c) {
                        break;
                    }
                    s.push(c);
                    it.next();
                }
                out.push(Tok::Word(s));
            }
            c => bail!("line {line}: unexpected character {c:?}"),
        }
    }
    Ok(out)
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '$' | '.' | '-' | '*' | '/' | ':' | '@')
}

/// Parses a JAAS login configuration: `Name { Class Flag key=value...; ... };`.
fn parse_jaas(text: &str) -> Result<BTreeMap<String, Vec<LoginModule>>> {
    let toks = jaas_tokens(text)?;
    let mut i = 0;
    let mut sections = BTreeMap::new();
    let next = |i: &mut usize| -> Option<&Tok> {
        let t = toks.get(*i);
        *i += 1;
        t
    };
    while i < toks.len() {
        let Some(Tok::Word(name)) = next(&mut i) else {
            bail!("expected a section name");
        };
        let name = name.clone();
        if next(&mut i) != Some(&Tok::Punct('{')) {
            bail!("section {name}: expected `{{`");
        }
        let mut modules = Vec::new();
        loop {
            match next(&mut i) {
                Some(Tok::Punct('}')) => break,
                Some(Tok::Word(class)) => {
                    let class = class.clone();
                    let Some(Tok::Word(flag)) = next(&mut i) else {
                        bail!("section {name}: login module {class} has no control flag");
                    };
                    let flag = flag.clone();
                    if !["required", "requisite", "sufficient", "optional"]
                        .iter()
                        .any(|f| f.eq_ignore_ascii_case(&flag))
                    {
                        bail!("section {name}: login module {class} has the unknown control flag {flag}");
                    }
                    let mut options = Vec::new();
                    loop {
                        match next(&mut i) {
                            Some(Tok::Punct(';')) => break,
                            Some(Tok::Word(key)) => {
                                let key = key.clone();
                                if next(&mut i) != Some(&Tok::Punct('=')) {
                                    bail!("section {name}: option {key} has no `=`");
                                }
                                let value = match next(&mut i) {
                                    Some(Tok::Quoted(v)) | Some(Tok::Word(v)) => v.clone(),
                                    _ => bail!("section {name}: option {key} has no value"),
                                };
                                options.push((key, value));
                            }
                            _ => bail!("section {name}: login module {class} is not ended by `;`"),
                        }
                    }
                    modules.push(LoginModule {
                        class,
                        flag,
                        options,
                    });
                }
                _ => bail!("section {name}: expected a login module class or `}}`"),
            }
        }
        if next(&mut i) != Some(&Tok::Punct(';')) {
            bail!("section {name}: expected `;` after `}}`");
        }
        if sections.insert(name.clone(), modules).is_some() {
            bail!("section {name} appears twice");
        }
    }
    Ok(sections)
}

/// Why a SASL exchange failed. The message is for the log; the client
/// only learns that it failed (AuthFailed), as from ZooKeeper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslError(pub String);

impl fmt::Display for SaslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DIGEST-MD5: {}", self.0)
    }
}

impl std::error::Error for SaslError {}

fn fail<T>(msg: impl Into<String>) -> Result<T, SaslError> {
    Err(SaslError(msg.into()))
}

/// What one step of the exchange gives.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this token; the exchange goes on.
    Challenge(Vec<u8>),
    /// Send this token (the `rspauth`); `user` is authenticated.
    Done { token: Vec<u8>, user: String },
}

/// Where a connection's exchange is.
#[derive(Debug)]
enum State {
    /// No token yet: the next one must be empty (DIGEST-MD5 has no initial
    /// response).
    Start,
    /// The challenge with this nonce went out; the next token is the
    /// client's digest response.
    Challenged { nonce: String },
    /// Finished (authenticated or failed): no further token is taken.
    Finished,
}

/// One connection's DIGEST-MD5 server exchange (RFC 2831, qop `auth`).
#[derive(Debug)]
pub struct DigestServer {
    state: State,
}

impl DigestServer {
    /// A fresh exchange.
    pub fn new() -> DigestServer {
        DigestServer {
            state: State::Start,
        }
    }

    /// Takes the client's token; `nonce` is used for the challenge if this
    /// step sends one (the caller draws it from a secure random source).
    pub fn step(
        &mut self,
        token: &[u8],
        users: &SaslUsers,
        nonce: impl FnOnce() -> String,
    ) -> Result<Step, SaslError> {
        let state = std::mem::replace(&mut self.state, State::Finished);
        match state {
            State::Start => {
                if !token.is_empty() {
                    return fail("an initial response is not allowed");
                }
                let nonce = nonce();
                let challenge = format!(
                    "realm=\"{REALM}\",nonce=\"{nonce}\",qop=\"auth\",charset=utf-8,algorithm=md5-sess"
                );
                self.state = State::Challenged { nonce };
                Ok(Step::Challenge(challenge.into_bytes()))
            }
            State::Challenged { nonce } => {
                let (token, user) = check_response(token, &nonce, users)?;
                Ok(Step::Done { token, user })
            }
            State::Finished => fail("the exchange is already over"),
        }
    }
}

impl Default for DigestServer {
    fn default() -> Self {
        DigestServer::new()
    }
}

/// Parses a digest response's directives (RFC 2831 section 7.1:
/// `#(key=value)` with quoted strings; empty list elements are allowed).
/// Every directive may appear at most once.
fn parse_directives(text: &str) -> Result<BTreeMap<String, String>, SaslError> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut out = BTreeMap::new();
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\r' | b'\n') {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i == b.len() {
            break;
        }
        if b[i] == b',' {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'-' || b[i] == b'_') {
            i += 1;
        }
        if start == i {
            return fail("malformed directive");
        }
        let key = text[start..i].to_ascii_lowercase();
        skip_ws(&mut i);
        if i == b.len() || b[i] != b'=' {
            return fail(format!("directive {key} has no value"));
        }
        i += 1;
        skip_ws(&mut i);
        let value = if i < b.len() && b[i] == b'"' {
            i += 1;
            let mut v = Vec::new();
            loop {
                match b.get(i) {
                    None => return fail(format!("directive {key}: unclosed quoted string")),
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') => {
                        let Some(&c) = b.get(i + 1) else {
                            return fail(format!("directive {key}: unclosed quoted string"));
                        };
                        v.push(c);
                        i += 2;
                    }
                    Some(&c) => {
                        v.push(c);
                        i += 1;
                    }
                }
            }
            String::from_utf8(v).or_else(|_| fail(format!("directive {key} is not UTF-8")))?
        } else {
            let start = i;
            while i < b.len() && !matches!(b[i], b',' | b' ' | b'\t' | b'\r' | b'\n') {
                i += 1;
            }
            text[start..i].to_string()
        };
        if out.insert(key.clone(), value).is_some() {
            return fail(format!("directive {key} appears twice"));
        }
        skip_ws(&mut i);
        if i < b.len() {
            if b[i] != b',' {
                return fail("directives must be separated by commas");
            }
            i += 1;
        }
    }
    Ok(out)
}

/// RFC 2831 section 2.1.2.1: with `charset=utf-8`, a string whose
/// characters all fit ISO 8859-1 is hashed in ISO 8859-1, else in UTF-8.
fn charset_bytes(s: &str, utf8: bool) -> Vec<u8> {
    if utf8 && s.chars().any(|c| c as u32 > 0xff) {
        s.as_bytes().to_vec()
    } else {
        s.chars().map(|c| c as u32 as u8).collect()
    }
}

fn hex(b: &[u8]) -> String {
    use std::fmt::Write;
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

/// The `response` value (RFC 2831 section 2.1.2.1) for `a2_prefix`
/// `AUTHENTICATE` (the client's) or empty (the server's `rspauth`).
#[allow(clippy::too_many_arguments)]
fn response_value(
    user: &[u8],
    realm: &[u8],
    password: &[u8],
    nonce: &str,
    cnonce: &str,
    nc: &str,
    authzid: Option<&str>,
    digest_uri: &str,
    a2_prefix: &str,
) -> String {
    let mut h = Md5::new();
    h.update(user);
    h.update(b":");
    h.update(realm);
    h.update(b":");
    h.update(password);
    let secret = h.finalize();
    let mut a1 = Md5::new();
    a1.update(secret);
    a1.update(format!(":{nonce}:{cnonce}"));
    if let Some(z) = authzid {
        a1.update(format!(":{z}"));
    }
    let ha1 = hex(&a1.finalize());
    let ha2 = hex(&Md5::digest(format!("{a2_prefix}:{digest_uri}")));
    hex(&Md5::digest(format!(
        "{ha1}:{nonce}:{nc}:{cnonce}:auth:{ha2}"
    )))
}

/// Checks a digest response against the challenge's nonce and the users;
/// returns the `rspauth` token and the authenticated user.
fn check_response(
    token: &[u8],
    nonce: &str,
    users: &SaslUsers,
) -> Result<(Vec<u8>, String), SaslError> {
    if token.len() > MAX_RESPONSE_BYTES {
        return fail(format!(
            "a response of {} bytes is longer than {MAX_RESPONSE_BYTES}",
            token.len()
        ));
    }
    let Ok(text) = std::str::from_utf8(token) else {
        return fail("the response is not UTF-8");
    };
    let d = parse_directives(text)?;
    let get = |k: &str| d.get(k).map(String::as_str);
    let need = |k: &str| get(k).ok_or_else(|| SaslError(format!("missing {k}")));
    let utf8 = match get("charset") {
        None => false,
        Some(c) if c.eq_ignore_ascii_case("utf-8") => true,
        Some(_) => return fail("unknown charset"),
    };
    let user = need("username")?;
    if get("nonce") != Some(nonce) {
        return fail("the nonce is not the one this connection was given");
    }
    let cnonce = need("cnonce")?;
    if cnonce.is_empty() {
        return fail("empty cnonce");
    }
    // One nonce per connection, one response per nonce: the count is 1.
    let nc = need("nc")?;
    if nc != "00000001" {
        return fail(format!("nonce count {nc:?} is not 00000001"));
    }
    match get("qop") {
        None | Some("auth") => {}
        Some(q) => return fail(format!("qop {q:?} is not offered (only auth)")),
    }
    let realm = get("realm").unwrap_or(REALM);
    if realm != REALM {
        return fail(format!("realm {realm:?} is not offered"));
    }
    let digest_uri = need("digest-uri")?;
    let mut parts = digest_uri.split('/');
    let (serv, host) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if !serv.eq_ignore_ascii_case(PROTOCOL) || !host.eq_ignore_ascii_case(REALM) {
        return fail(format!(
            "digest-uri {digest_uri:?} is not {PROTOCOL}/{REALM}"
        ));
    }
    let response = need("response")?;
    if let Some(m) = get("maxbuf") {
        if m.parse::<u32>().is_err() {
            return fail("malformed maxbuf");
        }
    }
    let authzid = get("authzid");
    let Some(password) = users.password(user) else {
        return fail(format!("no user {user:?}"));
    };
    let (u, r, p) = (
        charset_bytes(user, utf8),
        charset_bytes(realm, utf8),
        charset_bytes(password, utf8),
    );
    let expected = response_value(
        &u,
        &r,
        &p,
        nonce,
        cnonce,
        nc,
        authzid,
        digest_uri,
        "AUTHENTICATE",
    );
    if !constant_time_eq(
        expected.as_bytes(),
        response.to_ascii_lowercase().as_bytes(),
    ) {
        return fail(format!("wrong password for {user:?}"));
    }
    let rspauth = response_value(&u, &r, &p, nonce, cnonce, nc, authzid, digest_uri, "");
    Ok((format!("rspauth={rspauth}").into_bytes(), user.to_string()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh nonce: 24 random bytes, base64 (as the JDK's server draws it).
pub fn random_nonce() -> Result<String, SaslError> {
    use base64::Engine;
    let mut b = [0u8; 24];
    getrandom::getrandom(&mut b).map_err(|e| SaslError(format!("no random nonce: {e}")))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(b))
}

#[cfg(test)]
mod tests;
