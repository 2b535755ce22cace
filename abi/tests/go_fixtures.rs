//! The Go binding's fake broker answers with frames that `kafka-protocol` encodes here, never
//! with bytes written by hand: `bindings/go/testdata/` holds them (correlation id 0, which
//! the fake patches per request). This test fails when they are stale;
//! `STAGGER_BLESS=1 cargo test -p stagger-abi --test go_fixtures` rewrites them.
//!
//! * `api_versions_v3.bin`: ApiVersions v3, Metadata up to v12, SASL handshake and authenticate;
//! * `metadata_v12_small.bin`: Metadata v12, two brokers, two topics of two partitions;
//! * `metadata_v12_big.bin.gz`: Metadata v12, 20 000 topics of 6 partitions (5.5 MiB),
//!   gzipped with `gzip -9 -n` (the comparison is on the decompressed bytes).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bindings/go/testdata")
}

fn api_versions() -> Vec<u8> {
    let keys =
        [(ApiKey::Metadata, 12), (ApiKey::ApiVersions, 3), (ApiKey::SaslHandshake, 1), (ApiKey::SaslAuthenticate, 2)]
            .map(|(key, max)| ApiVersion::default().with_api_key(key as i16).with_max_version(max))
            .to_vec();
    response(0, 3, &ApiVersionsResponse::default().with_api_keys(keys))
}

/// Runs `gzip` with `args`, `input` on its standard input; its output.
fn gzip(args: &[&str], input: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut child = Command::new("gzip")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip runs (the big fixture is stored gzipped)");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(output.status.success(), "gzip {args:?}: {}", output.status);
    output.stdout
}

#[test]
fn the_go_bindings_fake_broker_frames_are_current() {
    let bless = std::env::var("STAGGER_BLESS").as_deref() == Ok("1");
    let fixtures = [
        ("api_versions_v3.bin", api_versions(), false),
        ("metadata_v12_small.bin", response(0, 12, &cluster(2, 2)), false),
        ("metadata_v12_big.bin.gz", response(0, 12, &cluster(20_000, 6)), true),
    ];
    let mut stale = Vec::new();
    for (name, bytes, gzipped) in fixtures {
        let path = testdata().join(name);
        let committed = std::fs::read(&path).ok().map(|b| if gzipped { gzip(&["-dc"], &b) } else { b });
        if committed.as_deref() == Some(&bytes[..]) {
            continue;
        }
        if bless {
            std::fs::create_dir_all(testdata()).unwrap();
            let stored = if gzipped { gzip(&["-9", "-n", "-c"], &bytes) } else { bytes };
            std::fs::write(&path, stored).unwrap();
        } else {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale Go test fixtures {stale:?}: rewrite them with STAGGER_BLESS=1 cargo test -p stagger-abi --test go_fixtures"
    );
}
