//! Credentials never leave the process but on the wire: not in a `--trace FILE`, not on
//! stdout or stderr, not in the `Debug` of any configuration type a program might log.
//!
//! The trace test authenticates for real — `stagger metadata --trace` with PLAIN,
//! SCRAM-SHA-256 and SCRAM-SHA-512 against real Apache Kafka's `SASL_PLAINTEXT` listener
//! (testing/kafka-fixture), through a TCP relay that records what the client sends. That
//! recording holds the secrets as they travel (PLAIN's `\0user\0password`, SCRAM's client
//! proof), which is the proof the test looks for the right bytes; the trace must hold none
//! of them, in any of the forms a serializer might give them (text, base64, a JSON array of
//! the bytes).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use assert_cmd::Command;
use stagger::kafka::sasl::{Sasl, Secret, TokenSource};
use stagger::kafka::ExchangeConfig;
use stagger_kafka_fixture::{KafkaCluster, SASL_PASSWORD, SASL_USERNAME};
use stagger_tokio::properties::ClientProperties;
use stagger_tokio::RefreshOptions;

/// A scratch directory of this test binary's own.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stagger-cli-secrets-{}-{name}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(dir.join("xdg")).unwrap();
    dir
}

/// A file only its owner may read (a secret at rest as it should be).
fn private_file(path: &Path, content: &str) -> PathBuf {
    std::fs::write(path, content).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    path.to_path_buf()
}

/// Relays every connection to `upstream`, recording the bytes clients send.
struct Relay {
    address: String,
    sent: Arc<Mutex<Vec<u8>>>,
}

fn relay(upstream: String) -> Relay {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&sent);
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            let Ok(mut broker) = TcpStream::connect(&upstream) else { continue };
            let (mut client_reader, mut broker_writer) = (client.try_clone().unwrap(), broker.try_clone().unwrap());
            let record = Arc::clone(&record);
            std::thread::spawn(move || {
                let mut buf = [0u8; 16 * 1024];
                while let Ok(n @ 1..) = client_reader.read(&mut buf) {
                    record.lock().unwrap().extend_from_slice(&buf[..n]);
                    if broker_writer.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                broker_writer.shutdown(Shutdown::Write).ok();
            });
            std::thread::spawn(move || {
                std::io::copy(&mut broker, &mut client).ok();
                client.shutdown(Shutdown::Write).ok();
            });
        }
    });
    Relay { address, sent }
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            out.push(if i <= chunk.len() { BASE64[(n >> (18 - 6 * i)) as usize & 63] as char } else { '=' });
        }
    }
    out
}

fn unbase64(text: &str) -> Vec<u8> {
    let digits: Vec<u32> =
        text.bytes().filter(|&b| b != b'=').map(|b| BASE64.iter().position(|&c| c == b).unwrap() as u32).collect();
    let mut out = Vec::new();
    for chunk in digits.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, d)| n | d << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// Every form in which `secret` could show up in text: as it is, in base64, and as the
/// JSON array serde makes of bytes.
fn forms(secret: &[u8]) -> Vec<String> {
    let mut forms = vec![base64(secret), secret.iter().map(u8::to_string).collect::<Vec<_>>().join(",")];
    if let Ok(text) = std::str::from_utf8(secret) {
        forms.push(text.to_string());
    }
    forms
}

/// SCRAM's client proofs (`p=…`, base64) in what a client sent.
fn scram_proofs(sent: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8_lossy(sent);
    text.match_indices("c=biws,r=")
        .filter_map(|(at, _)| {
            let message = &text[at..];
            let proof = &message[message.find(",p=")? + 3..];
            let end = proof.find(|c: char| !(c.is_ascii_alphanumeric() || "+/=".contains(c))).unwrap_or(proof.len());
            Some(unbase64(&proof[..end]))
        })
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// `stagger metadata --trace` authenticating with each password mechanism through the relay,
/// with the right password and with a wrong one: the trace (written either way), stdout
/// and stderr hold neither password, nor PLAIN's message, nor a SCRAM proof, in any form.
#[test]
fn a_trace_of_a_sasl_refresh_holds_no_credential() {
    let Some(kafka) = KafkaCluster::shared() else { return };
    let dir = scratch("trace");
    let wrong = "Wr0ng-but-recognisable-pw";
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        for password in [SASL_PASSWORD, wrong] {
            let relay = relay(kafka.sasl_plaintext()[0].clone());
            let file = private_file(
                &dir.join("client.properties"),
                &format!(
                    "bootstrap.servers={}\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n\
                     sasl.username={SASL_USERNAME}\nsasl.password={password}\n",
                    relay.address
                ),
            );
            let trace = dir.join("trace.json");
            std::fs::remove_file(&trace).ok();
            let output = Command::cargo_bin("stagger")
                .unwrap()
                .env("HOME", &dir)
                .env("XDG_CONFIG_HOME", dir.join("xdg"))
                .env_remove("STAGGER_CONFIG")
                .args(["metadata", "--json", "--retries", "0", "-F"])
                .arg(&file)
                .arg("--trace")
                .arg(&trace)
                .timeout(Duration::from_secs(60))
                .output()
                .unwrap();
            let what = format!("{mechanism} with the {} password", if password == wrong { "wrong" } else { "right" });
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.success(), password == SASL_PASSWORD, "{what}: {stderr}");
            if password == wrong {
                assert!(stderr.contains("SASL_AUTHENTICATION_FAILED"), "{what}: {stderr}");
            }
            let trace = std::fs::read(&trace).unwrap_or_else(|e| panic!("{what}: no trace written ({e}): {stderr}"));
            assert!(
                contains(&trace, b"\"events\"") && contains(&trace, relay.address.as_bytes()),
                "{what}: not a trace"
            );

            // What the client sent: the credentials are there, in the form each mechanism sends.
            let sent = relay.sent.lock().unwrap().clone();
            let mut secrets: Vec<Vec<u8>> = vec![password.as_bytes().to_vec()];
            match mechanism {
                "PLAIN" => {
                    let message = format!("\0{SASL_USERNAME}\0{password}").into_bytes();
                    assert!(contains(&sent, &message), "{what}: the relay did not see PLAIN's message");
                    secrets.push(message);
                }
                _ => {
                    let proofs = scram_proofs(&sent);
                    assert_eq!(proofs.len(), 1, "{what}: one client-final message");
                    let sent_proof = format!(",p={}", base64(&proofs[0]));
                    assert!(contains(&sent, sent_proof.as_bytes()), "{what}: the proof, re-encoded, is what was sent");
                    assert!(!contains(&sent, password.as_bytes()), "{what}: SCRAM sent the password itself");
                    secrets.extend(proofs);
                }
            }
            let written = [&trace[..], &output.stdout, &output.stderr].concat();
            for secret in &secrets {
                for form in forms(secret) {
                    assert!(!contains(&written, form.as_bytes()), "{what}: the trace or the output holds {form:?}");
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The `Debug` of every configuration type on the way from a file to a refresh — the
/// properties, the resolved settings, the options and the exchange config they fill in, the
/// SASL settings, a token source, an error about a secret — shows no secret.
#[test]
fn no_configuration_type_debug_prints_a_secret() {
    const PW: &str = "Debug-me-not-0xC0FFEE";
    let texts = [
        format!("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=u\nsasl.password={PW}\nbootstrap.servers=h:1\n"),
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nbootstrap.servers=h:1\n\
             sasl.jaas.config=x.ScramLoginModule required username=\"u\" password=\"{PW}\";\n"
        ),
        format!("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\nsasl.oauthbearer.token={PW}\n"),
        format!("security.protocol=SSL\nssl.key.password={PW}\n"),
        format!("sasl.jaas.config=x required password=\"{PW}\n"),
    ];
    let mut resolved = 0;
    for text in &texts {
        let properties = ClientProperties::parse_file_text(text, "client.properties");
        let mut shown = format!("{properties:?}");
        match properties.resolve() {
            Ok(settings) => {
                resolved += 1;
                assert!(settings.sasl.is_some() || settings.tls.is_some(), "{settings:?}");
                shown += &format!("{settings:?}");
                let mut options = RefreshOptions::default();
                settings.apply(&mut options).unwrap();
                assert_eq!(options.exchange.sasl, settings.sasl, "the credentials reached the exchange config");
                shown += &format!("{options:?} {:?}", options.exchange);
            }
            Err(error) => shown += &format!("{error} {error:?}"),
        }
        assert!(!shown.contains(PW), "a secret in Debug: {shown}");
    }
    assert_eq!(resolved, 3, "the SASL files resolve; the key password and the broken JAAS line do not");
    for sasl in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] {
        let sasl = Sasl::from_parts(sasl, "u", Secret::new(PW)).unwrap();
        let config = ExchangeConfig { sasl: Some(sasl.clone()), ..ExchangeConfig::default() };
        let shown = format!("{sasl:?} {config:?} {:?}", Secret::new(PW));
        assert!(!shown.contains(PW) && shown.contains("<redacted>"), "{shown}");
    }
    let source = TokenSource::new(|| Ok(PW.to_string()));
    let config = source.apply(&ExchangeConfig::default()).unwrap();
    let shown = format!("{source:?} {config:?}");
    assert!(!shown.contains(PW), "{shown}");
}
