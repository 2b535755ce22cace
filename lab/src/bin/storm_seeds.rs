//! The fleet model's failover storm over many seeds: the default against `sequential`.
//!
//! In the storm both strategies do the same work (one Metadata request per refresh, a new
//! connection for each client whose broker died), so what separates them in one fleet is
//! chance: where each client's shuffled seeds put it, and which survivor each of the dead
//! broker's clients reconnects to. One seed's fleet shows one draw of it. This runs the
//! storm of `fleet` (`stagger_sim::fleet`, same model and defaults) for seeds `1..=N`, both
//! strategies on the same fleet per seed (the same schedule, network and broker draws), and
//! prints, as markdown, each seed's p50, p99, peak, busiest 100 ms of one broker's work
//! (`ScenarioResult::peak_busy_us`: the peak counts Metadata requests, this what the
//! handshakes cost too) and new connections with the default's ratio to `sequential`'s, and
//! the spare connections the default held when the storm came (each lets a client whose
//! broker died ask a survivor at once); then how often the default
//! came out higher, lower or equal. `--rtt-ms` and `--service-ms` set the network and broker
//! times as `fleet`'s do (its "faster network" and "slower brokers" regimes).
//!
//! ```text
//! cargo run --release -p stagger-lab --bin storm_seeds -- [--seeds 20] [--clients 300] [--brokers 3] [--rtt-ms 1] [--service-ms 1] [--threads N]
//! ```
//!
//! Everything is virtual time; threads only run seeds side by side.

use std::fmt::Write as _;
use std::sync::Mutex;

use stagger_lab::cli::millis;
use stagger_lab::stats::geometric_mean_range;
use stagger_sim::fleet::{FleetConfig, FleetScenario, ScenarioResult, Strategy, WarmFleet};

struct Args {
    seeds: u64,
    config: FleetConfig,
    threads: usize,
}

fn parse_args() -> Result<Args, String> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args =
        Args { seeds: 20, config: FleetConfig { clients: 300, brokers: 3, ..FleetConfig::default() }, threads };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{a}: {e}"));
        match a.as_str() {
            "--seeds" => args.seeds = number(value()?)?.max(1),
            "--clients" => args.config.clients = number(value()?)? as u32,
            "--brokers" => args.config.brokers = number(value()?)? as u32,
            "--threads" => args.threads = number(value()?)?.max(1) as usize,
            "--rtt-ms" => args.config.rtt = millis(&value()?, "--rtt-ms")?,
            "--service-ms" => args.config.service_time = millis(&value()?, "--service-ms")?,
            "-h" | "--help" => {
                println!("usage: storm_seeds [--seeds N] [--clients N] [--brokers N] [--rtt-ms X] [--service-ms X] [--threads N]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(args)
}

/// What one seed's storm gave each strategy.
struct Seed {
    seed: u64,
    default: ScenarioResult,
    sequential: ScenarioResult,
}

/// The compared quantities of one storm, as [`COMPARED`] names them.
fn values(r: &ScenarioResult) -> [Option<f64>; COMPARED.len()] {
    [
        r.time_to_metadata.p50_ms,
        r.time_to_metadata.p99_ms,
        Some(r.peak_requests as f64),
        Some(r.peak_busy_us as f64 / 1e3),
        Some(r.connections as f64),
    ]
}

/// The peak counts Metadata requests; the busiest 100 ms, what a broker's work took then
/// (handshakes included), as the real brokers' CPU does.
const COMPARED: [&str; 5] = ["p50", "p99", "peak", "busiest 100 ms", "new connections"];

/// How often `ratios` lie above, below and at 1 (within 0.05 %), and their geometric mean
/// and range.
fn summary(ratios: &[f64]) -> String {
    let Some((g, lo, hi)) = geometric_mean_range(ratios) else { return "—".into() };
    let higher = ratios.iter().filter(|&&x| x > 1.0005).count();
    let lower = ratios.iter().filter(|&&x| x < 0.9995).count();
    format!("×{g:.3} ({lo:.2}–{hi:.2}); higher {higher}, lower {lower}, equal {}", ratios.len() - higher - lower)
}

fn ms(x: Option<f64>) -> String {
    x.map_or("—".into(), |x| if x >= 100.0 { format!("{x:.0} ms") } else { format!("{x:.1} ms") })
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("storm_seeds: {e}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<(), String> {
    let args = parse_args()?;
    let strategies = Strategy::standard();
    let pick = |name: &str| strategies.iter().find(|s| s.name() == name).cloned().ok_or(format!("no strategy {name}"));
    let (default, sequential) = (pick("adaptive")?, pick("sequential")?);
    let next = Mutex::new(1u64);
    let done: Mutex<Vec<Seed>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..args.threads {
            scope.spawn(|| loop {
                let seed = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                if seed > args.seeds {
                    break;
                }
                let config = FleetConfig { seed, ..args.config.clone() };
                let storm = |s: &Strategy| WarmFleet::new(&config, s).run(FleetScenario::FailoverStorm);
                let result = Seed { seed, default: storm(&default), sequential: storm(&sequential) };
                eprintln!("storm_seeds: seed {seed} done");
                done.lock().unwrap().push(result);
            });
        }
    });
    let mut seeds = done.into_inner().unwrap();
    seeds.sort_by_key(|s| s.seed);

    let mut md = String::new();
    let _ = writeln!(
        md,
        "{} clients on {} brokers ({} ms round trip, {} ms per Metadata), the failover storm of `stagger_sim::fleet` (its other defaults), seeds 1–{}: the default (`adaptive`) ÷ `sequential`.\n",
        args.config.clients,
        args.config.brokers,
        args.config.rtt.as_secs_f64() * 1e3,
        args.config.service_time.as_secs_f64() * 1e3,
        args.seeds
    );
    let _ = writeln!(
        md,
        "| seed | p50 | p99 | peak | busiest 100 ms of work | new connections | default's spares | ratios ({}) |",
        COMPARED.join(", ")
    );
    let _ = writeln!(md, "|---:|---|---|---|---|---|---:|---|");
    let mut ratios: [Vec<f64>; COMPARED.len()] = Default::default();
    for s in &seeds {
        let (a, q) = (values(&s.default), values(&s.sequential));
        let mut cells = Vec::new();
        for (k, (x, y)) in a.iter().zip(&q).enumerate() {
            match (x, y) {
                (Some(x), Some(y)) if *y > 0.0 => {
                    ratios[k].push(x / y);
                    cells.push(format!("{:.3}", x / y));
                }
                _ => cells.push("—".into()),
            }
        }
        let _ = writeln!(
            md,
            "| {} | {} vs {} | {} vs {} | {} vs {} | {} vs {} | {} vs {} | {} | {} |",
            s.seed,
            ms(a[0]),
            ms(q[0]),
            ms(a[1]),
            ms(q[1]),
            s.default.peak_requests,
            s.sequential.peak_requests,
            ms(a[3]),
            ms(q[3]),
            s.default.connections,
            s.sequential.connections,
            s.default.spares_before,
            cells.join(" · ")
        );
    }
    let _ = writeln!(md, "\n| compared | default ÷ `sequential` over the seeds (geometric mean, range; how often) |");
    let _ = writeln!(md, "|---|---|");
    for (name, r) in COMPARED.iter().zip(&ratios) {
        let _ = writeln!(md, "| {name} | {} |", summary(r));
    }
    print!("{md}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts_each_side_of_one() {
        let s = summary(&[2.0, 0.5, 1.0]);
        assert_eq!(s, "×1.000 (0.50–2.00); higher 1, lower 1, equal 1");
        assert_eq!(summary(&[]), "—");
    }
}
