//! The client side of SCRAM (RFC 5802) with SHA-256 or SHA-512 (RFC 7677), as Kafka speaks
//! it: no channel binding (`n,,`), no authorisation identity, no extensions.
//!
//! Why by hand: the primitives (PBKDF2, HMAC, SHA-2, base64) come from well-kept crates;
//! what is left is three messages of text, and the one SASL crate that has them draws its
//! nonce from the thread's RNG, which a sans-IO core must not do. The nonce is the caller's.

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::digest::core_api::BlockSizeUser;
use hmac::digest::{Digest, FixedOutput, KeyInit, Update};
use hmac::{Hmac, SimpleHmac};

use super::ScramHash;
use crate::error::{AttemptError, ErrorKind};
use crate::kafka::excerpt;

/// The most PBKDF2 iterations a broker may ask for: Kafka's own maximum for SCRAM
/// credentials (16,384). A broker asking for more is broken or hostile, and each iteration
/// is two HMACs of our CPU: the cap bounds that work to a few milliseconds.
pub(super) const MAX_ITERATIONS: u32 = 16_384;

/// What the client sends first, and what it must remember to answer the server.
pub(super) struct ClientFirst {
    /// The whole message (`n,,n=user,r=nonce`).
    pub(super) message: String,
    /// Without the GS2 header: part of the signed `AuthMessage`.
    pub(super) bare: String,
}

/// The first message for `username` with the client `nonce` (printable, no commas).
pub(super) fn client_first(username: &str, nonce: &str) -> ClientFirst {
    let bare = format!("n={},r={nonce}", sasl_name(username));
    ClientFirst { message: format!("n,,{bare}"), bare }
}

/// The client's final message and the server signature the server's last message must carry.
pub(super) struct ClientFinal {
    pub(super) message: String,
    pub(super) server_signature: Vec<u8>,
    /// Whether the keys were derived for this answer (not taken from those kept).
    pub(super) derived: bool,
}

/// The keys RFC 5802 derives from the password for one salt and iteration count: its
/// `ClientKey` and `ServerKey`.
///
/// Why kept: deriving them is PBKDF2, thousands of HMACs (about 2 ms of a core for
/// SCRAM-SHA-512 at Kafka's 4,096 iterations), and a Kafka cluster stores one credential for
/// every broker, so every connection of a client is offered the same salt. RFC 5802 (section
/// 5.1) lets a client keep these keys for the next authentication; a client that reconnects
/// in a failover, or hedges past a hung broker, then pays the derivation once. They stand
/// for the password with these brokers: `Debug` shows neither key nor salt.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramKeys {
    hash: ScramHash,
    salt: Vec<u8>,
    iterations: u32,
    client_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl core::fmt::Debug for ScramKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ScramKeys")
            .field("hash", &self.hash)
            .field("iterations", &self.iterations)
            .field("salt", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl ScramKeys {
    /// Derives the keys of `password` for this salt and iteration count (PBKDF2).
    fn derive(hash: ScramHash, password: &str, salt: Vec<u8>, iterations: u32) -> ScramKeys {
        let (client_key, server_key) = match hash {
            ScramHash::Sha256 => keys::<sha2::Sha256, Hmac<sha2::Sha256>>(password, &salt, iterations),
            ScramHash::Sha512 => keys::<sha2::Sha512, Hmac<sha2::Sha512>>(password, &salt, iterations),
        };
        ScramKeys { hash, salt, iterations, client_key, server_key }
    }

    /// Whether these keys answer a server that asks for `hash`, `salt` and `iterations`.
    fn answers(&self, hash: ScramHash, salt: &[u8], iterations: u32) -> bool {
        self.hash == hash && self.iterations == iterations && self.salt == salt
    }
}

/// `ClientKey` and `ServerKey` of `password` (PBKDF2 over `M`, the keyed HMAC that
/// precomputes its pads, then one HMAC each).
fn keys<D, M>(password: &str, salt: &[u8], iterations: u32) -> (Vec<u8>, Vec<u8>)
where
    D: Digest + BlockSizeUser + Clone,
    M: KeyInit + Update + FixedOutput + Clone + Sync,
{
    let mut salted = alloc::vec![0u8; <D as Digest>::output_size()];
    // HMAC takes keys of every length, so PBKDF2 over it cannot fail.
    let _ = pbkdf2::pbkdf2::<M>(password.as_bytes(), salt, iterations, &mut salted);
    (hmac::<D>(&salted, &[b"Client Key"]), hmac::<D>(&salted, &[b"Server Key"]))
}

/// Answers the server's first message (`r=…,s=…,i=…`): checks it extends our nonce and asks
/// for a sane iteration count, then proves we know the password. `keys` are the keys a
/// connection derived before: used when they answer this salt and iteration count, replaced
/// by a fresh derivation when they do not.
pub(super) fn client_final(
    hash: ScramHash,
    password: &str,
    first: &ClientFirst,
    nonce: &str,
    server_first: &[u8],
    keys: &mut Option<Arc<ScramKeys>>,
) -> Result<ClientFinal, AttemptError> {
    let text = core::str::from_utf8(server_first).map_err(|_| malformed("the server-first message is not UTF-8"))?;
    let (mut combined, mut salt, mut iterations) = (None, None, None);
    for (i, attribute) in text.split(',').enumerate() {
        match attribute.split_once('=') {
            Some(("m", _)) if i == 0 => {
                return Err(malformed("the server requires a SCRAM extension this client does not know"))
            }
            Some(("r", value)) => combined = Some(value),
            Some(("s", value)) => salt = Some(value),
            Some(("i", value)) => iterations = Some(value),
            Some(_) => {} // an extension: ignored, as RFC 5802 asks
            None => {
                let attribute = excerpt(attribute);
                return Err(malformed(&format!("the server-first message has a bad attribute {attribute:?}")));
            }
        }
    }
    let combined = combined.ok_or_else(|| malformed("the server-first message has no nonce (r=)"))?;
    if !combined.starts_with(nonce) || combined.len() <= nonce.len() {
        return Err(malformed("the server's nonce does not extend the client's"));
    }
    if !combined.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(malformed("the server's nonce is not printable"));
    }
    let salt = salt.ok_or_else(|| malformed("the server-first message has no salt (s=)"))?;
    let salt = BASE64.decode(salt).map_err(|_| malformed("the server's salt is not base64"))?;
    if salt.is_empty() {
        return Err(malformed("the server's salt is empty"));
    }
    let iterations = iterations.ok_or_else(|| malformed("the server-first message has no iteration count (i=)"))?;
    let iterations: u32 = match iterations.parse() {
        Ok(n) if (1..=MAX_ITERATIONS).contains(&n) => n,
        _ => {
            return Err(malformed(&format!(
                "the server asks for {:?} iterations; this client accepts 1 to {MAX_ITERATIONS}",
                excerpt(iterations)
            )))
        }
    };
    let without_proof = format!("c=biws,r={combined}");
    // RFC 5802's AuthMessage, `bare,server-first,without-proof`, is signed in parts: joined,
    // it would hold the server's nonce twice, twice the frame it came in.
    let auth_message = [first.bare.as_bytes(), b",", server_first, b",", without_proof.as_bytes()];
    let (keys, derived) = match keys {
        Some(kept) if kept.answers(hash, &salt, iterations) => (kept.clone(), false),
        _ => (keys.insert(Arc::new(ScramKeys::derive(hash, password, salt, iterations))).clone(), true),
    };
    let (proof, server_signature) = match hash {
        ScramHash::Sha256 => prove::<sha2::Sha256>(&keys, &auth_message),
        ScramHash::Sha512 => prove::<sha2::Sha512>(&keys, &auth_message),
    };
    // Joined at its exact size (`format!` would reserve twice the broker's nonce).
    let message = [without_proof.as_str(), ",p=", &BASE64.encode(proof)].concat();
    Ok(ClientFinal { message, server_signature, derived })
}

/// Checks the server's last message (`v=signature`, or `e=error`): a server that cannot sign
/// with our password's keys does not know it.
pub(super) fn verify_server_final(server_final: &[u8], expected: &[u8]) -> Result<(), AttemptError> {
    let text = core::str::from_utf8(server_final).map_err(|_| malformed("the server-final message is not UTF-8"))?;
    let first = text.split(',').next().unwrap_or_default();
    match first.split_once('=') {
        Some(("v", signature)) => match BASE64.decode(signature) {
            Ok(signature) if signature == expected => Ok(()),
            Ok(_) => Err(AttemptError::with_detail(
                ErrorKind::Authentication,
                "the broker's SCRAM server signature does not match: it does not hold this user's credentials",
            )),
            Err(_) => Err(malformed("the server's signature is not base64")),
        },
        Some(("e", error)) => {
            let error = excerpt(error);
            Err(AttemptError::with_detail(ErrorKind::Authentication, format!("the broker refused the proof: {error}")))
        }
        _ => Err(malformed("the server-final message has neither a signature (v=) nor an error (e=)")),
    }
}

/// RFC 5802's proof: the client proof and the server signature of `auth_message` (the
/// concatenation of its parts), from the derived keys.
fn prove<D: Digest + BlockSizeUser + Clone>(keys: &ScramKeys, auth_message: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
    let stored_key = D::digest(&keys.client_key);
    let client_signature = hmac::<D>(&stored_key, auth_message);
    let proof = keys.client_key.iter().zip(&client_signature).map(|(k, s)| k ^ s).collect();
    (proof, hmac::<D>(&keys.server_key, auth_message))
}

/// The HMAC of the concatenation of `data`.
fn hmac<D: Digest + BlockSizeUser + Clone>(key: &[u8], data: &[&[u8]]) -> Vec<u8> {
    // `SimpleHmac` accepts any key length; the fallback (an empty MAC) is unreachable.
    match <SimpleHmac<D> as KeyInit>::new_from_slice(key) {
        Ok(mut mac) => {
            for part in data {
                Update::update(&mut mac, part);
            }
            mac.finalize_fixed().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// RFC 5802's `saslname`: `=` and `,` escaped.
fn sasl_name(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

fn malformed(problem: &str) -> AttemptError {
    AttemptError::with_detail(ErrorKind::Protocol, format!("SCRAM: {problem}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3's example exchange, byte for byte.
    #[test]
    fn rfc_7677_example() {
        let nonce = "rOprNGfwEbeRWgbNEkqO";
        let first = client_first("user", nonce);
        assert_eq!(first.message, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let last = client_final(ScramHash::Sha256, "pencil", &first, nonce, server_first, &mut None).unwrap();
        assert_eq!(
            last.message,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", &last.server_signature).unwrap();
        let forged = verify_server_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", &last.server_signature);
        assert_eq!(forged.unwrap_err().kind, ErrorKind::Authentication);
    }

    /// RFC 7677's server-first for the client nonce `nonce`, with `salt`.
    fn server_first(nonce: &str, salt: &str) -> String {
        format!("r={nonce}%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s={salt},i=4096")
    }

    #[test]
    fn kept_keys_answer_the_same_salt_and_a_new_salt_derives_anew() {
        let rfc_salt = "W22ZaJ0SNY7soEsUEjb6gQ==";
        let answer = |nonce: &str, salt: &str, keys: &mut Option<Arc<ScramKeys>>| {
            let first = client_first("user", nonce);
            client_final(ScramHash::Sha256, "pencil", &first, nonce, server_first(nonce, salt).as_bytes(), keys)
                .unwrap()
        };
        let mut kept = None;
        let derived = answer("rOprNGfwEbeRWgbNEkqO", rfc_salt, &mut kept);
        let keys = kept.clone().expect("derived and kept");
        assert!(derived.message.ends_with(",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="), "{}", derived.message);

        // Another connection, another nonce, the same salt: the kept keys prove it, and they
        // prove it as a fresh derivation would.
        let reused = answer("anotherNonce", rfc_salt, &mut kept);
        assert!(Arc::ptr_eq(&keys, kept.as_ref().unwrap()), "the kept keys were used, not replaced");
        let fresh = answer("anotherNonce", rfc_salt, &mut None);
        assert_eq!((reused.message, reused.server_signature), (fresh.message, fresh.server_signature));

        // Keys that answer the salt are used as they are: kept keys of another password give
        // another proof, which is what shows no derivation ran.
        let first = client_first("user", "n");
        let wrong =
            client_final(ScramHash::Sha256, "other", &first, "n", server_first("n", rfc_salt).as_bytes(), &mut None);
        let mut wrong_keys =
            Some(Arc::new(ScramKeys::derive(ScramHash::Sha256, "other", BASE64.decode(rfc_salt).unwrap(), 4096)));
        assert_eq!(answer("n", rfc_salt, &mut wrong_keys).message, wrong.unwrap().message);

        // A new salt (the credential was changed) derives anew and replaces the kept keys.
        let new_salt = BASE64.encode(b"another salt");
        let changed = answer("anotherNonce", &new_salt, &mut kept);
        assert!(!Arc::ptr_eq(&keys, kept.as_ref().unwrap()));
        assert_eq!(changed.message, answer("anotherNonce", &new_salt, &mut None).message);
        // A SCRAM-SHA-512 server with the same salt is another credential too.
        let first = client_first("user", "n");
        let sha512 =
            client_final(ScramHash::Sha512, "pencil", &first, "n", server_first("n", &new_salt).as_bytes(), &mut kept);
        assert!(sha512.is_ok() && kept.as_ref().unwrap().hash == ScramHash::Sha512);
    }

    #[test]
    fn kept_keys_never_show_in_debug() {
        let keys = ScramKeys::derive(ScramHash::Sha512, "pencil", b"the salt".to_vec(), 16);
        let shown = format!("{keys:?}");
        assert!(shown.contains("Sha512") && shown.contains("16"), "{shown}");
        for secret in [&keys.client_key[..], &keys.server_key[..], &keys.salt[..]] {
            assert!(!shown.contains(&format!("{secret:?}")) && !shown.contains(&BASE64.encode(secret)), "{shown}");
        }
        assert!(!shown.contains("pencil"));
    }

    #[test]
    fn usernames_are_escaped() {
        assert_eq!(client_first("a=b,c", "N").bare, "n=a=3Db=2Cc,r=N");
    }

    #[test]
    fn hostile_server_first_messages_are_typed_errors() {
        let first = client_first("user", "abc");
        let salt = BASE64.encode(b"salt");
        for (bad, says) in [
            (format!("r=xyz123,s={salt},i=4096"), "does not extend"),
            (format!("r=abc,s={salt},i=4096"), "does not extend"),
            (String::from("r=abcd,s=!!!,i=4096"), "not base64"),
            (String::from("r=abcd,s=,i=4096"), "salt is empty"),
            (format!("r=abcd,s={salt},i=0"), "iterations"),
            (format!("r=abcd,s={salt},i=1000000000"), "iterations"),
            (format!("r=abcd,s={salt},i=-1"), "iterations"),
            (format!("r=abcd,s={salt}"), "no iteration count"),
            (format!("m=ext,r=abcd,s={salt},i=1"), "extension"),
            (format!("s={salt},i=1"), "no nonce"),
            (String::from("garbage"), "bad attribute"),
            (String::new(), "bad attribute"),
        ] {
            let error =
                client_final(ScramHash::Sha512, "pw", &first, "abc", bad.as_bytes(), &mut None).err().expect(&bad);
            assert_eq!(error.kind, ErrorKind::Protocol, "{bad}");
            assert!(error.detail.contains(says), "{bad}: {error}");
        }
        let error = client_final(ScramHash::Sha256, "pw", &first, "abc", &[0xff, 0xfe], &mut None).err().unwrap();
        assert!(error.detail.contains("UTF-8"));
        for bad in [&b"x=1"[..], b"", b"v=!!", &[0xff]] {
            assert!(verify_server_final(bad, &[1, 2]).is_err());
        }
        assert!(verify_server_final(b"e=invalid-proof", &[1]).unwrap_err().detail.contains("invalid-proof"));
    }
}
