//! The Rust baseline of the boundary's cost: the conformance scenarios replayed through the C
//! ABI called natively, as the Go and Python hosts replay them through theirs
//! (`bindings/go/boundary_test.go`, `bindings/python/bench/boundary.py`), so what each host
//! adds shows beside what the core and the ABI cost by themselves.
//!
//! Each replay calls the exported functions as a host does: `stagger_session_new` with the
//! file's config, one `stagger_step` per step with the step's events encoded by
//! `stagger_abi::host` and the actions decoded by it, and at each `REFRESHED` the metadata
//! JSON and the report JSON copied out (what the Go and Python hosts read when a refresh
//! ends), then `stagger_session_free`. The cases:
//!
//! * `one_shot_healthy/refresh`: one whole one-shot refresh (session, steps, JSON, free);
//! * `kept_connection` and `spare_connection` (long-lived sessions, several refreshes each):
//!   `session`, the whole replay divided by its refreshes; `steps`, the steps alone (with
//!   each refresh's JSON) divided by them.
//!
//! Each case runs for `--secs` seconds (default 3) and prints the mean time per refresh and
//! the median and 99th percentile over batches of `--batch` replays (default 20), then the
//! time of each exported function in one `one_shot_healthy` refresh.
//!
//! ```text
//! cargo run --release -p stagger-lab --bin boundary -- --secs 3
//! ```

use std::error::Error;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use stagger_abi::host::{decode_actions, encode_events, HostAction, HostEvent};
use stagger_abi::*;
use stagger_lab::bench::arg;

type Res<T> = Result<T, Box<dyn Error>>;

/// The error kinds and causes by their names in docs/abi.md ("Codes").
const ERROR_KINDS: [(u8, &str); 13] = [
    (STAGGER_ERROR_DNS, "dns"),
    (STAGGER_ERROR_REFUSED, "refused"),
    (STAGGER_ERROR_CONNECT_TIMEOUT, "connect_timeout"),
    (STAGGER_ERROR_RESPONSE_TIMEOUT, "response_timeout"),
    (STAGGER_ERROR_CLOSED, "closed"),
    (STAGGER_ERROR_PROTOCOL, "protocol"),
    (STAGGER_ERROR_FRAME_TOO_LARGE, "frame_too_large"),
    (STAGGER_ERROR_BROKER, "broker"),
    (STAGGER_ERROR_NO_BROKERS, "no_brokers"),
    (STAGGER_ERROR_TLS, "tls"),
    (STAGGER_ERROR_AUTHENTICATION, "authentication"),
    (STAGGER_ERROR_AUTHORIZATION, "authorization"),
    (STAGGER_ERROR_IO, "io"),
];
const CAUSES: [(u8, &str); 6] = [
    (STAGGER_CAUSE_REQUESTED, "requested"),
    (STAGGER_CAUSE_BOOTSTRAP, "bootstrap"),
    (STAGGER_CAUSE_PERIODIC, "periodic"),
    (STAGGER_CAUSE_STALE_METADATA, "stale_metadata"),
    (STAGGER_CAUSE_CONNECTION_LOST, "connection_lost"),
    (STAGGER_CAUSE_REQUEST_TIMED_OUT, "request_timed_out"),
];

fn byte_of(table: &[(u8, &str)], name: &str) -> Res<u8> {
    Ok(table.iter().find(|(_, n)| *n == name).ok_or_else(|| format!("unknown name {name:?}"))?.0)
}

fn unhex(text: &str) -> Res<Vec<u8>> {
    (0..text.len()).step_by(2).map(|i| Ok(u8::from_str_radix(text.get(i..i + 2).ok_or("odd hex")?, 16)?)).collect()
}

/// A file's event as the host writes it.
fn event(value: &Value) -> Res<HostEvent> {
    let (kind, f) = value.as_object().and_then(|m| m.iter().next()).ok_or("an event is {kind: fields}")?;
    let u64_of = |name: &str| f[name].as_u64().ok_or(format!("{kind}.{name}"));
    let str_of = |name: &str| f[name].as_str().ok_or(format!("{kind}.{name}"));
    let code = || f["code"].as_i64().and_then(|c| i16::try_from(c).ok()).ok_or(format!("{kind}.code"));
    Ok(match kind.as_str() {
        "connected" => HostEvent::Connected(u64_of("conn")?),
        "secured" => HostEvent::Secured(u64_of("conn")?),
        "received" => HostEvent::Received(u64_of("conn")?, unhex(str_of("hex")?)?),
        "closed" => HostEvent::Closed(u64_of("conn")?, f["reset"].as_bool().ok_or("closed.reset")?),
        "io_error" => HostEvent::IoError(
            u64_of("conn")?,
            byte_of(&ERROR_KINDS, str_of("kind")?)?,
            code()?,
            str_of("detail")?.into(),
        ),
        "resolved" => HostEvent::Resolved(
            u64_of("lookup")?,
            f["addresses"]
                .as_array()
                .ok_or("resolved.addresses")?
                .iter()
                .map(|a| Ok(a.as_str().ok_or("an address")?.parse()?))
                .collect::<Res<_>>()?,
        ),
        "resolve_failed" => HostEvent::ResolveFailed(
            u64_of("lookup")?,
            byte_of(&ERROR_KINDS, str_of("kind")?)?,
            code()?,
            str_of("detail")?.into(),
        ),
        "nonce" => HostEvent::Nonce(u64_of("conn")?, unhex(str_of("hex")?)?.try_into().map_err(|_| "a nonce")?),
        "token" => HostEvent::Token(u64_of("conn")?, str_of("token")?.into()),
        "token_failed" => HostEvent::TokenFailed(u64_of("conn")?, str_of("why")?.into()),
        "request_refresh" => HostEvent::RequestRefresh(byte_of(&CAUSES, str_of("cause")?)?, str_of("broker")?.into()),
        other => return Err(format!("unknown event {other:?}").into()),
    })
}

/// A scenario with its events read once.
struct Scenario {
    config: Vec<u8>,
    now_ns: u64,
    seed: u64,
    steps: Vec<(u64, Vec<HostEvent>)>,
    refreshes: usize,
}

fn load(dir: &std::path::Path, name: &str) -> Res<Scenario> {
    let doc: Value = serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json")))?)?;
    let mut s = Scenario {
        config: doc["config"].to_string().into_bytes(),
        now_ns: doc["now_ns"].as_u64().ok_or("now_ns")?,
        seed: doc["seed"].as_u64().ok_or("seed")?,
        steps: Vec::new(),
        refreshes: 0,
    };
    for step in doc["steps"].as_array().ok_or("steps")? {
        let events = step["events"].as_array().ok_or("events")?.iter().map(event).collect::<Res<_>>()?;
        s.steps.push((step["now_ns"].as_u64().ok_or("a step's now_ns")?, events));
        s.refreshes += step["expect"]["actions"]
            .as_array()
            .ok_or("expect.actions")?
            .iter()
            .filter(|a| a.get("refreshed").is_some() || a.get("refresh_failed").is_some())
            .count();
    }
    if s.refreshes == 0 {
        return Err(format!("{name}: no refresh ends in it").into());
    }
    Ok(s)
}

/// The time each exported function took, summed.
#[derive(Default)]
struct Calls {
    session_new: Duration,
    step: Duration,
    metadata: Duration,
    report: Duration,
    session_free: Duration,
}

fn timed<T>(into: &mut Duration, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    *into += start.elapsed();
    out
}

/// Copies the answer `out` points at.
fn answer(out: &StaggerBuf) -> Vec<u8> {
    if out.len == 0 {
        return Vec::new();
    }
    // SAFETY: the ABI points `out` at `len` bytes that live until the next call on the handle.
    unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec()
}

impl Scenario {
    fn open(&self, calls: &mut Calls) -> u64 {
        // SAFETY: a valid pointer and length.
        let handle = timed(&mut calls.session_new, || unsafe {
            stagger_session_new(self.config.as_ptr(), self.config.len(), self.now_ns, self.seed)
        });
        assert_ne!(handle, 0, "the scenario's config was refused");
        handle
    }

    /// Steps through the scenario as a host does; each refresh's end reads the metadata and
    /// the report.
    fn run(&self, handle: u64, calls: &mut Calls) {
        let mut out = StaggerBuf { ptr: std::ptr::null(), len: 0 };
        for (now_ns, events) in &self.steps {
            let batch = encode_events(events);
            // SAFETY: a valid batch and `out`.
            let status = timed(&mut calls.step, || unsafe {
                stagger_step(handle, *now_ns, batch.as_ptr(), batch.len(), &mut out)
            });
            assert_eq!(status, STAGGER_OK);
            // SAFETY: the answer of the call just made.
            let actions =
                decode_actions(unsafe { std::slice::from_raw_parts(out.ptr, out.len) }).expect("an action batch");
            let ended = actions.actions.iter().any(|a| matches!(a, HostAction::Refreshed { .. }));
            black_box(&actions);
            if ended {
                let mut json = StaggerBuf { ptr: std::ptr::null(), len: 0 };
                // SAFETY: a live handle and a valid `json`.
                timed(&mut calls.metadata, || unsafe { stagger_metadata(handle, &mut json) });
                black_box(answer(&json));
                // SAFETY: as above.
                timed(&mut calls.report, || unsafe { stagger_report(handle, &mut json) });
                black_box(answer(&json));
            }
        }
    }

    fn close(&self, handle: u64, calls: &mut Calls) {
        assert_eq!(timed(&mut calls.session_free, || stagger_session_free(handle)), STAGGER_OK);
    }
}

/// Mean, median and p99 µs per refresh over batches.
struct PerRefresh {
    mean: f64,
    p50: f64,
    p99: f64,
    replays: usize,
}

/// Runs `replay` (which returns the time of the part it measures) for `secs` seconds.
fn measure(s: &Scenario, secs: f64, batch: usize, mut replay: impl FnMut() -> Duration) -> PerRefresh {
    for _ in 0..batch {
        replay();
    }
    let mut samples = Vec::new();
    let (mut total, mut replays) = (Duration::ZERO, 0);
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < secs {
        let mut sum = Duration::ZERO;
        for _ in 0..batch {
            sum += replay();
        }
        total += sum;
        replays += batch;
        samples.push(sum.as_secs_f64() * 1e6 / (batch * s.refreshes) as f64);
    }
    samples.sort_by(f64::total_cmp);
    let rank = |q: f64| samples[((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1];
    PerRefresh {
        mean: total.as_secs_f64() * 1e6 / (replays * s.refreshes) as f64,
        p50: rank(0.5),
        p99: rank(0.99),
        replays,
    }
}

fn main() -> Res<()> {
    let dir =
        arg("--dir").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../conformance"), PathBuf::from);
    let secs: f64 = arg("--secs").map_or(Ok(3.0), |s| s.parse())?;
    let batch: usize = arg("--batch").map_or(Ok(20), |s| s.parse())?;
    println!("| case | µs/refresh (mean) | p50 | p99 | replays |");
    println!("|---|---:|---:|---:|---:|");
    let row = |case: &str, r: PerRefresh| {
        println!("| {case} | {:.2} | {:.2} | {:.2} | {} |", r.mean, r.p50, r.p99, r.replays);
        eprintln!(
            "{{\"case\": \"{case}\", \"mean_us\": {:.3}, \"p50_us\": {:.3}, \"p99_us\": {:.3}, \"replays\": {}}}",
            r.mean, r.p50, r.p99, r.replays
        );
    };
    let whole = |s: &Scenario| {
        let mut calls = Calls::default();
        let start = Instant::now();
        let handle = s.open(&mut calls);
        s.run(handle, &mut calls);
        s.close(handle, &mut calls);
        start.elapsed()
    };
    let steps = |s: &Scenario| {
        let mut calls = Calls::default();
        let handle = s.open(&mut calls);
        let start = Instant::now();
        s.run(handle, &mut calls);
        let took = start.elapsed();
        s.close(handle, &mut calls);
        took
    };
    let one_shot = load(&dir, "one_shot_healthy")?;
    row("one_shot_healthy/refresh", measure(&one_shot, secs, batch, || whole(&one_shot)));
    for name in ["kept_connection", "spare_connection"] {
        let s = load(&dir, name)?;
        row(&format!("{name}/session"), measure(&s, secs, batch, || whole(&s)));
        row(&format!("{name}/steps"), measure(&s, secs, batch, || steps(&s)));
    }

    // Where one one-shot refresh's time goes, by exported function.
    let mut calls = Calls::default();
    let n = 20_000;
    for _ in 0..n {
        let handle = one_shot.open(&mut calls);
        one_shot.run(handle, &mut calls);
        one_shot.close(handle, &mut calls);
    }
    println!();
    println!("one_shot_healthy, µs per refresh by function ({n} refreshes):");
    for (name, d) in [
        ("stagger_session_new", calls.session_new),
        ("stagger_step (all steps)", calls.step),
        ("stagger_metadata", calls.metadata),
        ("stagger_report", calls.report),
        ("stagger_session_free", calls.session_free),
    ] {
        println!("  {name}: {:.2}", d.as_secs_f64() * 1e6 / n as f64);
    }
    Ok(())
}
