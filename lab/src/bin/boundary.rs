//! The Rust baseline of the boundary's cost: the conformance scenarios replayed through the C
//! ABI called natively, as the Go and Python hosts replay them through theirs
//! (`bindings/go/boundary_test.go`, `bindings/python/bench/boundary.py`), so what each host
//! adds shows beside what the core and the ABI cost by themselves.
//!
//! Each replay calls the exported functions as a host does: `stagger_session_new` with the
//! file's config (read by `stagger_abi::conformance`), one `stagger_step` per step with the
//! step's events encoded by `stagger_abi::host` and the actions decoded by it, and at each
//! `REFRESHED` the metadata JSON and the report JSON copied out (what the Go and Python hosts
//! read when a refresh ends), then `stagger_session_free`. The cases:
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
use stagger_abi::conformance;
use stagger_abi::host::{decode_actions, encode_events, HostAction, HostEvent};
use stagger_abi::*;
use stagger_lab::bench::arg;

type Res<T> = Result<T, Box<dyn Error>>;

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
    let file = conformance::Scenario::from_json(&doc).map_err(|e| format!("{name}: {e}"))?;
    let refreshes = file.refreshes();
    if refreshes == 0 {
        return Err(format!("{name}: no refresh ends in it").into());
    }
    Ok(Scenario {
        config: file.config.to_string().into_bytes(),
        now_ns: file.now_ns,
        seed: file.seed,
        steps: file.steps.into_iter().map(|s| (s.now_ns, s.events)).collect(),
        refreshes,
    })
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
