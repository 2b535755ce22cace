//! The stagger library's probe for `lab/peers` (the peer benchmark): one refresh of the
//! seeds with the default options — what `stagger_tokio::refresh(&RefreshConfig::default(), …)`
//! does — printed as one JSON line, like the other clients' probes there.
//!
//! ```text
//! cargo run --release -p stagger-lab --bin peers_probe -- SEEDS [TUNED] [WARMUP_ADDRESS]
//! ```
//!
//! `SEEDS` is a comma-separated list of `host:port`. `TUNED` is accepted for the benchmark's
//! uniform command line and ignored (stagger runs at its defaults). With `WARMUP_ADDRESS` one
//! refresh of that healthy broker comes first, so first-use costs are not billed, as for the
//! other probes; the probe then prints `{"ready":true}` and waits for a line on stdin (the
//! benchmark makes its faults in between). Prints `{"ok":true,"elapsed_ms":…,"brokers":N,"connections":C,"attempts":A}`
//! (`connections`: attempts whose TCP handshake completed) or `{"ok":false,…,"error":"…"}`.
//!
//! Over SASL_SSL (`bench.py --listener sasl_ssl`) the benchmark sets `PEERS_SECURITY_PROTOCOL=SASL_SSL`,
//! `PEERS_SASL_MECHANISM`, `PEERS_SASL_USERNAME`, `PEERS_SASL_PASSWORD` and `PEERS_CA_FILE`, which
//! every probe that speaks SASL_SSL reads alike.

use std::time::Instant;

use stagger_lab::bench::over_sasl_ssl;
use stagger_tokio::{refresh_with, RefreshOptions};

/// The default options, with TLS and SASL when the benchmark runs over SASL_SSL.
fn options() -> Result<RefreshOptions, String> {
    let options = RefreshOptions::default();
    match std::env::var("PEERS_SECURITY_PROTOCOL").as_deref() {
        Err(_) | Ok("PLAINTEXT") => Ok(options),
        Ok("SASL_SSL") => {
            let var = |name: &str| std::env::var(name).map_err(|_| format!("SASL_SSL needs {name}"));
            let (mechanism, username) = (var("PEERS_SASL_MECHANISM")?, var("PEERS_SASL_USERNAME")?);
            let ca_file = var("PEERS_CA_FILE")?.into();
            over_sasl_ssl(options, &mechanism, &username, &var("PEERS_SASL_PASSWORD")?, ca_file)
        }
        Ok(other) => Err(format!("PEERS_SECURITY_PROTOCOL {other:?}: expected PLAINTEXT or SASL_SSL")),
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(seeds) = args.first() else {
        eprintln!("usage: peers_probe SEEDS [TUNED] [WARMUP_ADDRESS]");
        std::process::exit(2);
    };
    let seeds: Vec<&str> = seeds.split(',').filter(|s| !s.is_empty()).collect();
    let options = options().unwrap_or_else(|e| {
        eprintln!("peers_probe: {e}");
        std::process::exit(2);
    });
    if let Some(warm) = args.get(2).filter(|w| !w.is_empty()) {
        if let Err(e) = refresh_with(&options, &[warm.as_str()], |_| {}).await {
            eprintln!("warm-up failed: {e}");
        }
        // Warm-up done: tell the benchmark, and wait for its go (a line on stdin).
        println!("{{\"ready\":true}}");
        let mut go = String::new();
        let _ = std::io::stdin().read_line(&mut go);
    }
    let started = Instant::now();
    let line = match refresh_with(&options, &seeds, |_| {}).await {
        Ok(outcome) => format!(
            "{{\"ok\":true,\"elapsed_ms\":{:.3},\"brokers\":{},\"connections\":{},\"attempts\":{},\"winner\":{}}}",
            outcome.elapsed.as_secs_f64() * 1000.0,
            outcome.metadata.brokers.len(),
            outcome.connections_opened(),
            outcome.attempts.len(),
            quote(&outcome.winner),
        ),
        Err(e) => format!(
            "{{\"ok\":false,\"elapsed_ms\":{:.3},\"error\":{}}}",
            started.elapsed().as_secs_f64() * 1000.0,
            quote(&e.to_string())
        ),
    };
    println!("{line}");
}
