//! Core benchmarks: cost per input for clusters of 3, 30, 300 and 3,000 brokers, and heap
//! allocations per refresh (counting allocator).
//!
//! Run: `cargo bench -p stagger --bench refresh`. Criterion prints the time per batch and
//! the throughput in inputs per second; the summary at the end prints nanoseconds per input
//! and allocations per refresh as JSON lines (machine-readable), measured in the same run.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant as WallClock};

use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use stagger::{AttemptError, AttemptId, BrokerBook, Command, ErrorKind, Input, Instant, Refresh, RefreshConfig};

struct Counting;
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SIZES: [usize; 4] = [3, 30, 300, 3000];

/// A book of `n` brokers.
fn book(n: usize) -> BrokerBook {
    BrokerBook::new(stagger::test_util::numbered_seeds(n)).unwrap()
}

/// A refresh over `book` with the default policy (throttle 3, no retries so one pass).
fn refresh_over(book: &BrokerBook) -> Refresh {
    let mut config = RefreshConfig::default();
    config.retry.retries = 0;
    Refresh::new(&config, book, Instant::ZERO).unwrap()
}

/// A refresh over `n` brokers (see [`refresh_over`]).
fn fresh(n: usize) -> Refresh {
    refresh_over(&book(n))
}

/// Feeds the refresh its steady-state diet until it ends: each started attempt first
/// connects, then fails (refused), which makes the core start the next one. Returns the
/// number of inputs fed (2 per broker).
fn drive(refresh: &mut Refresh) -> u64 {
    let mut inputs = 0;
    let mut now = 0u64;
    let mut pending = Vec::with_capacity(8);
    loop {
        while let Some(c) = refresh.poll_command() {
            if let Command::Connect { attempt, .. } = c {
                pending.push(attempt);
            }
        }
        let Some(attempt) = pending.pop() else { break };
        now += 100;
        connect_then_refuse(refresh, attempt, now);
        inputs += 2;
    }
    inputs
}

/// The diet behind one long-lived attempt: the first broker answers ApiVersions and then
/// takes its time (it stays in flight to the end), while every other broker connects and is
/// refused. Finished attempts pile up behind the first; the cost per input must not grow
/// with them. Returns the number of inputs fed (timer wake-ups included).
fn drive_behind_a_slow_broker(refresh: &mut Refresh) -> u64 {
    let mut inputs = 0;
    let mut now = 0u64;
    let mut pending = Vec::with_capacity(8);
    let mut first = None;
    while !refresh.is_finished() {
        while let Some(c) = refresh.poll_command() {
            if let Command::Connect { attempt, .. } = c {
                pending.push(attempt);
            }
        }
        if first.is_none() {
            let attempt = pending.pop().expect("the first attempt");
            first = Some(attempt);
            refresh.handle_input(Instant::from_micros(50), Input::Connected { attempt, tls: false });
            refresh.handle_input(Instant::from_micros(100), Input::FirstFrame { attempt });
            inputs += 2;
            continue;
        }
        let Some(attempt) = pending.pop() else {
            let Some(at) = refresh.poll_timeout() else { break };
            now = now.max(at.as_micros());
            refresh.handle_timeout(at);
            inputs += 1;
            continue;
        };
        now += 100;
        connect_then_refuse(refresh, attempt, now);
        inputs += 2;
    }
    inputs
}

/// The steady-state diet for one attempt at `now` µs: its broker connects, then refuses.
fn connect_then_refuse(refresh: &mut Refresh, attempt: AttemptId, now: u64) {
    refresh.handle_input(Instant::from_micros(now), Input::Connected { attempt, tls: false });
    refresh.handle_input(
        Instant::from_micros(now + 50),
        Input::Failed { attempt, error: AttemptError::new(ErrorKind::Refused) },
    );
}

fn per_input(c: &mut Criterion) {
    let mut group = c.benchmark_group("per_input");
    for n in SIZES {
        let inputs = drive(&mut fresh(n));
        group.throughput(Throughput::Elements(inputs));
        group.bench_function(format!("{n}_brokers"), |b| {
            b.iter_batched_ref(
                || fresh(n),
                drive,
                if n >= 3000 { BatchSize::LargeInput } else { BatchSize::SmallInput },
            )
        });
    }
    group.finish();
}

/// Plain-timer summary printed as JSON lines: median ns per input over many refreshes, and
/// the median time and the allocations of `Refresh::new`, and allocations while driving
/// (should be 0).
fn summary() {
    let mut medians = Vec::new();
    for n in SIZES {
        let rounds = (30_000 / n).clamp(20, 2_000);
        let mut samples = Vec::with_capacity(rounds);
        let mut builds = Vec::with_capacity(rounds);
        let mut alloc_drive = 0;
        let mut alloc_build = 0;
        let mut inputs = 0;
        let book = book(n);
        for _ in 0..rounds {
            // Construction: `Refresh::new` alone (the book is built once, as a `Cluster` does).
            let a0 = ALLOCATIONS.load(Ordering::Relaxed);
            let t = WallClock::now();
            let mut r = refresh_over(&book);
            builds.push(t.elapsed().as_nanos() as f64);
            let a1 = ALLOCATIONS.load(Ordering::Relaxed);
            let t = WallClock::now();
            inputs = drive(&mut r);
            let elapsed = t.elapsed();
            let a2 = ALLOCATIONS.load(Ordering::Relaxed);
            alloc_build = a1 - a0;
            // `drive` itself allocates its small `pending` vector once.
            alloc_drive = (a2 - a1).saturating_sub(1);
            samples.push(elapsed.as_nanos() as f64 / inputs as f64);
            drop(r);
        }
        samples.sort_by(|a, b| a.total_cmp(b));
        builds.sort_by(|a, b| a.total_cmp(b));
        let median = samples[samples.len() / 2];
        let build = builds[builds.len() / 2];
        medians.push((n, median));
        println!(
            "{{\"bench\":\"per_input\",\"brokers\":{n},\"inputs_per_refresh\":{inputs},\"median_ns_per_input\":{median:.1},\"median_ns_construction\":{build:.0},\"allocations_construction\":{alloc_build},\"allocations_while_driving\":{alloc_drive}}}"
        );
    }
    let at = |n| medians.iter().find(|(m, _)| *m == n).map(|(_, v)| *v).unwrap();
    println!("{{\"bench\":\"scaling\",\"ratio_3000_vs_30\":{:.2}}}", at(3000) / at(30));

    let mut behind = Vec::new();
    for n in [30, 3000] {
        let rounds = (30_000 / n).clamp(20, 1_000);
        let mut samples: Vec<f64> = (0..rounds)
            .map(|_| {
                let mut r = fresh(n);
                let t = WallClock::now();
                let inputs = drive_behind_a_slow_broker(&mut r);
                t.elapsed().as_nanos() as f64 / inputs as f64
            })
            .collect();
        samples.sort_by(|a, b| a.total_cmp(b));
        let median = samples[samples.len() / 2];
        behind.push(median);
        println!("{{\"bench\":\"behind_a_slow_broker\",\"brokers\":{n},\"median_ns_per_input\":{median:.1}}}");
    }
    println!("{{\"bench\":\"behind_a_slow_broker_scaling\",\"ratio_3000_vs_30\":{:.2}}}", behind[1] / behind[0]);
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500)).sample_size(30);
    targets = per_input
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
