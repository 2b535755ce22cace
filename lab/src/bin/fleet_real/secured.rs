//! What TLS and SASL cost a fresh connection, for `--listener sasl_ssl`.
//!
//! Measured from outside the tokio adapter, with the same one-shot refreshes
//! (`stagger_tokio::refresh_with`, `RefreshConfig::sequential()`) over both listeners, so
//! rustls and the core's SCRAM do the work and nothing here re-implements them. The adapter
//! exposes no TLS or SASL step of its own to time, but every attempt's report has the
//! instants the core was told of: the TCP connection up (`connected`), the broker's first
//! answer (`answered`: over TLS the handshake completing — `KafkaAttempt::handle_secured` —
//! over plaintext the ApiVersions answer) and the end (`ended`: the Metadata answer). So:
//!
//! * over SASL_SSL, `connected → answered` is the TLS handshake as the client sees it (one
//!   round trip and both sides' cryptography), and `answered → ended` is ApiVersions,
//!   SaslHandshake, two SaslAuthenticate (SCRAM's client-first and client-final, with the
//!   client's PBKDF2) and Metadata;
//! * over PLAINTEXT, `connected → ended` is ApiVersions and Metadata alone,
//!
//! and the difference of the last two is what SASL adds (see `fit` in `main.rs`).
//!
//! Saturated, the same refreshes run in closed loops (each loop: connect, TLS, SASL,
//! ApiVersions, Metadata, close, again) against several brokers at once; the answers per
//! second give the machine's time per fresh connection, and the CPU time each broker's
//! process used (from `/proc`) divided by the refreshes it answered gives the broker's own.
//! The two differ on this machine because the clients' TLS and PBKDF2 share its cores with
//! the brokers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use stagger_lab::fleet_file::{Burst, Churn, Fresh, HandshakeTimes, Spread, ThreadCpu};

use stagger_tokio::{refresh_with, AttemptOutcome, RefreshOptions};
use tokio::task::JoinSet;

use crate::broker_cpu::{cpu_us, ThreadsCpu};
use crate::calibrate::{by_target, median, median_per_target, steady_rate};
use crate::forwarder::Handshake;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `count` one-shot refreshes of `target` with `options`, one at a time, `gap` apart.
pub async fn at_rest(target: &str, options: &RefreshOptions, count: usize, gap: Duration) -> Res<Fresh> {
    let (mut connect, mut first, mut after, mut exchange, mut total) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..count {
        let outcome = refresh_with(options, &[target], |_| {}).await?;
        let won = outcome
            .attempts
            .iter()
            .find(|a| matches!(a.outcome, AttemptOutcome::Won))
            .ok_or("a refresh won without a winning attempt")?;
        let (Some(connected), Some(answered), Some(ended)) = (won.connected, won.answered, won.ended) else {
            return Err(format!("the winning attempt to {target} lacks a phase: {won:?}").into());
        };
        connect.push(us(connected.saturating_sub(won.started)));
        first.push(us(answered.saturating_sub(connected)));
        after.push(us(ended.saturating_sub(answered)));
        exchange.push(us(ended.saturating_sub(connected)));
        total.push(us(ended.saturating_sub(won.started)));
        tokio::time::sleep(gap).await;
    }
    Ok(Fresh {
        target: target.to_owned(),
        connect: Spread::of(connect),
        first_answer: Spread::of(first),
        after_first_answer: Spread::of(after),
        exchange: Spread::of(exchange),
        total: Spread::of(total),
    })
}

/// The TLS handshakes a forwarder saw, timed from each ClientHello passing it.
pub fn handshake_times(handshakes: &[Handshake]) -> HandshakeTimes {
    let since = |at: fn(&Handshake) -> Option<u64>| -> Vec<f64> {
        handshakes.iter().filter_map(|h| at(h).map(|t| t.saturating_sub(h.hello_us) as f64)).collect()
    };
    HandshakeTimes {
        n: handshakes.len(),
        answered: handshakes.iter().filter(|h| h.answered_us.is_some()).count(),
        established: handshakes.iter().filter(|h| h.established_us.is_some()).count(),
        server_hello: Spread::of(since(|h| h.answered_us)),
        client_finished: Spread::of(since(|h| h.finished_us)),
        established_after: Spread::of(since(|h| h.established_us)),
    }
}

/// `loops` closed loops per target, `per_target` refreshes per target in all, `reps` times;
/// `pids` are the targets' broker processes.
pub async fn churn(
    targets: &[String],
    pids: &[i32],
    options: &RefreshOptions,
    loops: usize,
    per_target: usize,
    reps: usize,
    label: &'static str,
) -> Res<Churn> {
    let per_loop = per_target.div_ceil(loops);
    let options = Arc::new(options.clone());
    let mut repetitions = Vec::new();
    let mut broker_cpu = Vec::new();
    let mut by_thread = Vec::new();
    let mut client_cpu = Vec::new();
    let failed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..reps.max(1) {
        let before: Vec<Option<u64>> = pids.iter().map(|p| cpu_us(&p.to_string())).collect();
        let threads = ThreadsCpu::start(pids.to_vec());
        let self_before = cpu_us("self");
        let mut set = JoinSet::new();
        for (ti, target) in targets.iter().enumerate() {
            for _ in 0..loops {
                let (options, target, failed) = (options.clone(), target.clone(), failed.clone());
                set.spawn(async move {
                    let mut done: Vec<Instant> = Vec::with_capacity(per_loop);
                    for _ in 0..per_loop {
                        match refresh_with(&options, &[target.as_str()], |_| {}).await {
                            Ok(_) => done.push(Instant::now()),
                            Err(_) => {
                                failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }
                    Ok::<_, Box<dyn std::error::Error + Send + Sync>>((ti, done))
                });
            }
        }
        let mut by_target = by_target(set, targets.len()).await?;
        let answered: Vec<usize> = by_target.iter().map(Vec::len).collect();
        if answered.contains(&0) {
            return Err(format!("{label}: a target answered no refresh ({answered:?})").into());
        }
        repetitions.push(by_target.iter_mut().map(|done| steady_rate(done)).collect());
        broker_cpu.push(
            pids.iter()
                .zip(&before)
                .zip(&answered)
                .map(|((pid, before), &n)| match (before, cpu_us(&pid.to_string())) {
                    (Some(b), Some(a)) => a.saturating_sub(*b) as f64 / n as f64,
                    _ => 0.0,
                })
                .collect::<Vec<f64>>(),
        );
        // Per refresh, the mean over the targets.
        let per_target: Vec<ThreadCpu> = threads.since(|i| 1.0 / answered[i] as f64).into_iter().flatten().collect();
        if !per_target.is_empty() {
            by_thread.push(ThreadCpu::each(&per_target, |v| v.iter().sum::<f64>() / v.len() as f64));
        }
        if let (Some(b), Some(a)) = (self_before, cpu_us("self")) {
            client_cpu.push(a.saturating_sub(b) as f64 / answered.iter().sum::<usize>() as f64);
        }
    }
    let per_second = median_per_target(&repetitions, targets.len());
    client_cpu.sort_by(f64::total_cmp);
    Ok(Churn {
        rate: Burst {
            targets: targets.to_vec(),
            api: label.into(),
            connections: loops,
            requests_per_target: per_loop * loops,
            service_us: per_second.iter().map(|r| if *r > 0.0 { 1e6 / r } else { 0.0 }).collect(),
            per_second,
            repetitions,
            ..Burst::default()
        },
        broker_cpu_us: median_per_target(&broker_cpu, targets.len()),
        client_cpu_us: client_cpu.get(client_cpu.len() / 2).copied().unwrap_or(0.0),
        broker_threads_cpu_us: (!by_thread.is_empty())
            .then(|| ThreadCpu::each(&by_thread, |v| median(v).unwrap_or(0.0))),
        failed: failed.load(std::sync::atomic::Ordering::Relaxed),
    })
}

/// Warms the brokers' TLS and SASL path up (their JIT compiles it): `per_target` fresh
/// refreshes of each target, four at a time.
pub async fn warm(targets: &[String], options: &RefreshOptions, per_target: usize) -> Res<()> {
    let options = Arc::new(options.clone());
    let mut set = JoinSet::new();
    for target in targets {
        for _ in 0..4 {
            let (options, target) = (options.clone(), target.clone());
            set.spawn(async move {
                for _ in 0..per_target.div_ceil(4) {
                    refresh_with(&options, &[target.as_str()], |_| {}).await?;
                }
                Ok::<(), stagger_tokio::Error>(())
            });
        }
    }
    while let Some(joined) = set.join_next().await {
        joined??;
    }
    Ok(())
}
