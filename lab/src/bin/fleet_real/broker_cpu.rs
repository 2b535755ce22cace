//! The brokers' own CPU time while the fleet refreshes, read from `/proc`: what a strategy
//! costs the brokers, in all and in its worst 100 ms. Request counts alone cannot compare a
//! strategy that reuses authenticated connections with one that opens new ones: a Metadata
//! request on a kept connection costs a broker well under a millisecond, a new TLS and SASL
//! connection several (`calibration.churn_refresh_*`), and a strategy whose handshakes queue
//! spreads its requests out while it keeps the broker busier.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stagger_lab::fleet_file::ThreadCpu;

/// How often the sampler reads each broker's CPU time. The kernel counts it in 10 ms ticks,
/// so a 100 ms window is read to within about a tick.
const EVERY: Duration = Duration::from_millis(10);

/// The window of the peak.
const PEAK_WINDOW_US: u64 = 100_000;

/// One process's samples: (µs since the sampling began, its CPU time in µs if it ran).
type Series = Vec<(u64, Option<u64>)>;

/// A thread reading each broker's CPU time every [`EVERY`] until [`Sampler::finish`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Series>>,
}

/// Per broker (node order): CPU time used during the sampling, and the most used within any
/// 100 ms of it, in ms. A broker that was not running (killed) counts while it ran.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BrokerCpu {
    pub total_ms: Vec<f64>,
    pub peak_ms_per_100ms: Vec<f64>,
}

impl Sampler {
    /// Starts sampling the processes `pids` (one per broker, node order).
    pub fn start(pids: Vec<i32>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let paths: Vec<String> = pids.iter().map(|p| format!("/proc/{p}/stat")).collect();
            let mut samples: Vec<Series> = vec![Vec::new(); pids.len()];
            let mut next = start;
            loop {
                let at = start.elapsed().as_micros() as u64;
                for (path, series) in paths.iter().zip(&mut samples) {
                    series.push((at, std::fs::read_to_string(path).ok().and_then(|s| stat_cpu_us(&s))));
                }
                if flag.load(Ordering::Relaxed) {
                    return samples;
                }
                next += EVERY;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        });
        Sampler { stop, thread }
    }

    /// Stops sampling (after one last sample) and sums up.
    pub fn finish(self) -> BrokerCpu {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.thread.join().unwrap_or_default();
        BrokerCpu {
            total_ms: samples.iter().map(|s| total_us(s) as f64 / 1e3).collect(),
            peak_ms_per_100ms: samples.iter().map(|s| peak_us(s, PEAK_WINDOW_US) / 1e3).collect(),
        }
    }
}

/// CPU time between the first and the last sample the process was there for (µs).
fn total_us(series: &[(u64, Option<u64>)]) -> u64 {
    let mut seen = series.iter().filter_map(|&(_, cpu)| cpu);
    match (seen.next(), seen.next_back()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    }
}

/// The most CPU time within any `window_us` (µs): from each sample to the first at least
/// `window_us` later, scaled to exactly `window_us` (sampling drifts by a little).
fn peak_us(series: &[(u64, Option<u64>)], window_us: u64) -> f64 {
    let mut peak = 0.0f64;
    let mut j = 0;
    for (i, &(t0, cpu0)) in series.iter().enumerate() {
        j = j.max(i);
        while j < series.len() && series[j].0 < t0 + window_us {
            j += 1;
        }
        let Some(&(t1, cpu1)) = series.get(j) else { break };
        if let (Some(a), Some(b)) = (cpu0, cpu1) {
            peak = peak.max(b.saturating_sub(a) as f64 * window_us as f64 / (t1 - t0) as f64);
        }
    }
    peak
}

/// Process `pid`'s CPU time so far by the kind of thread that spent it (µs), summed over its
/// threads' `schedstat` (nanoseconds). Threads are told apart by their names, which Linux
/// cuts to 15 bytes: Kafka's network threads and request handlers both read
/// `data-plane-kafk`. `None` if the process is gone.
pub fn threads_cpu(pid: i32) -> Option<ThreadCpu> {
    let mut cpu = ThreadCpu::default();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let path = task.path();
        let (Ok(name), Ok(stat)) =
            (std::fs::read_to_string(path.join("comm")), std::fs::read_to_string(path.join("schedstat")))
        else {
            continue; // the thread ended meanwhile
        };
        let Some(ns) = stat.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()) else { continue };
        *kind_of(&mut cpu, name.trim_end()) += ns as f64 / 1e3;
    }
    Some(cpu)
}

/// Which of `cpu`'s kinds a thread named `name` (as `comm` gives it) counts in.
fn kind_of<'a>(cpu: &'a mut ThreadCpu, name: &str) -> &'a mut f64 {
    if name.starts_with("data-plane-kafk") {
        &mut cpu.request_path
    } else if name.contains("CompilerThre") {
        &mut cpu.compiler
    } else if name == "VM Thread" || name.starts_with("GC Thread") || name.starts_with("G1 ") {
        &mut cpu.gc
    } else {
        &mut cpu.other
    }
}

/// Each broker's [`threads_cpu`] at a start, to tell what it spent since.
pub struct ThreadsCpu {
    pids: Vec<i32>,
    before: Vec<Option<ThreadCpu>>,
}

impl ThreadsCpu {
    /// Reads the brokers `pids` (node order) now.
    pub fn start(pids: Vec<i32>) -> ThreadsCpu {
        let before = pids.iter().map(|&p| threads_cpu(p)).collect();
        ThreadsCpu { pids, before }
    }

    /// What each broker spent since the start, by kind of thread, in µs times `scale(i)`
    /// for broker `i`; `None` for a broker not running at either end.
    pub fn since(&self, scale: impl Fn(usize) -> f64) -> Vec<Option<ThreadCpu>> {
        self.pids
            .iter()
            .zip(&self.before)
            .enumerate()
            .map(|(i, (&pid, before))| Some(threads_cpu(pid)?.since(before.as_ref()?, scale(i))))
            .collect()
    }

    /// What each broker spent since the start, by kind of thread (ms); zeros for a broker
    /// not running at either end.
    pub fn ms_since(&self) -> Vec<ThreadCpu> {
        self.since(|_| 1e-3).into_iter().map(Option::unwrap_or_default).collect()
    }
}

/// The brokers `pids`' [`threads_cpu`] together (a process gone counts nothing).
pub fn all_threads_cpu(pids: &[i32]) -> ThreadCpu {
    let all: Vec<ThreadCpu> = pids.iter().filter_map(|&p| threads_cpu(p)).collect();
    ThreadCpu::each(&all, |v| v.iter().sum())
}

/// CPU time (user + system) process `pid` (or `self`) has used, µs.
pub fn cpu_us(pid: &str) -> Option<u64> {
    stat_cpu_us(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// utime + stime of a `/proc/PID/stat` line, µs. They count USER_HZ ticks, which Linux fixes
/// at 100 per second for user space.
fn stat_cpu_us(stat: &str) -> Option<u64> {
    // After the command name (in parentheses, which may hold spaces and parentheses) come
    // fields 3 onwards: utime and stime are fields 14 and 15.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks * 10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_the_busiest_window_and_a_dead_process_counts_while_it_ran() {
        // 10 ms samples: idle, then 60 ms of CPU within 50 ms, then the process is gone.
        let series: Vec<(u64, Option<u64>)> = vec![
            (0, Some(1_000_000)),
            (10_000, Some(1_000_000)),
            (20_000, Some(1_000_000)),
            (30_000, Some(1_020_000)),
            (40_000, Some(1_040_000)),
            (50_000, Some(1_060_000)),
            (60_000, Some(1_060_000)),
            (70_000, Some(1_060_000)),
            (80_000, Some(1_060_000)),
            (90_000, Some(1_060_000)),
            (100_000, Some(1_060_000)),
            (110_000, Some(1_070_000)),
            (120_000, None),
            (130_000, None),
        ];
        assert_eq!(total_us(&series), 70_000);
        assert_eq!(peak_us(&series, 100_000), 70_000.0);
        assert_eq!(peak_us(&series[..11], 100_000), 60_000.0);
        assert_eq!(peak_us(&[(0, None), (100_000, None)], 100_000), 0.0);
        assert_eq!(total_us(&[]), 0);
    }

    #[test]
    fn threads_are_told_apart_by_their_names() {
        let mut cpu = ThreadCpu::default();
        for (name, us) in [
            ("data-plane-kafk", 1.0),
            ("C2 CompilerThre", 2.0),
            ("C1 CompilerThre", 4.0),
            ("VM Thread", 8.0),
            ("GC Thread#0", 16.0),
            ("kafka-1-raft-io", 32.0),
            ("java", 64.0),
        ] {
            *kind_of(&mut cpu, name) += us;
        }
        assert_eq!(cpu, ThreadCpu { request_path: 1.0, compiler: 6.0, gc: 24.0, other: 96.0 });
        assert_eq!(cpu.total(), 127.0);
        // This test's own process: its threads' CPU is there, and none of it is Kafka's.
        let own = threads_cpu(std::process::id() as i32).expect("this process has threads");
        assert!(own.other > 0.0 && own.request_path == 0.0);
        assert_eq!(threads_cpu(-1), None);
    }

    #[test]
    fn cpu_time_is_read_from_proc_stat() {
        let line = "4242 (java (x) y) S 1 4242 4242 0 -1 4194560 9000 0 12 0 731 69 0 0 20 0 40 0 5000 0 0";
        assert_eq!(stat_cpu_us(line), Some((731 + 69) * 10_000));
        assert_eq!(stat_cpu_us("4242 (java) S 1"), None);
        assert!(cpu_us("self").is_some());
    }
}
