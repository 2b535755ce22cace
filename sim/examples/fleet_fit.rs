//! The fleet simulator at the scale of the real-cluster check, with its broker times fitted to
//! what the real cluster showed; side by side with the real run.
//!
//! `lab/src/bin/fleet_real/main.rs` runs a few hundred real `stagger_tokio::Client`s on
//! a real 3-broker Kafka cluster, measures the cluster (loopback round trip, broker time per
//! request at rest, answers per second when saturated) and writes it all as JSON. This
//! example reads that JSON (`--real PATH`, repeatable), builds the same fleet in the simulator — the same
//! number of clients, 3 brokers, the same warm-up, request and storm windows — with two fits
//! of the broker's service time (the mean at rest, and 1 / the saturated throughput), runs
//! `adaptive` (the default) and `sequential` through `healthy`, `one_hung` and
//! `failover_storm`, and prints real versus simulated: p50, p99, attempts per refresh,
//! Metadata requests per refresh, the peak Metadata requests on one broker per 100 ms, and
//! the relative error. `--out PATH` writes the Markdown report
//! (`docs/performance/fleet-vs-real.md`).
//!
//! ```text
//! CARGO_TARGET_DIR=/work/target-fleetreal cargo run --release -p stagger-sim --example fleet_fit -- \
//!     --real /tmp/fleet-real-1.json --real /tmp/fleet-real-2.json --out docs/performance/fleet-vs-real.md
//! ```
//!
//! Several `--real` runs are compared with their mean (geometric for times), and their spread
//! around it is shown as the machine's noise floor; the fit averages theirs.
//!
//! Without `--real` it runs the simulator alone with the parameters fitted on the reference
//! machine (or `--clients N`, `--rtt-us X`, `--service-us X`, which also override `--real`'s).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use stagger::RefreshConfig;
use stagger_sim::fleet::{FleetConfig, FleetScenario, ScenarioResult, Strategy, WarmFleet};

const REAL_COMMAND: &str = "for i in 1 2; do CARGO_TARGET_DIR=/work/target-fleetreal cargo run --release -p stagger-lab --bin fleet_real -- --out /tmp/fleet-real-$i.json; done";
const SIM_COMMAND: &str = "CARGO_TARGET_DIR=/work/target-fleetreal cargo run --release -p stagger-sim --example fleet_fit -- --real /tmp/fleet-real-1.json --real /tmp/fleet-real-2.json --out docs/performance/fleet-vs-real.md";

/// The parameters fitted on the reference machine (used without `--real`).
const DEFAULT_RTT_US: f64 = 336.0;
const DEFAULT_SERVICE_IDLE_US: f64 = 747.0;
const DEFAULT_SERVICE_BURST_US: f64 = 388.0;

const SCENARIOS: [FleetScenario; 3] = [FleetScenario::Healthy, FleetScenario::OneHung, FleetScenario::FailoverStorm];

struct Args {
    real: Vec<PathBuf>,
    out: Option<PathBuf>,
    clients: Option<u32>,
    rtt_us: Option<f64>,
    service_us: Option<f64>,
    strategies: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        real: Vec::new(),
        out: None,
        clients: None,
        rtt_us: None,
        service_us: None,
        strategies: vec!["adaptive".into(), "sequential".into()],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String, flag: &str| v.parse::<f64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--real" => args.real.push(PathBuf::from(value()?)),
            "--out" => args.out = Some(PathBuf::from(value()?)),
            "--clients" => args.clients = Some(value()?.parse().map_err(|e| format!("--clients: {e}"))?),
            "--rtt-us" => args.rtt_us = Some(num(value()?, "--rtt-us")?),
            "--service-us" => args.service_us = Some(num(value()?, "--service-us")?),
            "--strategies" => args.strategies = value()?.split(',').map(str::to_owned).collect(),
            "-h" | "--help" => {
                println!(
                    "usage: fleet_fit [--real PATH]... [--out PATH] [--clients N] [--rtt-us X] [--service-us X] \
                     [--strategies adaptive,sequential]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(args)
}

fn strategy(name: &str) -> Result<Strategy, String> {
    Ok(match name {
        "adaptive" => Strategy::core("adaptive", RefreshConfig::adaptive()),
        "sequential" => Strategy::core("sequential", RefreshConfig::sequential()),
        "staggered-500ms" => Strategy::core("staggered-500ms", RefreshConfig::staggered()),
        "oracle" => Strategy::Oracle,
        other => return Err(format!("unknown strategy {other:?}")),
    })
}

fn micros(us: f64) -> Duration {
    Duration::from_micros(us.max(1.0).round() as u64)
}

fn ms_field(v: &Value, key: &str, default_ms: f64) -> Duration {
    micros(v[key].as_f64().unwrap_or(default_ms) * 1000.0)
}

/// One row of the comparison.
#[derive(Clone, Debug)]
struct Row {
    source: String,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    attempts: f64,
    requests: f64,
    peak: f64,
    failed: u64,
}

impl Row {
    fn sim(source: &str, r: &ScenarioResult) -> Row {
        Row {
            source: source.into(),
            p50_ms: r.time_to_metadata.p50_ms,
            p99_ms: r.time_to_metadata.p99_ms,
            attempts: r.attempts_per_refresh,
            requests: r.requests_per_refresh,
            peak: r.peak_requests as f64,
            failed: r.failed as u64,
        }
    }

    fn real(v: &Value) -> Row {
        Row {
            source: match v["cpu_busy"].as_f64() {
                Some(busy) => format!("**real** (cores {:.0} % busy)", busy * 100.0),
                None => "**real**".into(),
            },
            p50_ms: v["p50_ms"].as_f64(),
            p99_ms: v["p99_ms"].as_f64(),
            attempts: v["attempts_per_refresh"].as_f64().unwrap_or(f64::NAN),
            requests: v["requests_per_refresh"].as_f64().unwrap_or(f64::NAN),
            peak: v["peak_requests"].as_f64().unwrap_or(f64::NAN),
            failed: v["failed"].as_u64().unwrap_or(0),
        }
    }
}

fn fmt_ms(ms: Option<f64>) -> String {
    match ms {
        None => "gave up".into(),
        Some(ms) if ms >= 1000.0 => format!("{:.2} s", ms / 1000.0),
        Some(ms) if ms >= 100.0 => format!("{ms:.0} ms"),
        Some(ms) if ms >= 10.0 => format!("{ms:.1} ms"),
        Some(ms) => format!("{ms:.2} ms"),
    }
}

/// `(sim − real) / real`, as a signed percentage.
fn rel(sim: Option<f64>, real: Option<f64>) -> Option<f64> {
    match (sim, real) {
        (Some(s), Some(r)) if r.abs() > 0.0 && s.is_finite() && r.is_finite() => Some((s - r) / r * 100.0),
        _ => None,
    }
}

fn fmt_rel(x: Option<f64>) -> String {
    match x {
        None => "—".into(),
        Some(x) if x.abs() >= 1000.0 => format!("{:+.0}×", x / 100.0),
        Some(x) => format!("{x:+.0} %"),
    }
}

/// The sim's ratio to the real, for the summary (`sim / real`).
fn ratio(sim: Option<f64>, real: Option<f64>) -> Option<f64> {
    match (sim, real) {
        (Some(s), Some(r)) if r > 0.0 && s > 0.0 => Some(s / r),
        _ => None,
    }
}

/// The mean of the real runs' rows (geometric for times, arithmetic for counts); the
/// reference the simulation is compared with. `None` without real rows.
fn mean_row(rows: &[Row]) -> Option<Row> {
    if rows.is_empty() {
        return None;
    }
    if rows.len() == 1 {
        return Some(rows[0].clone());
    }
    let n = rows.len() as f64;
    let geo = |f: fn(&Row) -> Option<f64>| -> Option<f64> {
        let v: Option<Vec<f64>> = rows.iter().map(f).collect();
        v.map(|v| (v.iter().map(|x| x.ln()).sum::<f64>() / n).exp())
    };
    Some(Row {
        source: format!("**real, mean of {}**", rows.len()),
        p50_ms: geo(|r| r.p50_ms),
        p99_ms: geo(|r| r.p99_ms),
        attempts: rows.iter().map(|r| r.attempts).sum::<f64>() / n,
        requests: rows.iter().map(|r| r.requests).sum::<f64>() / n,
        peak: rows.iter().map(|r| r.peak).sum::<f64>() / n,
        failed: rows.iter().map(|r| r.failed).sum(),
    })
}

/// `row ÷ reference` for the five compared numbers.
fn ratios(row: &Row, reference: Option<&Row>) -> [Option<f64>; 5] {
    let Some(real) = reference else { return [None; 5] };
    [
        ratio(row.p50_ms, real.p50_ms),
        ratio(row.p99_ms, real.p99_ms),
        ratio(Some(row.attempts), Some(real.attempts)),
        ratio(Some(row.requests), Some(real.requests)),
        ratio(Some(row.peak), Some(real.peak)),
    ]
}

struct Fit {
    name: &'static str,
    config: FleetConfig,
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("fleet_fit: {e}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<(), String> {
    let args = parse_args()?;
    let started = Instant::now();
    let mut reals: Vec<Value> = Vec::new();
    for path in &args.real {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        reals.push(serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?);
    }
    for other in reals.iter().skip(1) {
        for key in
            ["clients", "brokers", "warmup_refreshes", "warmup_spacing_ms", "request_window_ms", "storm_window_ms"]
        {
            if other[key] != reals[0][key] {
                return Err(format!("the real runs differ in {key}: {} vs {}", reals[0][key], other[key]));
            }
        }
    }
    let null = Value::Null;
    let r = reals.first().unwrap_or(&null);
    // The fit: every fitted number averaged over the real runs.
    let mut fit_avg = serde_json::Map::new();
    if let Some(keys) = r["fit"].as_object() {
        for key in keys.keys() {
            let v: Vec<f64> = reals.iter().filter_map(|x| x["fit"][key].as_f64()).collect();
            if !v.is_empty() {
                fit_avg.insert(key.clone(), Value::from(v.iter().sum::<f64>() / v.len() as f64));
            }
        }
    }
    let fit = &Value::Object(fit_avg);
    let rtt_us = args.rtt_us.or(fit["rtt_us"].as_f64()).unwrap_or(DEFAULT_RTT_US);
    let idle_us = args.service_us.or(fit["service_rest_us"].as_f64()).unwrap_or(DEFAULT_SERVICE_IDLE_US);
    let burst_us = args.service_us.or(fit["service_saturated_us"].as_f64()).unwrap_or(DEFAULT_SERVICE_BURST_US);
    let base = FleetConfig {
        clients: args.clients.or(r["clients"].as_u64().map(|c| c as u32)).unwrap_or(300),
        brokers: r["brokers"].as_u64().unwrap_or(3) as u32,
        seed: r["seed"].as_u64().unwrap_or(1),
        rtt: micros(rtt_us),
        service_time: micros(idle_us),
        warmup_refreshes: r["warmup_refreshes"].as_u64().unwrap_or(16) as u32,
        warmup_spacing: ms_field(r, "warmup_spacing_ms", 1000.0),
        settle: ms_field(r, "settle_ms", 2000.0),
        request_window: ms_field(r, "request_window_ms", 10_000.0),
        storm_window: ms_field(r, "storm_window_ms", 10.0),
        peak_window: ms_field(r, "peak_window_ms", 100.0),
    };
    let mut fits = vec![Fit { name: "sim (rest)", config: base.clone() }];
    if (burst_us - idle_us).abs() >= 1.0 {
        fits.push(Fit {
            name: "sim (saturated)",
            config: FleetConfig { service_time: micros(burst_us), ..base.clone() },
        });
    }
    eprintln!(
        "fleet_fit: {} clients, {} brokers, rtt {:.0} µs, service {:.0} / {:.0} µs, warm-up {} × {:?}",
        base.clients, base.brokers, rtt_us, idle_us, burst_us, base.warmup_refreshes, base.warmup_spacing
    );

    // results[fit][strategy][scenario]
    let mut results: Vec<Vec<Vec<ScenarioResult>>> = Vec::new();
    for f in &fits {
        let mut per_strategy = Vec::new();
        for name in &args.strategies {
            let s = strategy(name)?;
            let t = Instant::now();
            let warm = WarmFleet::new(&f.config, &s);
            let rs: Vec<ScenarioResult> = SCENARIOS.iter().map(|&sc| warm.run(sc)).collect();
            eprintln!("  {:<16} {:<12} {:.1} s", f.name, name, t.elapsed().as_secs_f64());
            per_strategy.push(rs);
        }
        results.push(per_strategy);
    }

    let md = render(&args, &reals, fit, &fits, &results, rtt_us, idle_us, burst_us);
    print!("{md}");
    if let Some(out) = &args.out {
        std::fs::write(out, &md).map_err(|e| format!("writing {}: {e}", out.display()))?;
        eprintln!("fleet_fit: wrote {}", out.display());
    }
    eprintln!("fleet_fit: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn real_run<'a>(r: &'a Value, scenario: FleetScenario, strategy: &str) -> Option<&'a Value> {
    r["runs"].as_array()?.iter().find(|v| v["scenario"] == scenario.name() && v["strategy"] == strategy)
}

#[allow(clippy::too_many_arguments)]
fn render(
    args: &Args,
    reals: &[Value],
    fit: &Value,
    fits: &[Fit],
    results: &[Vec<Vec<ScenarioResult>>],
    rtt_us: f64,
    idle_us: f64,
    burst_us: f64,
) -> String {
    let mut md = String::new();
    let base = &fits[0].config;
    let null = Value::Null;
    let r = reals.first().unwrap_or(&null);
    let has_real = !reals.is_empty();
    let c = &r["calibration"];
    let _ = writeln!(md, "# The fleet model against a real cluster\n");
    let _ = writeln!(
        md,
        "Issue 16, item 7: {} real `stagger_tokio::Client`s in one process against a real {}-broker Apache Kafka {} cluster \
         on loopback, and the fleet simulator (`stagger_sim::fleet`) at the same scale with its broker times fitted to \
         what that cluster showed. Machine: {}.\n",
        base.clients,
        base.brokers,
        r["kafka_version"].as_str().unwrap_or("?"),
        if has_real {
            format!("polyglot: {} (measured: {})", "2 cores, 24 GiB", r["machine"].as_str().unwrap_or("?"))
        } else {
            "polyglot: 2 cores, 24 GiB".into()
        }
    );
    let _ = writeln!(
        md,
        "Reproduce (each real run takes about 6 minutes, starts and stops its own cluster and leaves nothing running; two runs \
         show the machine's run-to-run noise; the simulation takes seconds):\n"
    );
    let _ = writeln!(md, "```sh\n{REAL_COMMAND}\n{SIM_COMMAND}\n```\n");
    let _ = writeln!(md, "## Set-up\n");
    let _ = writeln!(
        md,
        "* **Real.** `lab/src/bin/fleet_real/main.rs` starts the cluster with `scripts/kafka.sh` (through \
         `stagger-kafka-fixture`, KRaft, every node broker + controller) with each broker advertising, for PLAINTEXT, a \
         counting forwarder the example runs on 127.0.0.1 (`lab/src/bin/fleet_real/forwarder.rs`). Clients bootstrap from the \
         forwarders and learn them from metadata, so every request of the fleet passes one: it cuts both directions into \
         Kafka frames, reads each request's api key and client id, and logs Metadata (3) and ApiVersions (18) requests per \
         broker, when they passed and how long the broker took (request passing → end of its response passing), and the \
         connections accepted. Every client has the three brokers as seeds (rotated), its policy's default \
         `ClusterConfig` and its own jitter seed, and warms up with {} calm refreshes ({} for a fixed stagger, as the \
         simulator's `warmup_for`), one every {:?} on average; fresh clients for every scenario × strategy. Then \
         `healthy`: every client refreshes once at a random time within {:?}; `one_hung`: node {} is stopped \
         (`SIGSTOP`, connections still accepted, nothing answers) and the same; `failover_storm`: node {} is killed \
         (`SIGKILL`) and its forwarder refuses connections and closes the ones it carried, then every client refreshes \
         within {:?}. Time to metadata is the call to `Client::refresh` until it returns; attempts come from \
         `Client::stats`; requests and the peak from the forwarders (Metadata requests of the fleet's client id; peak = \
         most on one broker within any 100 ms, sliding, as the simulator counts; fixed 100 ms buckets are in the JSON).",
        base.warmup_refreshes,
        base.warmup_refreshes.clamp(1, 2),
        base.warmup_spacing,
        base.request_window,
        r["failed_node"].as_u64().unwrap_or(2),
        r["failed_node"].as_u64().unwrap_or(2),
        base.storm_window,
    );
    let _ = writeln!(
        md,
        "* **Simulated.** `sim/examples/fleet_fit.rs` builds `FleetConfig {{ clients: {}, brokers: {}, rtt, service_time, \
         warmup_refreshes: {}, warmup_spacing: {:?}, settle: {:?}, request_window: {:?}, storm_window: {:?}, peak_window: \
         {:?} }}` and runs `WarmFleet::new(..).run(..)` with `Strategy::core(\"adaptive\", RefreshConfig::adaptive())` and \
         `Strategy::core(\"sequential\", RefreshConfig::sequential())`, for each of the fits below.\n",
        base.clients,
        base.brokers,
        base.warmup_refreshes,
        base.warmup_spacing,
        base.settle,
        base.request_window,
        base.storm_window,
        base.peak_window
    );

    let _ = writeln!(md, "## Fitted parameters\n");
    if has_real {
        let idle = |key: &str, field: &str, stat: &str| -> String {
            c[key]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|b| format!("{:.0}", b[field][stat].as_f64().unwrap_or(0.0)))
                        .collect::<Vec<_>>()
                        .join(" / ")
                })
                .unwrap_or_default()
        };
        let burst = |key: &str| -> String {
            c[key]["per_second"]
                .as_array()
                .map(|a| a.iter().map(|x| format!("{:.0}", x.as_f64().unwrap_or(0.0))).collect::<Vec<_>>().join(" / "))
                .unwrap_or_default()
        };
        let alone = c["burst_metadata_alone"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|b| format!("{:.0}", b["per_second"][0].as_f64().unwrap_or(0.0)))
                    .collect::<Vec<_>>()
                    .join(" / ")
            })
            .unwrap_or_default();
        let _ = writeln!(
            md,
            "Measured by the first real run's calibration before the scenarios (the fit below averages every real run; each broker's request path warmed up first; one \
             request at a time, {} ms apart, for \"at rest\"; {} closed-loop connections per broker for \"saturated\"; the \
             requests are the fleet's own ApiVersions and Metadata frames, a Metadata response of {} bytes — the cluster has \
             no user topics). Per broker, node 1 / 2 / 3:\n",
            c["idle_gap_ms"].as_f64().unwrap_or(0.0),
            c["burst_metadata_all"]["connections"].as_u64().unwrap_or(0),
            c["metadata_response_bytes"].as_u64().unwrap_or(0),
        );
        let _ = writeln!(md, "| measurement | value (µs, or answers / s) |\n|---|---|");
        let _ = writeln!(md, "| TCP connect to a broker, p50 | {} |", idle("idle_direct", "connect", "p50_us"));
        let _ = writeln!(
            md,
            "| ApiVersions round trip at rest, direct, mean (p50) | {} ({}) |",
            idle("idle_direct", "api_versions", "mean_us"),
            idle("idle_direct", "api_versions", "p50_us")
        );
        let _ = writeln!(
            md,
            "| Metadata round trip at rest, direct, mean (p50) | {} ({}) |",
            idle("idle_direct", "metadata", "mean_us"),
            idle("idle_direct", "metadata", "p50_us")
        );
        let _ = writeln!(
            md,
            "| Metadata round trip at rest, through the forwarder, mean (p50) | {} ({}) |",
            idle("idle_forwarded", "metadata", "mean_us"),
            idle("idle_forwarded", "metadata", "p50_us")
        );
        let _ = writeln!(md, "| Metadata answers / s, one broker saturated alone | {alone} |");
        let _ = writeln!(md, "| Metadata answers / s, all three saturated at once | {} |", burst("burst_metadata_all"));
        let _ = writeln!(
            md,
            "| Metadata answers / s, the storm's two survivors at once, through forwarders | {} |",
            burst("burst_metadata_two_forwarded")
        );
        let _ = writeln!(md, "| ApiVersions answers / s, all three at once | {} |", burst("burst_api_versions_all"));
        let _ = writeln!(
            md,
            "| ApiVersions answers / s, two survivors through forwarders | {} |\n",
            burst("burst_api_versions_two_forwarded")
        );
        let f = |k: &str| fit[k].as_f64().unwrap_or(0.0);
        let _ = writeln!(
            md,
            "The probe's one-at-a-time round trips include its own wake-ups on a busy machine (their means are several \
             times the medians), so broker time *at rest* is taken instead from the forwarders' timing of the fleet's own \
             requests during the calm warm-ups (about {:.0} refreshes per second over three brokers): the median, because \
             the means are dominated by moments nobody was scheduled (the means are in the second row); *saturated* is 1 / \
             the answers per second of each of the storm's two surviving brokers driven together through their forwarders. \
             In µs:\n",
            base.clients as f64 / base.warmup_spacing.as_secs_f64()
        );
        let _ = writeln!(
            md,
            "| broker time per request | ApiVersions | Metadata | ApiVersions ÷ Metadata |\n|---|---:|---:|---:|"
        );
        let _ = writeln!(
            md,
            "| at rest (fleet warm-ups, forwarder-timed median) | {:.0} | {:.0} | {:.2} |",
            f("api_versions_rest_us"),
            f("metadata_rest_us"),
            f("api_ratio_rest")
        );
        let _ = writeln!(
            md,
            "| at rest (fleet warm-ups, forwarder-timed mean) | {:.0} | {:.0} | |",
            f("api_versions_rest_mean_us"),
            f("metadata_rest_mean_us")
        );
        let _ = writeln!(
            md,
            "| at rest (probe, trimmed mean − handshake) | {:.0} | {:.0} | {:.2} |",
            f("api_versions_probe_rest_us"),
            f("metadata_probe_rest_us"),
            f("api_ratio_probe_rest")
        );
        let _ = writeln!(
            md,
            "| saturated (two survivors, through forwarders) | {:.0} | {:.0} | {:.2} |",
            f("api_versions_saturated_us"),
            f("metadata_saturated_us"),
            f("api_ratio_saturated")
        );
        let _ = writeln!(md, "| the simulator | `service_time` / 20 | `service_time` | 0.05 (hard-coded) |\n");
        let _ = writeln!(
            md,
            "A fresh connection costs more: the same two brokers, saturated with connect + ApiVersions + Metadata + close \
             loops, take {:.0} µs per attempt, {:.0} µs more than the two requests on a kept connection (the simulator \
             charges a broker nothing for a connection).\n",
            f("fresh_attempt_saturated_us"),
            f("connection_saturated_us")
        );
        let _ = writeln!(md, "| simulator knob | fitted | how |\n|---|---:|---|");
        let _ = writeln!(
            md,
            "| `rtt` | {:.0} µs | loopback handshake ({:.0} µs) + what a forwarder adds to a round trip ({:.0} µs) |",
            rtt_us,
            f("loopback_connect_us"),
            f("forwarder_relay_us")
        );
        let _ = writeln!(
            md,
            "| `service_time`, fit \"rest\" | {:.0} µs | (ApiVersions + Metadata at rest, fleet warm-ups, medians) ÷ 1.05 |",
            idle_us
        );
        let _ = writeln!(
            md,
            "| `service_time`, fit \"saturated\" | {:.0} µs | (ApiVersions + Metadata saturated, two survivors) ÷ 1.05 |\n",
            burst_us
        );
        let _ = writeln!(
            md,
            "Why ÷ 1.05: the simulator charges a broker `service_time` for an attempt's Metadata request and a hard-coded \
             twentieth of it for its ApiVersions; the real broker spends at least as long on ApiVersions (the ratio above), so the \
             knob carries the whole work of an attempt: `service_time · (1 + 1/20) = ApiVersions + Metadata`. A simulated \
             attempt then keeps its broker busy as long as a real one does; what stays wrong is the split (the simulated \
             ApiVersions answer, the adaptive stagger's \"alive\" signal, comes back too early by about the ApiVersions \
             time). **Knob needed**: the ApiVersions/Metadata cost ratio (today 1/20 in `sim/src/fleet/engine/events.rs`); \
             measured here {:.2} at rest, {:.2} saturated. The one-broker-alone and all-three throughputs above show how \
             much of a saturated broker's time is the shared CPU (an uncontended broker answers Metadata in {:.0} µs; \
             all three at once, {:.0} µs each).\n",
            f("api_ratio_rest"),
            f("api_ratio_saturated"),
            f("metadata_saturated_alone_direct_us"),
            f("metadata_saturated_all_direct_us")
        );
    } else {
        let _ = writeln!(md, "No `--real` JSON given: rtt {rtt_us:.0} µs, service {idle_us:.0} µs / {burst_us:.0} µs (the reference machine's fit).\n");
    }

    let _ = writeln!(md, "## Real versus simulated\n");
    let _ = writeln!(
        md,
        "Time to metadata p50 and p99 (nearest rank, over {} refreshes), attempts per refresh (`Connect`s ÷ refreshes), \
         Metadata requests per refresh (what brokers received ÷ refreshes), peak = most Metadata requests one broker \
         received within any 100 ms. The error columns are (simulated − real) ÷ real.\n",
        base.clients
    );
    let mut errors: Vec<(String, String, String, [Option<f64>; 5])> = Vec::new();
    for (si, &scenario) in SCENARIOS.iter().enumerate() {
        let _ = writeln!(md, "### {}\n", scenario.title());
        let _ = writeln!(
            md,
            "| strategy | source | p50 | p99 | attempts / refresh | requests / refresh | peak / 100 ms | gave up | err p50 | err p99 | err attempts | err requests | err peak |"
        );
        let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (ti, name) in args.strategies.iter().enumerate() {
            let real_rows: Vec<Row> = reals
                .iter()
                .enumerate()
                .filter_map(|(k, x)| {
                    real_run(x, scenario, name).map(|v| {
                        let mut row = Row::real(v);
                        if reals.len() > 1 {
                            row.source = row.source.replacen("**real**", &format!("**real #{}**", k + 1), 1);
                        }
                        row
                    })
                })
                .collect();
            let reference = mean_row(&real_rows);
            let mut rows: Vec<(Row, Option<String>)> = real_rows.iter().map(|r| (r.clone(), None)).collect();
            if real_rows.len() > 1 {
                if let Some(mean) = &reference {
                    rows.push((mean.clone(), None));
                }
                for (k, row) in real_rows.iter().enumerate() {
                    errors.push((
                        scenario.title().into(),
                        name.clone(),
                        format!("real #{} (noise)", k + 1),
                        ratios(row, reference.as_ref()),
                    ));
                }
            }
            for (fi, f) in fits.iter().enumerate() {
                rows.push((Row::sim(f.name, &results[fi][ti][si]), Some(f.name.to_string())));
            }
            for (row, fit_name) in rows {
                let errs = match (&reference, &fit_name) {
                    (Some(real), Some(fit_name)) => {
                        errors.push((
                            scenario.title().into(),
                            name.clone(),
                            fit_name.clone(),
                            ratios(&row, Some(real)),
                        ));
                        [
                            rel(row.p50_ms, real.p50_ms),
                            rel(row.p99_ms, real.p99_ms),
                            rel(Some(row.attempts), Some(real.attempts)),
                            rel(Some(row.requests), Some(real.requests)),
                            rel(Some(row.peak), Some(real.peak)),
                        ]
                        .iter()
                        .map(|x| fmt_rel(*x))
                        .collect::<Vec<_>>()
                        .join(" | ")
                    }
                    _ => ["", "", "", "", ""].join(" | "),
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {:.3} | {:.3} | {:.0} | {} | {} |",
                    name,
                    row.source,
                    fmt_ms(row.p50_ms),
                    fmt_ms(row.p99_ms),
                    row.attempts,
                    row.requests,
                    row.peak,
                    row.failed,
                    errs
                );
            }
        }
        let _ = writeln!(md);
    }

    if has_real {
        let _ = writeln!(md, "### The real runs in detail\n");
        let _ = writeln!(
            md,
            "Per broker (node 1 / 2 / 3), during the measurement: Metadata and ApiVersions requests of the fleet, connections \
             accepted, requests never answered (a hung broker's), and how long the broker took for a Metadata request (mean / \
             p99, forwarder to broker and back); the warm-up's mean Metadata time for comparison; the machine's load.\n"
        );
        let _ = writeln!(
            md,
            "| run | scenario | strategy | Metadata | ApiVersions | connections | unanswered | broker Metadata time, mean ; p99 (ms) | warm-up mean (ms) | load avg |\n|---|---|---|---|---|---|---|---|---|---:|"
        );
        let list = |v: &Value| -> String {
            v.as_array().map_or(String::new(), |a| a.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" / "))
        };
        let times = |v: &Value, stat: &str| -> String {
            v.as_array().map_or(String::new(), |a| {
                a.iter()
                    .map(|x| match x["n"].as_u64() {
                        Some(n) if n > 0 => format!("{:.2}", x[stat].as_f64().unwrap_or(0.0) / 1000.0),
                        _ => "—".into(),
                    })
                    .collect::<Vec<_>>()
                    .join(" / ")
            })
        };
        for (k, run) in reals
            .iter()
            .enumerate()
            .flat_map(|(k, x)| x["runs"].as_array().into_iter().flatten().map(move |run| (k, run)))
        {
            let _ = writeln!(
                md,
                "| #{} | {} | {} | {} | {} | {} | {} | {} ; {} | {} | {:.1} |",
                k + 1,
                run["scenario"].as_str().unwrap_or("?"),
                run["strategy"].as_str().unwrap_or("?"),
                list(&run["requests_per_broker"]),
                list(&run["api_versions_per_broker"]),
                list(&run["connections_per_broker"]),
                list(&run["unanswered_requests_per_broker"]),
                times(&run["broker_metadata_time"], "mean_us"),
                times(&run["broker_metadata_time"], "p99_us"),
                times(&run["warmup_broker_metadata_time"], "mean_us"),
                run["loadavg_after"].as_f64().unwrap_or(0.0),
            );
        }
        let _ = writeln!(md);
    }

    if !errors.is_empty() {
        let _ = writeln!(md, "## How far off, in one table\n");
        let _ = writeln!(
            md,
            "Simulated ÷ real (1.00 = exact; the factor, not a percentage), per scenario and strategy; the last rows give, \
             per fit, the geometric mean of |log ratio| over every cell as a factor (\"typically off by ×…\") and the worst cell.\n"
        );
        let _ = writeln!(md, "| scenario | strategy | fit | p50 | p99 | attempts | requests | peak |\n|---|---|---|---:|---:|---:|---:|---:|");
        let fr = |x: Option<f64>| x.map_or("—".into(), |x| format!("{x:.2}"));
        for (scenario, strategy, fit, e) in &errors {
            let _ = writeln!(
                md,
                "| {scenario} | {strategy} | {fit} | {} | {} | {} | {} | {} |",
                fr(e[0]),
                fr(e[1]),
                fr(e[2]),
                fr(e[3]),
                fr(e[4])
            );
        }
        let mut groups: Vec<String> = fits.iter().map(|f| f.name.to_string()).collect();
        if reals.len() > 1 {
            groups.push("real runs (noise)".into());
        }
        for group in &groups {
            let mut col = [Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new()];
            for (_, _, fit, e) in &errors {
                let member = if group.starts_with("real") { fit.starts_with("real") } else { fit == group };
                if member {
                    for k in 0..5 {
                        if let Some(x) = e[k] {
                            col[k].push(x);
                        }
                    }
                }
            }
            let typical = |v: &Vec<f64>| {
                if v.is_empty() {
                    "—".into()
                } else {
                    format!("×{:.2}", (v.iter().map(|x| x.ln().abs()).sum::<f64>() / v.len() as f64).exp())
                }
            };
            let worst = |v: &Vec<f64>| {
                v.iter()
                    .copied()
                    .max_by(|a, b| a.ln().abs().total_cmp(&b.ln().abs()))
                    .map_or("—".into(), |x| format!("{x:.2}"))
            };
            let _ = writeln!(
                md,
                "| **typical** | | {} | {} | {} | {} | {} | {} |",
                group,
                typical(&col[0]),
                typical(&col[1]),
                typical(&col[2]),
                typical(&col[3]),
                typical(&col[4])
            );
            let _ = writeln!(
                md,
                "| **worst** | | {} | {} | {} | {} | {} | {} |",
                group,
                worst(&col[0]),
                worst(&col[1]),
                worst(&col[2]),
                worst(&col[3]),
                worst(&col[4])
            );
        }
        let _ = writeln!(md);
    }
    if has_real {
        reading(&mut md, reals, fit, fits, results, &errors, &args.strategies);
    }
    md
}

/// The reading of the comparison: the mechanisms are fixed text, every number comes from
/// the runs (so a rerun rewrites it consistently).
#[allow(clippy::too_many_arguments)]
fn reading(
    md: &mut String,
    reals: &[Value],
    fit: &Value,
    fits: &[Fit],
    results: &[Vec<Vec<ScenarioResult>>],
    errors: &[(String, String, String, [Option<f64>; 5])],
    strategies: &[String],
) {
    let f = |k: &str| fit[k].as_f64().unwrap_or(0.0);
    let typical = |group: &str, k: usize| -> Option<f64> {
        let v: Vec<f64> = errors
            .iter()
            .filter(|(_, _, g, _)| if group.starts_with("real") { g.starts_with("real") } else { g == group })
            .filter_map(|(_, _, _, e)| e[k])
            .collect();
        (!v.is_empty()).then(|| (v.iter().map(|x| x.ln().abs()).sum::<f64>() / v.len() as f64).exp())
    };
    let x = |v: Option<f64>| v.map_or("—".into(), |v| format!("×{v:.2}"));
    // Means over the real runs of one run's field.
    let real_mean = |scenario: FleetScenario, strategy: &str, get: &dyn Fn(&Value) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = reals.iter().filter_map(|r| real_run(r, scenario, strategy)).filter_map(get).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    // Times are averaged geometrically, as in the tables' "mean of" rows.
    let real_geo = |scenario: FleetScenario, strategy: &str| -> Option<f64> {
        let v: Option<Vec<f64>> =
            reals.iter().filter_map(|r| real_run(r, scenario, strategy)).map(|v| v["p50_ms"].as_f64()).collect();
        v.filter(|v| !v.is_empty()).map(|v| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
    };
    let sum_per_refresh = |key: &'static str| {
        move |v: &Value| -> Option<f64> {
            let total: f64 = v[key].as_array()?.iter().filter_map(Value::as_f64).sum();
            Some(total / v["refreshes"].as_f64()?.max(1.0))
        }
    };
    let peak = |v: &Value| v["peak_requests"].as_f64();
    let busy: Vec<f64> = reals
        .iter()
        .flat_map(|r| r["runs"].as_array().into_iter().flatten().filter_map(|v| v["cpu_busy"].as_f64()))
        .collect();
    let (busy_lo, busy_hi) = busy.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &b| (lo.min(b), hi.max(b)));
    let storm = FleetScenario::FailoverStorm;
    let si = SCENARIOS.iter().position(|&s| s == storm).unwrap_or(2);
    let ti = |name: &str| strategies.iter().position(|s| s == name);
    let sim_p50 =
        |fi: usize, name: &str| ti(name).and_then(|t| results.get(fi)?.get(t)?.get(si)?.time_to_metadata.p50_ms);

    let _ = writeln!(md, "## Reading\n");
    let _ = writeln!(
        md,
        "**How far the model is from the cluster at 300 clients.** Over every cell above, the simulation fitted at rest is \
         typically off by {} in p50 and {} in p99, {} in attempts per refresh, {} in requests per refresh and {} in peak \
         load{}. {}\n",
        x(typical(fits[0].name, 0)),
        x(typical(fits[0].name, 1)),
        x(typical(fits[0].name, 2)),
        x(typical(fits[0].name, 3)),
        x(typical(fits[0].name, 4)),
        match fits.get(1) {
            Some(s) => format!(
                " (fitted saturated: {} p50, {} p99, {} peak)",
                x(typical(s.name, 0)),
                x(typical(s.name, 1)),
                x(typical(s.name, 4))
            ),
            None => String::new(),
        },
        if reals.len() > 1 {
            format!(
                "For scale, the {} real runs differ from their own mean by {} in p50, {} in p99 and {} in peak load \
                 (same code, same seed, same machine): that much of the error is this machine's noise, not the model.",
                reals.len(),
                x(typical("real", 0)),
                x(typical("real", 1)),
                x(typical("real", 4))
            )
        } else {
            "One real run only: its own noise is not measured (run two, see the commands).".into()
        }
    );
    let _ = writeln!(
        md,
        "**What the model gets right: the counts.** Requests per refresh, attempts per refresh under `sequential` (1 when \
         healthy; 4/3 with one of three brokers hung, because a third of the clients kept their connection to it) and \
         the peak load outside the storm (a handful of requests per 100 ms) are set by the policy and the arrival \
         schedule, not by timing, and the simulation reproduces them; `adaptive`'s attempts per refresh, which do depend \
         on timing, are within the factor above, even in the storm. So does the shape of `sequential`'s failure modes (p99 = its 10 s attempt timeout \
         with one broker hung).\n"
    );
    let storm_adaptive = real_geo(storm, "adaptive");
    let storm_sequential = real_geo(storm, "sequential");
    let real_ratio = storm_adaptive.zip(storm_sequential).map(|(a, s)| a / s);
    let sim_ratios: Vec<f64> = (0..fits.len())
        .filter_map(|fi| sim_p50(fi, "adaptive").zip(sim_p50(fi, "sequential")).map(|(a, s)| a / s))
        .collect();
    let understated = real_ratio.is_some_and(|r| sim_ratios.iter().all(|&s| r > s));
    let (peak_a, peak_s) =
        (real_mean(storm, "adaptive", &peak).unwrap_or(0.0), real_mean(storm, "sequential", &peak).unwrap_or(0.0));
    let _ = writeln!(
        md,
        "**What it gets wrong: hedging into an overload.** In the failover storm the real `adaptive` fleet took a median \
         {} against `sequential`'s {} (×{:.1}); the simulation, fitted at rest, has {} against {}{}. The real brokers did \
         much more work per refresh than the simulated ones: under `adaptive` every refresh cost {:.2} ApiVersions requests \
         and {:.2} new connections (`sequential`: {:.2} and {:.2}), while requests per refresh stayed 1 — hedges on a slow \
         but alive broker mostly died before their Metadata request, after their connection and ApiVersions were paid for. \
         The simulator prices those two things far below what this cluster charges: an ApiVersions request at 1/20 of a \
         Metadata request (measured {:.2}–{:.2}), a new connection at nothing (measured {:.0} µs of saturated broker-side \
         time per fresh connection on top of its requests, {:.1}× the requests themselves). Every extra attempt therefore \
         costs the real cluster several times what it costs the model, and a policy that adds attempts when brokers are \
         slow is penalised much more in reality. {}\n",
        fmt_ms(storm_adaptive),
        fmt_ms(storm_sequential),
        real_ratio.unwrap_or(0.0),
        fmt_ms(sim_p50(0, "adaptive")),
        fmt_ms(sim_p50(0, "sequential")),
        match fits.get(1) {
            Some(_) => format!(" (fitted saturated: {} against {})", fmt_ms(sim_p50(1, "adaptive")), fmt_ms(sim_p50(1, "sequential"))),
            None => String::new(),
        },
        real_mean(storm, "adaptive", &sum_per_refresh("api_versions_per_broker")).unwrap_or(0.0),
        real_mean(storm, "adaptive", &sum_per_refresh("connections_per_broker")).unwrap_or(0.0),
        real_mean(storm, "sequential", &sum_per_refresh("api_versions_per_broker")).unwrap_or(0.0),
        real_mean(storm, "sequential", &sum_per_refresh("connections_per_broker")).unwrap_or(0.0),
        f("api_ratio_rest").min(f("api_ratio_saturated")),
        f("api_ratio_rest").max(f("api_ratio_saturated")),
        f("connection_saturated_us"),
        f("connection_saturated_us") / (f("metadata_saturated_us") + f("api_versions_saturated_us")).max(1.0),
        if peak_a <= peak_s {
            format!(
                "The real peak per 100 ms is lower under `adaptive` ({peak_a:.0} against {peak_s:.0}): it is slower, so its \
                 requests spread — the fleet target \"peak no higher than sequential's\" holds on the cluster too, but by \
                 being slow, not by being cheap."
            )
        } else {
            format!(
                "The real peak per 100 ms is higher under `adaptive` ({peak_a:.0} against {peak_s:.0}): the fleet target \
                 \"peak no higher than sequential's\" does not hold on the cluster."
            )
        },
    );
    // Outside the storm: the simulated ÷ real medians and tails (sequential's one-hung p99 is
    // its 10 s timeout in both, and says nothing about the timing model).
    let calm = |k: usize| -> (f64, f64) {
        errors
            .iter()
            .filter(|(sc, st, g, _)| {
                !g.starts_with("real")
                    && (sc == FleetScenario::Healthy.title() || sc == FleetScenario::OneHung.title())
                    && !(k == 1 && st == "sequential" && sc == FleetScenario::OneHung.title())
            })
            .filter_map(|(_, _, _, e)| e[k])
            .fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(x), hi.max(x)))
    };
    let (p50_lo, p50_hi) = calm(0);
    let (p99_lo, p99_hi) = calm(1);
    let _ = writeln!(
        md,
        "**Outside the storm.** The simulated medians are ×{:.2}–×{:.2} the real ones. The simulator charges a TCP \
         handshake to every attempt, including those on a kept connection, which the real client reuses without one, and \
         the fitted `rtt` ({:.0} µs) is a loopback handshake on a busy machine, far above an idle loopback's tens of µs: \
         three simulated round trips against two real ones. The simulated p99s are ×{:.2}–×{:.2} the real ones: the real \
         tail comes from moments when the process that must act is not scheduled (the cores were {:.0}–{:.0} % busy during \
         the measurements: three JVMs, 300 clients, the forwarders, and other work on the shared machine), while the \
         model's only tail is its exponential service time, and its brokers are independent queues where here they share \
         two cores (an uncontended broker answered Metadata in {:.0} µs, each of three saturated together in {:.0} µs).\n",
        p50_lo,
        p50_hi,
        f("rtt_us"),
        p99_lo,
        p99_hi,
        busy_lo * 100.0,
        busy_hi * 100.0,
        f("metadata_saturated_alone_direct_us"),
        f("metadata_saturated_all_direct_us"),
    );
    let _ = writeln!(
        md,
        "**For the 10,000-client claims.** They rest on the model, and at the scale we can run the model is good for \
         counts (attempts, requests, peak) and for latency while brokers are far from saturation, within the factors above. \
         {} \
         Knobs the model needs to close the gap, with the values measured here (none was added: `sim/src` is unchanged): the ApiVersions/Metadata cost ratio \
         ({:.2} at rest, {:.2} saturated; hard-coded 0.05 in `sim/src/fleet/engine/events.rs`), a broker cost per accepted \
         connection (~{:.0} µs saturated on this machine, where it includes the forwarder's and the client's share of the \
         same cores; with TLS it would be far larger), and, for a one-machine set-up like this one, brokers sharing CPU \
         instead of independent queues. This check ran everything on one 2-core machine; brokers on machines of their own \
         would be closer to the model's independent queues, but the connection and ApiVersions costs would remain.\n",
        if understated {
            format!(
                "It is optimistic about any policy that opens connections or repeats ApiVersions while brokers are \
                 saturated — exactly what the adaptive stagger does in a failover storm: here the real adaptive/sequential \
                 ratio of storm medians is ×{:.1}, the simulated one ×{} — so the simulated 10,000-client storm \
                 (`fleet.md`) understates adaptive's penalty against `sequential`.",
                real_ratio.unwrap_or(0.0),
                sim_ratios.iter().map(|r| format!("{r:.1}")).collect::<Vec<_>>().join(" / ×")
            )
        } else {
            format!(
                "In the storm the real adaptive/sequential ratio of medians (×{:.1}) is within what the simulation shows \
                 (×{}), so its 10,000-client storm ranking stands at this scale.",
                real_ratio.unwrap_or(0.0),
                sim_ratios.iter().map(|r| format!("{r:.1}")).collect::<Vec<_>>().join(" / ×")
            )
        },
        f("api_ratio_rest"),
        f("api_ratio_saturated"),
        f("connection_saturated_us"),
    );
}
