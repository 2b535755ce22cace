//! The fleet model checked against reality: a few hundred real [`stagger_tokio::Client`]s on a
//! real 3-broker Apache Kafka cluster, with a broker hung or killed under them.
//!
//! Starts a Kafka 4.4 KRaft cluster (`scripts/kafka.sh`, through `stagger-kafka-fixture`)
//! whose brokers advertise, for PLAINTEXT, the addresses of counting forwarders this process
//! runs on 127.0.0.1 (one per broker, see `lab/src/bin/fleet_real/forwarder.rs`): clients bootstrap from
//! the forwarders and learn the forwarders from metadata, so every request of the fleet
//! passes one and is counted — Metadata (api key 3) and ApiVersions (18) per broker, with the
//! time each took the broker, and the connections accepted. (Inter-broker replication also
//! runs over that listener; it is told apart by its client id and not counted.)
//!
//! Then:
//!
//! 1. **Calibration** (`lab/src/bin/fleet_real/calibrate.rs`): the loopback round trip, what a forwarder
//!    adds, each broker's time per ApiVersions and Metadata request at rest, and the answers
//!    per second of saturated brokers (alone, two at once, all three) — the simulator's
//!    `rtt`, `service_time` and its ApiVersions/Metadata cost ratio, measured.
//! 2. **Scenarios**, mirroring `stagger_sim::fleet`, for each strategy (`adaptive`, the
//!    default, and `sequential`): N fresh clients (default 300), each with the three brokers
//!    as seeds (rotated, like the simulator's), warm up with calm refreshes (the simulator's
//!    `warmup_for` count at the same spacing); then
//!    * `healthy`: every client refreshes once at a random time within the window (10 s);
//!    * `one_hung`: node 2 is stopped (`SIGSTOP`: connections are accepted, nothing answers)
//!      and every client refreshes within the window; `SIGCONT` afterwards;
//!    * `failover_storm`: node 2 is killed (`SIGKILL`) and its forwarder closes its listener
//!      and connections (refused, as a dead broker's address is), then every client refreshes
//!      within 10 ms; the node is restarted afterwards.
//!
//!    Each refresh's time to metadata (the call to `Client::refresh` until it returns), its
//!    attempts (`Client::stats`), the Metadata requests per refresh and the peak Metadata
//!    requests one broker received within 100 ms (sliding, as the simulator counts; fixed
//!    100 ms buckets are recorded too).
//!
//! Writes everything (every refresh's time, every broker's requests per 100 ms, the
//! calibration and the fitted simulator parameters) as JSON to `--out` (default
//! `target/fleet-real.json` under `CARGO_TARGET_DIR`, or `/tmp/fleet-real.json`), which
//! `cargo run --release -p stagger-sim --example fleet_fit -- --real PATH...` reads to run the
//! simulator with the same fleet and the fitted times. About 6 minutes with the defaults
//! (cluster start ~1 min, calibration ~1 min, six runs); the cluster is stopped at the end,
//! and by its watchdog if this process dies. Two runs show the machine's run-to-run noise:
//!
//! ```text
//! for i in 1 2; do CARGO_TARGET_DIR=/work/target-fleetreal cargo run --release -p stagger-tokio \
//!     --bin fleet_real -- --out /tmp/fleet-real-$i.json; done
//! ```
//!
//! Options: `--clients N` (300), `--warmup N` (16 calm refreshes per adaptive client; a
//! fixed stagger uses at most 2, as in the simulator), `--warmup-spacing-ms X` (1000),
//! `--window-ms X` (10000), `--storm-ms X` (10), `--settle-ms X` (2000), `--seed N` (1),
//! `--strategies adaptive,sequential`, `--scenarios healthy,one_hung,failover_storm`,
//! `--node N` (2: the broker hung or killed), `--no-causes` (the storm's refreshes do not
//! say why: plain `Client::refresh`), `--out PATH`.
//!
//! In the storm each client says why it refreshes, as a real one would know
//! (`Client::refresh_because`): a client whose kept connection was to the dead broker
//! `ConnectionLost` (naming it), every other `StaleMetadata` (its requests for the dead
//! broker's partitions answer NOT_LEADER). Both strategies are told the same.

mod calibrate;
mod forwarder;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use stagger::{ClusterConfig, RefreshCause, RefreshConfig, Rng, Stagger};
use stagger_kafka_fixture::{free_base_port, KafkaCluster, Options};
use stagger_tokio::{Client, ClientOptions, ExchangeConfig};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

use calibrate::{Burst, Frames, Idle, Spread};
use forwarder::{Forwarder, Log, API_VERSIONS, METADATA};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The fleet's client id: how the forwarders tell its requests from the brokers' own.
const CLIENT_ID: &str = "fleet-real";
/// The calibration's client id (its requests are not the fleet's).
const PROBE_ID: &str = "fleet-probe";
const BROKERS: usize = 3;
/// Periodic refreshes pushed a day away, as in the simulator: only the scenario refreshes.
const REFRESH_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// A refresh still running after this long counts as given up.
const GIVE_UP: Duration = Duration::from_secs(90);
/// The window of the peak count.
const PEAK_WINDOW_US: u64 = 100_000;
/// Requests still answered after the last refresh returned are counted for this long.
const GRACE: Duration = Duration::from_millis(500);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Scenario {
    Healthy,
    OneHung,
    FailoverStorm,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Healthy => "healthy",
            Scenario::OneHung => "one_hung",
            Scenario::FailoverStorm => "failover_storm",
        }
    }

    fn parse(s: &str) -> Res<Scenario> {
        Ok(match s {
            "healthy" => Scenario::Healthy,
            "one_hung" => Scenario::OneHung,
            "failover_storm" => Scenario::FailoverStorm,
            other => return Err(format!("unknown scenario {other:?} (healthy, one_hung, failover_storm)").into()),
        })
    }
}

#[derive(Clone, Debug)]
struct Args {
    clients: usize,
    warmup: u32,
    warmup_spacing: Duration,
    window: Duration,
    storm: Duration,
    settle: Duration,
    seed: u64,
    strategies: Vec<String>,
    scenarios: Vec<Scenario>,
    node: u32,
    /// Whether the storm's refreshes say why (`Client::refresh_because`).
    causes: bool,
    out: PathBuf,
}

fn default_out() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir).join("fleet-real.json"),
        None => PathBuf::from("/tmp/fleet-real.json"),
    }
}

fn parse_args() -> Res<Args> {
    let mut args = Args {
        clients: 300,
        warmup: 16,
        warmup_spacing: Duration::from_millis(1000),
        window: Duration::from_millis(10_000),
        storm: Duration::from_millis(10),
        settle: Duration::from_millis(2000),
        seed: 1,
        strategies: vec!["adaptive".into(), "sequential".into()],
        scenarios: vec![Scenario::Healthy, Scenario::OneHung, Scenario::FailoverStorm],
        node: 2,
        causes: true,
        out: default_out(),
    };
    let mut it = std::env::args().skip(1);
    let ms = |v: String, flag: &str| -> Res<Duration> {
        let x: f64 = v.parse().map_err(|e| format!("{flag}: {e}"))?;
        if !(0.0..=600_000.0).contains(&x) {
            return Err(format!("{flag}: {x} is outside 0..=600000").into());
        }
        Ok(Duration::from_micros((x * 1000.0) as u64))
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--clients" => args.clients = value()?.parse()?,
            "--warmup" => args.warmup = value()?.parse()?,
            "--warmup-spacing-ms" => args.warmup_spacing = ms(value()?, "--warmup-spacing-ms")?,
            "--window-ms" => args.window = ms(value()?, "--window-ms")?,
            "--storm-ms" => args.storm = ms(value()?, "--storm-ms")?,
            "--settle-ms" => args.settle = ms(value()?, "--settle-ms")?,
            "--seed" => args.seed = value()?.parse()?,
            "--strategies" => args.strategies = value()?.split(',').map(str::to_owned).collect(),
            "--scenarios" => args.scenarios = value()?.split(',').map(Scenario::parse).collect::<Res<_>>()?,
            "--node" => args.node = value()?.parse()?,
            "--out" => args.out = PathBuf::from(value()?),
            "--no-causes" => args.causes = false,
            "-h" | "--help" => {
                println!(
                    "usage: fleet_real [--clients N] [--warmup N] [--warmup-spacing-ms X] [--window-ms X] \
                     [--storm-ms X] [--settle-ms X] [--seed N] [--strategies a,b] [--scenarios a,b] [--node N] [--no-causes] [--out PATH]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    if !(1..=5000).contains(&args.clients) {
        return Err("--clients must be 1..=5000".into());
    }
    if !(1..=BROKERS as u32).contains(&args.node) {
        return Err(format!("--node must be 1..={BROKERS}").into());
    }
    for s in &args.strategies {
        strategy(s)?;
    }
    Ok(args)
}

/// The cluster view a strategy runs, as the simulator's `Strategy::core` builds it.
fn strategy(name: &str) -> Res<ClusterConfig> {
    let refresh = match name {
        "adaptive" => RefreshConfig::adaptive(),
        "sequential" => RefreshConfig::sequential(),
        "staggered-500ms" => RefreshConfig::staggered(),
        // The default with one fan-out rule off, to measure what it earns (rule-costs.md).
        other if other.starts_with("adaptive-without-") => {
            let mut refresh = RefreshConfig::adaptive();
            refresh.set(&format!("fanout.tuning.{}", &other["adaptive-without-".len()..]), "false")?;
            refresh
        }
        other => {
            let known = "adaptive, sequential, staggered-500ms, adaptive-without-<fanout.tuning switch>";
            return Err(format!("unknown strategy {other:?} ({known})").into());
        }
    };
    Ok(ClusterConfig { refresh, refresh_interval: REFRESH_INTERVAL, ..ClusterConfig::default() })
}

/// The simulator's `FleetConfig::warmup_for`: the full count for an adaptive stagger (it
/// learns from its window), at most 2 for a fixed one.
fn warmup_for(config: &ClusterConfig, warmup: u32) -> u32 {
    match config.refresh.fanout.stagger {
        Stagger::Adaptive(_) => warmup.max(1),
        Stagger::Fixed(_) => warmup.clamp(1, 2),
    }
}

/// SplitMix64's finaliser: independent streams from one seed.
fn mix(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct Lab {
    args: Args,
    base: Instant,
    rt: Runtime,
    cluster: KafkaCluster,
    forwarders: Vec<Forwarder>,
    /// The brokers' own PLAINTEXT addresses (the forwarders' targets).
    direct: Vec<SocketAddr>,
}

impl Lab {
    fn seeds(&self) -> Vec<String> {
        self.forwarders.iter().map(|f| f.address().to_string()).collect()
    }

    fn us(&self, at: Instant) -> u64 {
        at.duration_since(self.base).as_micros() as u64
    }

    fn take_logs(&self) -> Vec<Log> {
        self.forwarders.iter().map(Forwarder::take).collect()
    }
}

fn main() -> Res<()> {
    let args = parse_args()?;
    let started = Instant::now();
    let base = Instant::now();
    // The forwarders run on a runtime of their own, so a burst of client work does not
    // delay the relaying (both still share the machine's cores with the brokers).
    let forwarder_rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name("forwarder").enable_all().build()?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("fleet").enable_all().build()?;
    let base_port = free_base_port(BROKERS as u32);
    // The forwarders' ports: another free block below the ephemeral range.
    let forward_port = free_base_port(1);
    let direct: Vec<SocketAddr> =
        (0..BROKERS).map(|i| SocketAddr::from(([127, 0, 0, 1], base_port + 10 * i as u16))).collect();
    let forwarders = forwarder_rt.block_on(async {
        let mut out = Vec::new();
        for (i, &target) in direct.iter().enumerate() {
            let bind = SocketAddr::from(([127, 0, 0, 1], forward_port + i as u16));
            out.push(Forwarder::start(bind, target, base, CLIENT_ID).await?);
        }
        Ok::<_, std::io::Error>(out)
    })?;
    let options = Options {
        advertise_plaintext: Some(forwarders.iter().map(|f| f.address().to_string()).collect()),
        base_port: Some(base_port),
        ..Options::default()
    };
    eprintln!("fleet_real: starting a {BROKERS}-broker Kafka cluster (brokers on {base_port}.., forwarders on {forward_port}..)");
    let cluster =
        KafkaCluster::start(&options).ok_or("this machine cannot run Apache Kafka (needs java 17+ and mvn)")?;
    let lab = Lab { args: args.clone(), base, rt, cluster, forwarders, direct };
    eprintln!("fleet_real: cluster {} up after {:.1} s", lab.cluster.cluster_id(), started.elapsed().as_secs_f64());

    let mut calibration = calibrate(&lab)?;
    calibration["loadavg_after"] = json!(loadavg());
    let mut fit = fit(&calibration);
    eprintln!("fleet_real: calibrated {}", fit);

    let mut runs = Vec::new();
    for &scenario in &args.scenarios {
        for name in &args.strategies {
            let t = Instant::now();
            let run = run(&lab, name, scenario)?;
            eprintln!(
                "fleet_real: {:<15} {:<10} p50 {:>9} p99 {:>9}  attempts/refresh {:.3}  requests/refresh {:.3}  peak {:>4}  ({:.0} s)",
                scenario.name(),
                name,
                fmt_ms(&run["p50_ms"]),
                fmt_ms(&run["p99_ms"]),
                run["attempts_per_refresh"].as_f64().unwrap_or(0.0),
                run["requests_per_refresh"].as_f64().unwrap_or(0.0),
                run["peak_requests"],
                t.elapsed().as_secs_f64()
            );
            runs.push(run);
        }
    }
    fit_rest(&mut fit, &runs);
    eprintln!("fleet_real: fitted {}", fit);
    let report = json!({
        "machine": machine(),
        "kafka_version": lab.cluster.version(),
        "brokers": BROKERS,
        "clients": args.clients,
        "warmup_refreshes": args.warmup,
        "warmup_spacing_ms": args.warmup_spacing.as_secs_f64() * 1e3,
        "settle_ms": args.settle.as_secs_f64() * 1e3,
        "request_window_ms": args.window.as_secs_f64() * 1e3,
        "storm_window_ms": args.storm.as_secs_f64() * 1e3,
        "peak_window_ms": PEAK_WINDOW_US as f64 / 1e3,
        "seed": args.seed,
        "failed_node": args.node,
        "calibration": calibration,
        "fit": fit,
        "runs": runs,
        "took_s": started.elapsed().as_secs_f64(),
    });
    if let Some(dir) = args.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&report)?)?;
    eprintln!(
        "fleet_real: wrote {} after {:.0} s; stopping the cluster",
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    let Lab { cluster, rt, forwarders, .. } = lab;
    drop(cluster);
    rt.shutdown_timeout(Duration::from_secs(2));
    drop(forwarders);
    forwarder_rt.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}

fn fmt_ms(v: &Value) -> String {
    match v.as_f64() {
        Some(ms) if ms >= 1000.0 => format!("{:.2} s", ms / 1000.0),
        Some(ms) => format!("{ms:.2} ms"),
        None => "gave up".into(),
    }
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().and_then(|l| l.split_whitespace().nth(1)).and_then(|kb| kb.parse::<f64>().ok()))
        .map_or(String::from("?"), |kb| format!("{:.0} GiB", kb / 1024.0 / 1024.0));
    format!("{cores} cores, {mem}")
}

// ---------------------------------------------------------------------------------------
// Calibration and the fit.

fn calibrate(lab: &Lab) -> Res<Value> {
    let fwd: Vec<SocketAddr> = lab.forwarders.iter().map(Forwarder::address).collect();
    let direct = lab.direct.clone();
    let node = lab.args.node as usize - 1;
    let survivors: Vec<SocketAddr> = (0..BROKERS).filter(|&i| i != node).map(|i| direct[i]).collect();
    let survivors_fwd: Vec<SocketAddr> = (0..BROKERS).filter(|&i| i != node).map(|i| fwd[i]).collect();
    let value = lab.rt.block_on(async {
        let frames: Frames = calibrate::capture(direct[0], PROBE_ID).await?;
        eprintln!(
            "fleet_real: calibrating (ApiVersions request {} B, Metadata request {} B, response {} B)",
            frames.api_versions.len(),
            frames.metadata.len(),
            frames.metadata_response
        );
        // The brokers' JIT compiles the request path first (as a long-running broker's has).
        calibrate::warm(&direct, &frames, 6000).await?;
        let gap = Duration::from_millis(2);
        let mut idle_direct = Vec::new();
        let mut idle_fwd = Vec::new();
        for b in 0..BROKERS {
            idle_direct.push(calibrate::idle(direct[b], &frames, 300, gap).await?);
            idle_fwd.push(calibrate::idle(fwd[b], &frames, 300, gap).await?);
        }
        let (conns, n, reps) = (32, 3000, 3);
        let mut alone = Vec::new();
        for &d in &direct {
            alone.push(calibrate::burst(&[d], &frames.metadata, "metadata", conns, n, reps).await?);
        }
        let all = calibrate::burst(&direct, &frames.metadata, "metadata", conns, n, reps).await?;
        let two = calibrate::burst(&survivors, &frames.metadata, "metadata", conns, n, reps).await?;
        let all_fwd = calibrate::burst(&fwd, &frames.metadata, "metadata", conns, n, reps).await?;
        let two_fwd = calibrate::burst(&survivors_fwd, &frames.metadata, "metadata", conns, n, reps).await?;
        let api_all = calibrate::burst(&direct, &frames.api_versions, "api_versions", conns, n, reps).await?;
        let api_two_fwd =
            calibrate::burst(&survivors_fwd, &frames.api_versions, "api_versions", conns, n, reps).await?;
        let churn_two_fwd = calibrate::churn(&survivors_fwd, &frames, 16, 600, reps).await?;
        let value: Value = json!({
            "api_versions_request_bytes": frames.api_versions.len(),
            "metadata_request_bytes": frames.metadata.len(),
            "metadata_response_bytes": frames.metadata_response,
            "idle_gap_ms": gap.as_secs_f64() * 1e3,
            "idle_direct": idle_direct,
            "idle_forwarded": idle_fwd,
            "burst_metadata_alone": alone,
            "burst_metadata_all": all,
            "burst_metadata_two": two,
            "burst_metadata_all_forwarded": all_fwd,
            "burst_metadata_two_forwarded": two_fwd,
            "burst_api_versions_all": api_all,
            "burst_api_versions_two_forwarded": api_two_fwd,
            "churn_two_forwarded": churn_two_fwd,
        });
        Ok::<Value, Box<dyn std::error::Error + Send + Sync>>(value)
    })?;
    // The calibration's requests are not the fleet's; forget them.
    lab.take_logs();
    Ok(value)
}

/// The simulator's knobs, from the calibration (the "rest" service time is completed by
/// [`fit_rest`] from the scenarios' warm-ups).
///
/// * `rtt_us`: the round trip a fleet request pays on top of the broker's own time — the
///   loopback handshake (median TCP connect to a broker) plus what a forwarder adds to a
///   Metadata round trip (median forwarded minus median direct, at least 0).
/// * Broker time per request, saturated: 1 / the answers per second of each of the storm's
///   two surviving brokers driven together through their forwarders (the dead broker uses no
///   CPU then, the forwarders do); a fresh connection's extra cost from the same brokers
///   answering connect + ApiVersions + Metadata + close loops.
/// * The probe's own "at rest" round trips (one request every 2 ms) are recorded, but they
///   include the probe's wake-ups on a busy machine; the fit at rest uses the forwarders'
///   timing of the fleet's own requests during the calm warm-ups instead ([`fit_rest`]).
/// * The simulator charges an attempt `service_time` for Metadata and a hard-coded 1/20 of it
///   for ApiVersions; the real broker's ApiVersions costs about as much as its Metadata
///   (`api_ratio_*`). The fits therefore put the broker's whole work per attempt into the
///   one knob: `service_time · (1 + 1/20) = ApiVersions + Metadata`, so a simulated attempt
///   keeps a broker busy as long as a real one does (`service_rest_us`, `service_saturated_us`).
fn fit(c: &Value) -> Value {
    let spreads = |key: &str, field: &str, stat: &str| -> Vec<f64> {
        c[key].as_array().map_or(Vec::new(), |a| a.iter().filter_map(|i| i[field][stat].as_f64()).collect())
    };
    let avg = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
    let connect = avg(&spreads("idle_direct", "connect", "p50_us"));
    let meta_direct_p50 = avg(&spreads("idle_direct", "metadata", "p50_us"));
    let meta_fwd_p50 = avg(&spreads("idle_forwarded", "metadata", "p50_us"));
    let meta_rest = (avg(&spreads("idle_direct", "metadata", "trimmed_mean_us")) - connect).max(1.0);
    let api_rest = (avg(&spreads("idle_direct", "api_versions", "trimmed_mean_us")) - connect).max(1.0);
    let service_of = |key: &str| -> f64 {
        let v: Vec<f64> =
            c[key]["service_us"].as_array().map_or(Vec::new(), |a| a.iter().filter_map(Value::as_f64).collect());
        avg(&v)
    };
    let relay = (meta_fwd_p50 - meta_direct_p50).max(0.0);
    let rtt = connect + relay;
    let meta_sat = service_of("burst_metadata_two_forwarded");
    let api_sat = service_of("burst_api_versions_two_forwarded");
    let alone: Vec<f64> = c["burst_metadata_alone"]
        .as_array()
        .map_or(Vec::new(), |a| a.iter().filter_map(|b| b["service_us"][0].as_f64()).collect());
    let alone = avg(&alone);
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let churn = service_of("churn_two_forwarded");
    json!({
        "fresh_attempt_saturated_us": churn.round(),
        "connection_saturated_us": (churn - meta_sat - api_sat).round(),
        "rtt_us": rtt.round(),
        "loopback_connect_us": connect.round(),
        "forwarder_relay_us": relay.round(),
        "metadata_probe_rest_us": meta_rest.round(),
        "api_versions_probe_rest_us": api_rest.round(),
        "metadata_saturated_us": meta_sat.round(),
        "api_versions_saturated_us": api_sat.round(),
        "metadata_saturated_alone_direct_us": alone.round(),
        "metadata_saturated_all_direct_us": service_of("burst_metadata_all").round(),
        "api_ratio_probe_rest": round(api_rest / meta_rest),
        "api_ratio_saturated": if meta_sat > 0.0 { round(api_sat / meta_sat) } else { 0.0 },
        "service_saturated_us": ((meta_sat + api_sat) / 1.05).round(),
    })
}

/// The broker's time per request at rest, from the forwarders' timing of the fleet's own
/// ApiVersions and Metadata requests during every run's calm warm-up (about
/// `clients / warmup_spacing` refreshes per second over three brokers): per run the median
/// over brokers of each broker's median, then the median over runs. Medians, because on a
/// shared 2-core machine the means are dominated by moments nobody was scheduled (a few
/// requests of 30 ms and more), which is the machine, not the broker's work; the means are
/// recorded too. `service_rest_us = (ApiVersions + Metadata) / 1.05` (see [`fit`]).
fn fit_rest(fit: &mut Value, runs: &[Value]) {
    fn median(mut v: Vec<f64>) -> f64 {
        if v.is_empty() {
            return 0.0;
        }
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }
    let per_run = |key: &str, stat: &str| -> f64 {
        median(
            runs.iter()
                .map(|run| {
                    median(
                        run[key]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter(|b| b["n"].as_u64().unwrap_or(0) > 0)
                            .filter_map(|b| b[stat].as_f64())
                            .collect(),
                    )
                })
                .filter(|&x| x > 0.0)
                .collect(),
        )
    };
    let meta = per_run("warmup_broker_metadata_time", "p50_us");
    let api = per_run("warmup_broker_api_versions_time", "p50_us");
    fit["metadata_rest_us"] = json!(meta.round());
    fit["api_versions_rest_us"] = json!(api.round());
    fit["metadata_rest_mean_us"] = json!(per_run("warmup_broker_metadata_time", "mean_us").round());
    fit["api_versions_rest_mean_us"] = json!(per_run("warmup_broker_api_versions_time", "mean_us").round());
    fit["api_ratio_rest"] = json!(if meta > 0.0 { (api / meta * 1000.0).round() / 1000.0 } else { 0.0 });
    fit["service_rest_us"] = json!(((meta + api) / 1.05).round());
}

// ---------------------------------------------------------------------------------------
// One scenario under one strategy.

/// A measured refresh.
struct Refresh {
    client: usize,
    /// When the application asked, µs after the measurement's start.
    asked_us: u64,
    /// Time to metadata (µs), `None` if it failed or gave up.
    took_us: Option<u64>,
    attempts: u64,
    error: Option<String>,
}

fn run(lab: &Lab, name: &str, scenario: Scenario) -> Res<Value> {
    let args = &lab.args;
    let config = strategy(name)?;
    let seeds = lab.seeds();
    let warmup = warmup_for(&config, args.warmup);
    let scenario_seed = mix(args.seed, 0x100 + scenario as u64);
    // Fresh clients, each with the three brokers as seeds, rotated (as the simulator's).
    let options = ClientOptions {
        exchange: ExchangeConfig { client_id: CLIENT_ID.into(), ..ExchangeConfig::default() },
        ..ClientOptions::default()
    };
    let clients: Vec<Arc<Client>> = lab.rt.block_on(async {
        (0..args.clients)
            .map(|i| {
                let seeds: Vec<&str> = (0..BROKERS).map(|k| seeds[(i + k) % BROKERS].as_str()).collect();
                let cfg = ClusterConfig { refresh: config.refresh.with_seed(mix(args.seed, 1 + i as u64)), ..config };
                Client::new(cfg, &seeds, options.clone()).map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()
    })?;

    // The calm warm-up: the simulator's schedule (first at a random time within one
    // spacing, then every spacing × [0.5, 1.5)).
    let spacing = args.warmup_spacing;
    let warm_failed = lab.rt.block_on(async {
        let mut set = JoinSet::new();
        for (i, client) in clients.iter().enumerate() {
            let client = client.clone();
            let mut rng = Rng::new(mix(mix(args.seed, 0x5C), i as u64));
            set.spawn(async move {
                let mut failed = 0u32;
                let mut at = tokio::time::Instant::now() + spacing.mul_f64(rng.unit());
                for _ in 0..warmup {
                    tokio::time::sleep_until(at).await;
                    if !matches!(tokio::time::timeout(GIVE_UP, client.refresh()).await, Ok(Ok(_))) {
                        failed += 1;
                    }
                    at += spacing.mul_f64(0.5 + rng.unit());
                }
                failed
            });
        }
        let mut failed = 0;
        while let Some(f) = set.join_next().await {
            failed += f.unwrap_or(1);
        }
        failed
    });
    let warm_logs = lab.take_logs();
    let warm_latency = broker_latency(&warm_logs, METADATA, 0, u64::MAX);
    let warm_api_latency = broker_latency(&warm_logs, API_VERSIONS, 0, u64::MAX);
    std::thread::sleep(args.settle);

    // The incident.
    let node = args.node;
    let mut paused = None;
    match scenario {
        Scenario::Healthy => {}
        Scenario::OneHung => paused = Some(lab.cluster.pause(node)),
        Scenario::FailoverStorm => {
            lab.cluster.kill(node);
            lab.forwarders[node as usize - 1].refuse();
            // The dead broker's kept connections close; give every client time to notice.
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    let window = if scenario == Scenario::FailoverStorm { args.storm } else { args.window };
    lab.take_logs();
    let (load_before, cpu_before) = (loadavg(), cpu_ticks());
    let t0 = Instant::now() + Duration::from_millis(20);
    let t0_us = lab.us(t0);
    let mut refreshes: Vec<Refresh> = lab.rt.block_on(async {
        let mut schedule = Rng::new(scenario_seed);
        let start = tokio::time::Instant::from_std(t0);
        let mut set = JoinSet::new();
        let dead = seeds[node as usize - 1].clone();
        for (i, client) in clients.iter().enumerate() {
            let client = client.clone();
            let at = start + window.mul_f64(schedule.unit());
            // What each client would know in a failover: its connection to the dead broker
            // was lost, or (the others) its requests for that broker's partitions now say
            // NOT_LEADER. Elsewhere it knows nothing. Both strategies are told the same.
            let cause = match scenario {
                Scenario::FailoverStorm if args.causes => {
                    if client.stats().kept.as_deref() == Some(dead.as_str()) {
                        (RefreshCause::ConnectionLost, Some(dead.clone()))
                    } else {
                        (RefreshCause::StaleMetadata, None)
                    }
                }
                _ => (RefreshCause::Requested, None),
            };
            set.spawn(async move {
                tokio::time::sleep_until(at).await;
                let before = client.stats().attempts;
                let asked = Instant::now();
                let result = tokio::time::timeout(GIVE_UP, client.refresh_because(cause.0, cause.1.as_deref())).await;
                let took = asked.elapsed();
                let attempts = client.stats().attempts - before;
                let asked_us = asked.saturating_duration_since(t0).as_micros() as u64;
                match result {
                    Ok(Ok(_)) => {
                        Refresh { client: i, asked_us, took_us: Some(took.as_micros() as u64), attempts, error: None }
                    }
                    Ok(Err(e)) => Refresh { client: i, asked_us, took_us: None, attempts, error: Some(e.to_string()) },
                    Err(_) => Refresh { client: i, asked_us, took_us: None, attempts, error: Some("gave up".into()) },
                }
            });
        }
        let mut out = Vec::new();
        while let Some(r) = set.join_next().await {
            if let Ok(r) = r {
                out.push(r);
            }
        }
        out
    });
    std::thread::sleep(GRACE);
    let end_us = lab.us(Instant::now());
    let logs = lab.take_logs();
    let (load_after, cpu_after) = (loadavg(), cpu_ticks());
    // The machine's cores busy during the measurement (everyone's work, not only ours).
    let busy = match (cpu_before, cpu_after) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => Some((b1 - b0) as f64 / (t1 - t0) as f64),
        _ => None,
    };

    // Close the clients (and their connections) before the cluster recovers.
    lab.rt.block_on(async {
        for client in clients {
            if let Ok(client) = Arc::try_unwrap(client) {
                client.close().await;
            }
        }
    });
    drop(paused);
    if scenario == Scenario::FailoverStorm {
        lab.forwarders[node as usize - 1].accept_again();
        lab.cluster.restart(node);
        // A restarted broker's JIT is cold, and its start kept the cores busy: warm its
        // request path up as the calibration did, then let the machine settle.
        let direct = lab.direct.clone();
        lab.rt.block_on(async {
            let frames = calibrate::capture(direct[node as usize - 1], PROBE_ID).await?;
            calibrate::warm(&direct, &frames, 6000).await
        })?;
        std::thread::sleep(Duration::from_secs(8));
    }
    wait_healthy(lab)?;

    refreshes.sort_by_key(|r| r.client);
    let mut value = summarise(
        lab,
        name,
        scenario,
        window,
        warmup,
        warm_failed,
        &refreshes,
        &logs,
        t0_us,
        end_us,
        warm_latency,
        warm_api_latency,
    );
    value["loadavg_before"] = json!(load_before);
    value["loadavg_after"] = json!(load_after);
    value["cpu_busy"] = json!(busy);
    Ok(value)
}

/// The 1-minute load average.
fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// (busy, total) jiffies of all cores, from /proc/stat.
fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Waits until every broker answers with metadata listing all of them (after a SIGCONT or
/// a restart the cluster takes a moment to take the node back), then a little longer.
fn wait_healthy(lab: &Lab) -> Res<()> {
    let until = Instant::now() + Duration::from_secs(120);
    let seeds = lab.seeds();
    lab.rt.block_on(async {
        for seed in &seeds {
            loop {
                let ok = stagger_tokio::refresh(&RefreshConfig::sequential(), &[seed.as_str()])
                    .await
                    .is_ok_and(|m| m.brokers.len() == BROKERS);
                if ok {
                    break;
                }
                if Instant::now() > until {
                    return Err(format!("{seed} did not list {BROKERS} brokers again within 120 s"));
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        Ok(())
    })?;
    lab.take_logs();
    std::thread::sleep(Duration::from_secs(2));
    lab.take_logs();
    Ok(())
}

/// The spread of how long each broker took for the fleet's `api` requests that passed
/// within `[from_us, to_us)`.
fn broker_latency(logs: &[Log], api: i16, from_us: u64, to_us: u64) -> Vec<Spread> {
    logs.iter()
        .map(|log| {
            Spread::of(
                log.requests
                    .iter()
                    .filter(|r| r.ours && r.api == api && (from_us..to_us).contains(&r.at_us))
                    .filter_map(|r| r.took_us.map(|t| t as f64))
                    .collect(),
            )
        })
        .collect()
}

/// The most of `sorted` (µs) within any window `[t, t + window)`; the simulator's count.
fn peak_in_window(sorted: &[u64], window: u64) -> usize {
    let (mut best, mut start) = (0, 0);
    for (end, &t) in sorted.iter().enumerate() {
        while t - sorted[start] >= window {
            start += 1;
        }
        best = best.max(end + 1 - start);
    }
    best
}

#[allow(clippy::too_many_arguments)]
fn summarise(
    lab: &Lab,
    name: &str,
    scenario: Scenario,
    window: Duration,
    warmup: u32,
    warm_failed: u32,
    refreshes: &[Refresh],
    logs: &[Log],
    t0_us: u64,
    end_us: u64,
    warm_latency: Vec<Spread>,
    warm_api_latency: Vec<Spread>,
) -> Value {
    let n = refreshes.len().max(1) as f64;
    let mut times: Vec<u64> = refreshes.iter().map(|r| r.took_us.unwrap_or(u64::MAX)).collect();
    times.sort_unstable();
    let attempts: u64 = refreshes.iter().map(|r| r.attempts).sum();
    let failed = refreshes.iter().filter(|r| r.took_us.is_none()).count();
    let in_run = |at: u64| (t0_us..end_us).contains(&at);
    let mut per_broker = Vec::new();
    let (mut peak, mut peak_broker, mut peak_fixed) = (0, 0, 0);
    let mut buckets_all = Vec::new();
    let mut api_per_broker = Vec::new();
    let mut conns_per_broker = Vec::new();
    let mut unanswered = Vec::new();
    for (b, log) in logs.iter().enumerate() {
        let mut arrivals: Vec<u64> = log
            .requests
            .iter()
            .filter(|r| r.ours && r.api == METADATA && in_run(r.at_us))
            .map(|r| r.at_us - t0_us)
            .collect();
        arrivals.sort_unstable();
        let p = peak_in_window(&arrivals, PEAK_WINDOW_US);
        if p > peak {
            peak = p;
            peak_broker = b + 1;
        }
        let buckets_n = ((end_us - t0_us) / PEAK_WINDOW_US + 1) as usize;
        let mut buckets = vec![0u32; buckets_n];
        for &a in &arrivals {
            buckets[(a / PEAK_WINDOW_US) as usize] += 1;
        }
        peak_fixed = peak_fixed.max(buckets.iter().copied().max().unwrap_or(0));
        buckets_all.push(buckets);
        per_broker.push(arrivals.len());
        api_per_broker.push(log.requests.iter().filter(|r| r.ours && r.api == API_VERSIONS && in_run(r.at_us)).count());
        unanswered.push(log.requests.iter().filter(|r| r.ours && in_run(r.at_us) && r.took_us.is_none()).count());
        conns_per_broker.push(log.accepted_us.iter().filter(|&&a| in_run(a)).count());
    }
    let requests: usize = per_broker.iter().sum();
    let errors: Vec<&str> = refreshes.iter().filter_map(|r| r.error.as_deref()).take(5).collect();
    let _ = lab;
    let percentiles = stagger_sim::fleet::Percentiles::of_sorted(&times);
    json!({
        "scenario": scenario.name(),
        "strategy": name,
        "window_ms": window.as_secs_f64() * 1e3,
        "warmup_refreshes": warmup,
        "warmup_failed": warm_failed,
        "refreshes": refreshes.len(),
        "failed": failed,
        "errors": errors,
        "p50_ms": percentiles.p50_ms,
        "p99_ms": percentiles.p99_ms,
        "p999_ms": percentiles.p999_ms,
        "max_ms": percentiles.max_ms,
        "attempts": attempts,
        "attempts_per_refresh": attempts as f64 / n,
        "requests": requests,
        "requests_per_refresh": requests as f64 / n,
        "peak_requests": peak,
        "peak_broker": peak_broker,
        "peak_requests_fixed_buckets": peak_fixed,
        "requests_per_broker": per_broker,
        "api_versions_per_broker": api_per_broker,
        "connections_per_broker": conns_per_broker,
        "unanswered_requests_per_broker": unanswered,
        "broker_metadata_time": broker_latency(logs, METADATA, t0_us, end_us),
        "broker_api_versions_time": broker_latency(logs, API_VERSIONS, t0_us, end_us),
        "warmup_broker_metadata_time": warm_latency,
        "warmup_broker_api_versions_time": warm_api_latency,
        "metadata_per_100ms": buckets_all,
        "refresh_list": refreshes.iter().map(|r| json!([r.client, r.asked_us, r.took_us, r.attempts])).collect::<Vec<_>>(),
    })
}

// Keep the calibration types in the JSON's shape (they derive Serialize).
#[allow(dead_code)]
fn _types(_: Idle, _: Burst) {}
