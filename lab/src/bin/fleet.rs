//! The fleet simulation: 10,000 clients on one 30-broker cluster, every preset and an oracle,
//! four scenarios; writes `fleet.json`, `fleet.md` and `fleet.svg`.
//!
//! Run: `cargo run --release -p stagger-lab --bin fleet -- --out docs/performance`
//!
//! Options: `--out DIR` (default `docs/performance`), `--clients N`, `--brokers N`,
//! `--seed N`, `--threads N` (default: available cores), `--rtt-ms X` and `--service-ms X`
//! (the network round trip and the mean broker time per Metadata request; default 1 and 1),
//! `--no-storm-causes` (the storm's clients refresh without saying why), `--sasl-ssl-ms X`
//! (a SASL_SSL SCRAM listener whose TLS handshake and SASL exchange cost a broker X ms per
//! new connection; `fleet_real --listener sasl_ssl` measures it), `--network-threads N`
//! (each broker runs its connections' handshakes and request reads on N queues beside its
//! request queue, as Kafka's network threads do; default 0, one queue),
//! `--sweep` (instead: the tuning sweep of the adaptive knobs, about ten minutes; writes
//! `tuning.md` and `tuning.json`).
//!
//! Everything is virtual time in the simulator; threads only run independent
//! (strategy) jobs side by side, so the output does not depend on them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use stagger::{Adaptive, ClusterConfig, Growth, Stagger};
use stagger_lab::cli::millis;
use stagger_sim::fleet::{
    check_targets, render_markdown, render_svg, scenario_major, FleetConfig, FleetReport, FleetScenario,
    ScenarioResult, Strategy, WarmFleet,
};

const COMMAND: &str = "cargo run --release -p stagger-lab --bin fleet -- --out docs/performance";
const SWEEP_COMMAND: &str = "cargo run --release -p stagger-lab --bin fleet -- --sweep --out docs/performance";

struct Args {
    out: PathBuf,
    config: FleetConfig,
    threads: usize,
    sweep: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        out: PathBuf::from("docs/performance"),
        config: FleetConfig::default(),
        threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        sweep: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--out" => args.out = PathBuf::from(value()?),
            "--clients" => args.config.clients = value()?.parse().map_err(|e| format!("--clients: {e}"))?,
            "--brokers" => args.config.brokers = value()?.parse().map_err(|e| format!("--brokers: {e}"))?,
            "--seed" => args.config.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--threads" => args.threads = value()?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--rtt-ms" => args.config.rtt = millis(&value()?, "--rtt-ms")?,
            "--service-ms" => args.config.service_time = millis(&value()?, "--service-ms")?,
            "--sweep" => args.sweep = true,
            "--no-storm-causes" => args.config.storm_causes = false,
            "--network-threads" => {
                args.config.network_threads = value()?.parse().map_err(|e| format!("--network-threads: {e}"))?
            }
            "--sasl-ssl-ms" => {
                let broker = millis(&value()?, "--sasl-ssl-ms")?;
                args.config.security = stagger_sim::fleet::Security::sasl_ssl_scram(broker, Duration::ZERO);
            }
            "-h" | "--help" => {
                println!(
                    "usage: fleet [--out DIR] [--clients N] [--brokers N] [--seed N] [--threads N] \
                     [--rtt-ms X] [--service-ms X] [--no-storm-causes] [--sasl-ssl-ms X] [--network-threads N] [--sweep]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(args)
}

/// Runs every strategy (one warm-up each, then the four scenarios) on `threads` threads.
/// Results come back in `strategies` order whatever the scheduling.
fn run_all(config: &FleetConfig, strategies: &[Strategy], threads: usize) -> Vec<Vec<ScenarioResult>> {
    let next = Mutex::new(0usize);
    let slots: Vec<Mutex<Option<Vec<ScenarioResult>>>> = strategies.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some(strategy) = strategies.get(i) else { break };
                let t = Instant::now();
                let warm = WarmFleet::new(config, strategy);
                let warmed = t.elapsed().as_secs_f64();
                let results: Vec<ScenarioResult> = FleetScenario::ALL.iter().map(|&s| warm.run(s)).collect();
                eprintln!("  {:<28} {:>5.1} s (warm-up {:.1} s)", strategy.name(), t.elapsed().as_secs_f64(), warmed);
                *slots[i].lock().unwrap() = Some(results);
            });
        }
    });
    slots.into_iter().map(|s| s.into_inner().unwrap().unwrap_or_default()).collect()
}

fn write(dir: &Path, name: &str, contents: &str) -> Result<(), String> {
    let path = dir.join(name);
    std::fs::write(&path, contents).map_err(|e| format!("writing {}: {e}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("fleet: {e}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<(), String> {
    let args = parse_args()?;
    std::fs::create_dir_all(&args.out).map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    let started = Instant::now();
    if args.sweep {
        sweep(&args)?;
        eprintln!("fleet: sweep done in {:.1} s", started.elapsed().as_secs_f64());
        return Ok(());
    }
    eprintln!(
        "fleet: {} clients, {} brokers, seed {}, {} threads",
        args.config.clients, args.config.brokers, args.config.seed, args.threads
    );
    let strategies = Strategy::standard();
    let results = scenario_major(run_all(&args.config, &strategies, args.threads));
    let report = FleetReport::new(args.config.clone(), results);
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    write(&args.out, "fleet.json", &(json + "\n"))?;
    let markdown = render_markdown(&report, COMMAND);
    write(&args.out, "fleet.md", &markdown)?;
    write(&args.out, "fleet.svg", &render_svg(&report))?;
    print!("{markdown}");
    eprintln!("fleet: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

// ============================================================================================
// The tuning sweep
// ============================================================================================

/// One adaptive variant: the stagger knobs, the growth, the hedge budget's burst, and
/// whether an answer overtakes silent attempts.
#[derive(Clone, Copy, PartialEq, serde::Serialize)]
struct Variant {
    multiple: u32,
    floor_ms: u64,
    patience: u32,
    growth: u32,
    burst: u32,
    cancel_silent: bool,
    spread: bool,
    /// The window quantile, in percent (f64 is not `Eq`; 99 means p99); a fraction in JSON.
    #[serde(rename = "quantile", serialize_with = "percent_as_fraction")]
    quantile_pct: u32,
}

fn percent_as_fraction<S: serde::Serializer>(pct: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(*pct as f64 / 100.0)
}

impl Variant {
    fn of(cluster: &ClusterConfig) -> Self {
        let config = &cluster.refresh;
        let Stagger::Adaptive(a) = config.fanout.stagger else { unreachable!("the default is adaptive") };
        let Growth::Linear(growth) = config.fanout.growth else { unreachable!("the default grows linearly") };
        Variant {
            multiple: a.multiple,
            floor_ms: a.floor.as_millis() as u64,
            patience: a.patience,
            growth,
            burst: cluster.hedge_budget.burst,
            cancel_silent: config.fanout.tuning.cancel_silent_on_answer,
            spread: config.fanout.tuning.spread_ticks,
            quantile_pct: (cluster.window_quantile * 100.0).round() as u32,
        }
    }

    fn name(&self) -> String {
        format!(
            "multiple {} · floor {} ms · patience {} · growth {} · burst {} · overtake {} · spread {} · quantile p{}",
            self.multiple,
            self.floor_ms,
            self.patience,
            self.growth,
            self.burst,
            if self.cancel_silent { "on" } else { "off" },
            if self.spread { "on" } else { "off" },
            self.quantile_pct
        )
    }

    fn strategy(&self) -> Strategy {
        let mut c = ClusterConfig::default().refresh;
        c.fanout.stagger = Stagger::Adaptive(Adaptive {
            multiple: self.multiple,
            floor: Duration::from_millis(self.floor_ms),
            patience: self.patience,
            ..Adaptive::default()
        });
        c.fanout.growth = Growth::Linear(self.growth);
        c.fanout.tuning.cancel_silent_on_answer = self.cancel_silent;
        c.fanout.tuning.spread_ticks = self.spread;
        let mut cluster =
            ClusterConfig { refresh: c, window_quantile: self.quantile_pct as f64 / 100.0, ..ClusterConfig::default() };
        cluster.hedge_budget.burst = self.burst;
        Strategy::core_with(&self.name(), cluster)
    }
}

/// A stage of the sweep: these variants, on this many clients, for these seeds.
struct Stage {
    title: &'static str,
    why: &'static str,
    clients: u32,
    seeds: Vec<u64>,
    variants: Vec<Variant>,
    /// Network round trip and mean broker time per Metadata request, if not the defaults.
    regime: Option<(Duration, Duration)>,
}

/// The numbers the targets are about, for one variant on one seed.
#[derive(serde::Serialize)]
struct Row {
    variant: String,
    #[serde(flatten)]
    knobs: Variant,
    clients: u32,
    seed: u64,
    rtt_ms: f64,
    service_ms: f64,
    healthy_attempts_per_refresh: f64,
    one_hung_p99_ms: Option<f64>,
    one_hung_p99_vs_oracle: Option<f64>,
    third_hung_p99_ms: Option<f64>,
    third_hung_p99_vs_oracle: Option<f64>,
    third_hung_p999_ms: Option<f64>,
    storm_p50_ms: Option<f64>,
    storm_p99_ms: Option<f64>,
    storm_peak_vs_sequential: f64,
    storm_attempts_per_refresh: f64,
    targets_met: usize,
    targets: usize,
}

fn row(results: &[ScenarioResult], v: &Variant, config: &FleetConfig) -> Row {
    let name = v.name();
    let get = |s: FleetScenario, n: &str| results.iter().find(|r| r.scenario == s && r.strategy == n).unwrap();
    let p99 = |s, n: &str| get(s, n).time_to_metadata.p99_ms;
    let ratio = |s| match (p99(s, &name), p99(s, "oracle")) {
        (Some(a), Some(o)) => Some(a / o),
        _ => None,
    };
    let targets = check_targets(results, &name);
    let storm = get(FleetScenario::FailoverStorm, &name);
    Row {
        variant: name.clone(),
        knobs: *v,
        clients: config.clients,
        seed: config.seed,
        rtt_ms: config.rtt.as_secs_f64() * 1000.0,
        service_ms: config.service_time.as_secs_f64() * 1000.0,
        healthy_attempts_per_refresh: get(FleetScenario::Healthy, &name).attempts_per_refresh,
        one_hung_p99_ms: p99(FleetScenario::OneHung, &name),
        one_hung_p99_vs_oracle: ratio(FleetScenario::OneHung),
        third_hung_p99_ms: p99(FleetScenario::ThirdHung, &name),
        third_hung_p99_vs_oracle: ratio(FleetScenario::ThirdHung),
        third_hung_p999_ms: get(FleetScenario::ThirdHung, &name).time_to_metadata.p999_ms,
        storm_p50_ms: storm.time_to_metadata.p50_ms,
        storm_p99_ms: storm.time_to_metadata.p99_ms,
        storm_peak_vs_sequential: storm.peak_requests as f64
            / get(FleetScenario::FailoverStorm, "sequential").peak_requests.max(1) as f64,
        storm_attempts_per_refresh: storm.attempts_per_refresh,
        targets_met: targets.iter().filter(|t| t.met).count(),
        targets: targets.len(),
    }
}

fn sweep(args: &Args) -> Result<(), String> {
    let new = Variant::of(&ClusterConfig::default());
    let mut grid = Vec::new();
    for multiple in [2, 3, 4] {
        for growth in [1, 2] {
            grid.push(Variant { multiple, growth, ..new });
        }
    }
    grid.push(Variant { floor_ms: 1, ..new });
    grid.push(Variant { floor_ms: 5, ..new });
    let rules = vec![
        new,
        Variant { cancel_silent: false, ..new },
        Variant { spread: false, ..new },
        Variant { quantile_pct: 90, ..new },
        Variant { quantile_pct: 50, ..new },
        Variant { patience: 4, ..new },
        Variant { patience: 64, ..new },
        Variant { burst: 6, ..new },
        Variant { growth: 3, ..new },
    ];
    let robustness =
        vec![new, Variant { multiple: 3, ..new }, Variant { growth: 1, ..new }, Variant { spread: false, ..new }];
    let ms = Duration::from_millis;
    let stages = [
        Stage {
            title: "Stage 1: silence multiple × growth, and the floor (10,000 clients, seed 1)",
            why: "How soon a connected-but-silent broker is suspected, and how many brokers a tick \
                  starts: the trade-off between the healthy amplification and the hung tails.",
            clients: 10_000,
            seeds: vec![1],
            variants: grid,
            regime: None,
        },
        Stage {
            title: "Stage 2: what each rule buys (10,000 clients, seeds 1–3)",
            why: "The default against itself with one rule changed: without overtaking (silent \
                  attempts keep running when a broker answers), without spreading a tick's \
                  attempts, a lower quantile of the recent window (p90, the median), other \
                  patience for answering brokers, a smaller hedge budget, a wider tick.",
            clients: 10_000,
            seeds: vec![1, 2, 3],
            variants: rules,
            regime: None,
        },
        Stage {
            title:
                "Stage 3a: robustness — faster network (0.5 ms round trip, 1 ms broker time; 10,000 clients, seed 1)",
            why: "The same knobs when the network is faster relative to the broker.",
            clients: 10_000,
            seeds: vec![1],
            variants: robustness.clone(),
            regime: Some((Duration::from_micros(500), ms(1))),
        },
        Stage {
            title: "Stage 3b: robustness — slower brokers (1 ms round trip, 2 ms broker time; 10,000 clients, seed 1)",
            why: "The same knobs when brokers answer more slowly and with a longer tail.",
            clients: 10_000,
            seeds: vec![1],
            variants: robustness,
            regime: Some((ms(1), ms(2))),
        },
    ];
    let refs: Vec<Strategy> = Strategy::standard()
        .into_iter()
        .filter(|s| matches!(s.name(), "sequential" | "staggered-500ms" | "oracle"))
        .collect();
    let mut md = String::new();
    md.push_str("# Tuning the adaptive stagger in the fleet simulation\n\n");
    md.push_str(&format!(
        "Regenerate with `{SWEEP_COMMAND}` (about five minutes on this 2-core machine with two threads, twice that with one). Same fleet and scenarios as \
         [fleet.md](fleet.md); each variant is the default policy with the knobs shown. Columns: \
         healthy attempts per refresh (target ≤ 1.05), p99 time to metadata ÷ the oracle's in the \
         hung scenarios (target ≤ 1.5), third-hung p99.9, storm p99 and peak broker load ÷ \
         `sequential`'s (target ≤ 1), storm attempts per refresh, and how many of the six targets \
         hold. With several seeds a cell shows min–max over the seeds.\n\n"
    ));
    let mut all_rows = Vec::new();
    for stage in &stages {
        let mut rows: Vec<Row> = Vec::new();
        for &seed in &stage.seeds {
            let mut config = FleetConfig { clients: stage.clients, seed, ..args.config.clone() };
            if let Some((rtt, service)) = stage.regime {
                config.rtt = rtt;
                config.service_time = service;
            }
            let mut strategies = refs.clone();
            strategies.extend(stage.variants.iter().map(Variant::strategy));
            eprintln!("{} — seed {seed}: {} strategies", stage.title, strategies.len());
            let results = scenario_major(run_all(&config, &strategies, args.threads));
            rows.extend(stage.variants.iter().map(|v| row(&results, v, &config)));
        }
        md.push_str(&format!("## {}\n\n{}\n\n", stage.title, stage.why));
        md.push_str(&stage_table(&stage.variants, &rows, &new));
        all_rows.extend(rows);
    }
    let json = serde_json::to_string_pretty(&all_rows).map_err(|e| e.to_string())?;
    write(&args.out, "tuning.json", &(json + "\n"))?;
    write(&args.out, "tuning.md", &md)?;
    print!("{md}");
    Ok(())
}

fn stage_table(variants: &[Variant], rows: &[Row], new: &Variant) -> String {
    let mut out = String::from(
        "| multiple | floor | quantile | patience | growth | burst | overtake | spread | healthy attempts/refresh | one hung p99 ÷ oracle | third hung p99 ÷ oracle | third hung p99.9 | storm p50 | storm p99 | storm peak ÷ sequential | storm attempts/refresh | targets met |\n\
         |---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for v in variants {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.variant == v.name()).collect();
        let range = |f: &dyn Fn(&Row) -> Option<f64>, digits: usize| {
            let xs: Vec<f64> = mine.iter().map(|r| f(r).unwrap_or(f64::INFINITY)).collect();
            let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let show = |x: f64| if x.is_finite() { format!("{x:.digits$}") } else { "gave up".into() };
            let (lo, hi) = (show(lo), show(hi));
            if lo == hi {
                lo
            } else {
                format!("{lo}–{hi}")
            }
        };
        let mark = if v == new { " **(default)**" } else { "" };
        let met = {
            let lo = mine.iter().map(|r| r.targets_met).min().unwrap_or(0);
            let hi = mine.iter().map(|r| r.targets_met).max().unwrap_or(0);
            let of = mine.first().map_or(0, |r| r.targets);
            if lo == hi {
                format!("{lo}/{of}")
            } else {
                format!("{lo}–{hi}/{of}")
            }
        };
        out.push_str(&format!(
            "| {}{} | {} ms | p{} | {} | {} | {} | {} | {} | {} | {} | {} | {} ms | {} ms | {} ms | {} | {} | {} |\n",
            v.multiple,
            mark,
            v.floor_ms,
            v.quantile_pct,
            v.patience,
            v.growth,
            v.burst,
            if v.cancel_silent { "on" } else { "off" },
            if v.spread { "on" } else { "off" },
            range(&|r| Some(r.healthy_attempts_per_refresh), 3),
            range(&|r| r.one_hung_p99_vs_oracle, 2),
            range(&|r| r.third_hung_p99_vs_oracle, 2),
            range(&|r| r.third_hung_p999_ms, 0),
            range(&|r| r.storm_p50_ms, 0),
            range(&|r| r.storm_p99_ms, 0),
            range(&|r| Some(r.storm_peak_vs_sequential), 2),
            range(&|r| Some(r.storm_attempts_per_refresh), 1),
            met
        ));
    }
    out.push('\n');
    out
}
