//! Who may open a bridged connection: the `Origin` allow-list and the URL token, both
//! checked on the upgrade request before the target is contacted.

use std::fmt;
use std::sync::Arc;

use subtle::ConstantTimeEq;

/// The longest origin a refusal quotes (an `Origin` header is the client's to make up).
const QUOTED_ORIGIN_MAX: usize = 120;

/// Which web pages may open a connection, by the `Origin` header of the upgrade request.
///
/// A browser always sends `Origin` on a WebSocket upgrade, and a page cannot forge or omit
/// it, so the allow-list is what stops an arbitrary web site open in the user's browser from
/// reaching the broker through a bridge on the user's machine (or on the user's network,
/// or through DNS rebinding: the rebinding page's origin is still its own).
///
/// * **Default ([`OriginPolicy::default`]): no web page at all.** The bridge serves no page
///   of its own, so there is no same-origin page to allow; every origin must be listed with
///   [`OriginPolicy::allow`].
/// * **No `Origin` header: allowed by default.** Only non-browser clients (websockify-style
///   tools, tests, programs) send none; such a program could open a TCP connection to the
///   broker itself, so the origin check has nothing to protect from it — a token
///   ([`Token`]) is what gates those. [`OriginPolicy::require_origin`] refuses them too.
/// * Origins are compared in their serialized form (RFC 6454): scheme and host lowercased,
///   the scheme's default port dropped. `null` (sandboxed frames, `file:` pages) is an
///   origin like any other, allowed only when listed as `null`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OriginPolicy {
    allowed: Vec<String>,
    any: bool,
    require_origin: bool,
}

impl OriginPolicy {
    /// Refuses every web page (the default); requests without `Origin` are allowed.
    pub fn new() -> Self {
        OriginPolicy::default()
    }

    /// Allows every origin: any web page the user opens may use the bridge. Only for a bridge
    /// whose broker holds nothing worth protecting, or behind a [`Token`].
    pub fn any() -> Self {
        OriginPolicy { any: true, ..OriginPolicy::default() }
    }

    /// Also allows `origin`: `scheme://host[:port]` (a page's URL is accepted too: its path,
    /// query and fragment are dropped), or `null`. Refuses anything that is not an origin,
    /// saying why.
    pub fn allow(mut self, origin: &str) -> Result<Self, String> {
        let normalized = serialize_origin(origin, true).ok_or_else(|| {
            let hint = if origin.trim() == "*" { " (to allow every origin, allow any origin explicitly)" } else { "" };
            format!("{origin:?} is not an origin: expected scheme://host[:port], e.g. http://127.0.0.1:8080{hint}")
        })?;
        if !self.allowed.contains(&normalized) {
            self.allowed.push(normalized);
        }
        Ok(self)
    }

    /// Whether a request without an `Origin` header (a non-browser client) is refused too.
    pub fn require_origin(mut self, require: bool) -> Self {
        self.require_origin = require;
        self
    }

    /// The allowed origins, serialized.
    pub fn allowed(&self) -> &[String] {
        &self.allowed
    }

    /// Whether every origin is allowed.
    pub fn allows_any(&self) -> bool {
        self.any
    }

    /// Whether requests without an `Origin` header are refused.
    pub fn requires_origin(&self) -> bool {
        self.require_origin
    }

    /// Checks the `Origin` header values of one request (normally zero or one).
    pub fn check<'a>(&self, mut origins: impl Iterator<Item = &'a [u8]>) -> Result<(), Refusal> {
        let Some(first) = origins.next() else {
            return if self.require_origin { Err(Refusal::NoOrigin) } else { Ok(()) };
        };
        if origins.next().is_some() {
            return Err(Refusal::BadOrigin { origin: quote(first) });
        }
        let Some(origin) = std::str::from_utf8(first).ok().and_then(|o| serialize_origin(o, false)) else {
            return Err(Refusal::BadOrigin { origin: quote(first) });
        };
        if self.any || self.allowed.contains(&origin) {
            Ok(())
        } else {
            Err(Refusal::Origin { origin: quote(first) })
        }
    }
}

/// The origin `text` names, serialized (RFC 6454 §6.2): `scheme://host[:port]` with scheme and
/// host lowercased and the default port dropped, or `null`. With `page`, a path, query or
/// fragment after the authority is allowed and dropped (a page's URL names its origin); an
/// `Origin` header has none.
fn serialize_origin(text: &str, page: bool) -> Option<String> {
    let text = if page { text.trim() } else { text };
    if text == "null" {
        return Some("null".into());
    }
    let (scheme, rest) = text.split_once("://")?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return None;
    }
    let scheme = scheme.to_ascii_lowercase();
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if !page && !tail.is_empty() {
        return None;
    }
    let (host, port) = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => (&authority[..i], Some(&authority[i + 1..])),
        _ => (authority, None),
    };
    let host_ok = if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        !inner.is_empty() && inner.chars().all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.'))
    } else {
        !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'))
    };
    if !host_ok {
        return None;
    }
    let host = host.to_ascii_lowercase();
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse::<u16>().ok()?)
        }
        Some(_) => return None,
    };
    let default_port = match scheme.as_str() {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    };
    Some(match port {
        Some(p) if Some(p) != default_port => format!("{scheme}://{host}:{p}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// A client-supplied value made safe to quote in a refusal or a log line: escaped (no control
/// characters) and shortened.
fn quote(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut quoted = format!("{:?}", text.chars().take(QUOTED_ORIGIN_MAX).collect::<String>());
    if text.chars().count() > QUOTED_ORIGIN_MAX {
        quoted.push('…');
    }
    quoted
}

/// A secret a client must put in the URL (`ws://host:port/?token=…`) to be let through.
///
/// Compared in constant time (the time depends on the token's length only). It never
/// appears in a refusal, an event or `Debug` output; [`Token::expose`] is the one way to read
/// it (to print the URL a user should open, say).
#[derive(Clone, PartialEq, Eq)]
pub struct Token(Arc<str>);

impl Token {
    /// The fewest characters a token may have: a short token could be guessed by trying.
    pub const MIN_LEN: usize = 16;
    /// The most characters a token may have.
    pub const MAX_LEN: usize = 256;

    /// A token from its text: [`Token::MIN_LEN`] to [`Token::MAX_LEN`] characters a URL
    /// carries unescaped (`A-Z a-z 0-9 - . _ ~`). The error never quotes the text.
    pub fn new(text: &str) -> Result<Token, String> {
        let text = text.trim();
        if text.len() < Token::MIN_LEN || text.len() > Token::MAX_LEN {
            return Err(format!(
                "a token must have {} to {} characters (this one has {}); a generated one has 43",
                Token::MIN_LEN,
                Token::MAX_LEN,
                text.chars().count()
            ));
        }
        if !text.bytes().all(is_unreserved) {
            return Err(
                "a token may only contain the characters A-Z a-z 0-9 - . _ ~ (which URLs carry unescaped)".into()
            );
        }
        Ok(Token(text.into()))
    }

    /// A fresh random token: 32 bytes from the operating system, base64url (43 characters).
    pub fn generate() -> std::io::Result<Token> {
        let mut bytes = [0u8; 32];
        getrandom::getrandom(&mut bytes).map_err(|e| std::io::Error::other(format!("no random source: {e}")))?;
        Ok(Token(base64url(&bytes).into()))
    }

    /// The token's text, for the URL a client must open. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `url` with this token in its query (`?token=…`, or `&token=…` after an existing query).
    pub fn add_to(&self, url: &str) -> String {
        let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
        let mut url = url.to_owned();
        if !after_scheme.contains(['/', '?']) {
            url.push('/');
        }
        let separator = if url.contains('?') { '&' } else { '?' };
        format!("{url}{separator}token={}", self.0)
    }

    /// Checks the request target (`/path?query`) of one upgrade request.
    pub(crate) fn check(&self, target: &str) -> Result<(), Refusal> {
        let query = target.split_once('?').map_or("", |(_, q)| q);
        let query = query.split_once('#').map_or(query, |(q, _)| q);
        let mut given = query.split('&').filter_map(|pair| pair.strip_prefix("token="));
        let Some(first) = given.next() else {
            return Err(Refusal::MissingToken);
        };
        if given.next().is_some() {
            return Err(Refusal::WrongToken);
        }
        let first = percent_decode(first);
        if bool::from(self.0.as_bytes().ct_eq(&first)) {
            Ok(())
        } else {
            Err(Refusal::WrongToken)
        }
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// Why an upgrade request was refused (before the target was contacted).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The page's origin is not allowed (HTTP 403). `origin` is quoted as received.
    Origin {
        /// The `Origin` header, escaped and shortened.
        origin: String,
    },
    /// Several `Origin` headers, or one that is not an origin (HTTP 403).
    BadOrigin {
        /// The (first) `Origin` header, escaped and shortened.
        origin: String,
    },
    /// No `Origin` header, and the policy requires one (HTTP 403).
    NoOrigin,
    /// The bridge requires a token and the URL has none (HTTP 401).
    MissingToken,
    /// The URL's token is wrong, or given twice (HTTP 401).
    WrongToken,
}

impl Refusal {
    /// The HTTP status the upgrade is answered with.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Origin { .. } | Refusal::BadOrigin { .. } | Refusal::NoOrigin => 403,
            Refusal::MissingToken | Refusal::WrongToken => 401,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Origin { origin } => write!(
                f,
                "origin {origin} is not allowed by this bridge (a cross-origin page; allow it explicitly if it should connect)"
            ),
            Refusal::BadOrigin { origin } => write!(f, "the Origin header {origin} is not one origin"),
            Refusal::NoOrigin => f.write_str("this bridge only accepts browsers (an Origin header) and the request had none"),
            Refusal::MissingToken => f.write_str("this bridge requires a token in its URL (?token=…) and the request had none"),
            Refusal::WrongToken => f.write_str("the token in the URL is wrong"),
        }
    }
}

/// Both checks of an upgrade request, origin first.
#[derive(Clone, Debug)]
pub(crate) struct Admission {
    pub(crate) origins: OriginPolicy,
    pub(crate) token: Option<Token>,
}

impl Admission {
    pub(crate) fn check<'a>(&self, target: &str, origins: impl Iterator<Item = &'a [u8]>) -> Result<(), Refusal> {
        self.origins.check(origins)?;
        match &self.token {
            Some(token) => token.check(target),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(policy: &OriginPolicy, origin: Option<&str>) -> Result<(), Refusal> {
        policy.check(origin.map(str::as_bytes).into_iter())
    }

    #[test]
    fn origins_are_compared_serialized() {
        assert_eq!(serialize_origin("HTTP://LocalHost:80", true).as_deref(), Some("http://localhost"));
        assert_eq!(serialize_origin("https://a.example:443/x/y?z#w", true).as_deref(), Some("https://a.example"));
        assert_eq!(serialize_origin("http://127.0.0.1:8080/", true).as_deref(), Some("http://127.0.0.1:8080"));
        assert_eq!(serialize_origin("http://[::1]:8080", false).as_deref(), Some("http://[::1]:8080"));
        assert_eq!(serialize_origin("chrome-extension://abc", false).as_deref(), Some("chrome-extension://abc"));
        assert_eq!(serialize_origin("null", false).as_deref(), Some("null"));
        for bad in
            ["127.0.0.1:8080", "*", "http://", "http://a:b", "http://u@h", "http://h:99999", "1x://h", "http://h h"]
        {
            assert_eq!(serialize_origin(bad, true), None, "{bad}");
        }
        // A header is an origin, not a page.
        assert_eq!(serialize_origin("http://h/path", false), None);
    }

    #[test]
    fn the_default_refuses_every_page_and_admits_non_browsers() {
        let policy = OriginPolicy::default();
        assert_eq!(check(&policy, None), Ok(()));
        let refusal = check(&policy, Some("http://127.0.0.1:8080")).unwrap_err();
        assert_eq!(refusal.status(), 403);
        assert!(refusal.to_string().contains("\"http://127.0.0.1:8080\" is not allowed"), "{refusal}");
        assert_eq!(check(&policy.clone().require_origin(true), None), Err(Refusal::NoOrigin));
        assert_eq!(check(&OriginPolicy::any(), Some("https://evil.example")), Ok(()));
    }

    #[test]
    fn listed_origins_match_exactly() {
        let policy = OriginPolicy::new().allow("http://127.0.0.1:8080/index.html").unwrap();
        assert_eq!(policy.allowed(), ["http://127.0.0.1:8080"]);
        assert_eq!(check(&policy, Some("http://127.0.0.1:8080")), Ok(()));
        for other in ["http://127.0.0.1:8081", "https://127.0.0.1:8080", "http://localhost:8080", "null"] {
            assert!(matches!(check(&policy, Some(other)), Err(Refusal::Origin { .. })), "{other}");
        }
        assert!(matches!(check(&policy, Some("http://127.0.0.1:8080/x")), Err(Refusal::BadOrigin { .. })));
        let two = [b"http://127.0.0.1:8080".as_slice(), b"http://127.0.0.1:8080".as_slice()];
        assert!(matches!(policy.check(two.into_iter()), Err(Refusal::BadOrigin { .. })));
        assert!(OriginPolicy::new().allow("*").unwrap_err().contains("allow any origin"));
    }

    #[test]
    fn quoted_origins_are_escaped_and_short() {
        let long = format!("http://{}.example", "a".repeat(500));
        let Err(Refusal::Origin { origin }) = check(&OriginPolicy::new(), Some(&long)) else { panic!("refused") };
        assert!(origin.chars().count() < 130 && origin.ends_with('…'), "{origin}");
        let Err(Refusal::BadOrigin { origin }) = check(&OriginPolicy::new(), Some("http://a\u{7}\n.example")) else {
            panic!("not an origin")
        };
        assert!(!origin.contains(['\u{7}', '\n']), "{origin}");
    }

    #[test]
    fn tokens_are_checked_in_the_query_and_never_shown() {
        let token = Token::new("0123456789abcdef-_.~").unwrap();
        assert_eq!(token.check("/?token=0123456789abcdef-_.~"), Ok(()));
        assert_eq!(token.check("/x?a=1&token=0123456789abcdef-_.%7E&b=2"), Ok(()));
        assert_eq!(token.check("/"), Err(Refusal::MissingToken));
        assert_eq!(token.check("/?tokens=0123456789abcdef-_.~"), Err(Refusal::MissingToken));
        assert_eq!(token.check("/?token=0123456789abcdef-_."), Err(Refusal::WrongToken));
        assert_eq!(token.check("/?token=0123456789abcdef-_.~~"), Err(Refusal::WrongToken));
        assert_eq!(token.check("/?token=0123456789abcdef-_.~&token=x"), Err(Refusal::WrongToken));
        assert_eq!(format!("{token:?}"), "Token(<redacted>)");
        for refusal in [Refusal::MissingToken, Refusal::WrongToken] {
            assert_eq!(refusal.status(), 401);
            assert!(!refusal.to_string().contains("0123456789"));
        }
        let short = Token::new("short-secret").unwrap_err();
        assert!(!short.contains("short-secret"), "{short}");
        assert!(Token::new("0123456789abcdef/").is_err());
        assert_eq!(token.add_to("ws://h:1"), "ws://h:1/?token=0123456789abcdef-_.~");
        assert_eq!(token.add_to("ws://h:1/x?a=b"), "ws://h:1/x?a=b&token=0123456789abcdef-_.~");
    }

    #[test]
    fn generated_tokens_are_distinct_and_valid() {
        let (a, b) = (Token::generate().unwrap(), Token::generate().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.expose().len(), 43);
        assert_eq!(Token::new(a.expose()).unwrap(), a);
        assert_eq!(base64url(b"\xfb\xff"), "-_8");
        assert_eq!(base64url(b"Man"), "TWFu");
    }
}
