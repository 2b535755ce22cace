//! The fleet simulator checked against the real cluster: the same fleet as `fleet_real`, with
//! the simulator's prices fitted to what that cluster charged, side by side with the real runs.
//!
//! `fleet_real` (`lab/src/bin/fleet_real/`) runs a few hundred real `stagger_tokio::Client`s
//! on a real 3-broker Kafka cluster, measures what the brokers charge (round trip, broker time
//! per Metadata and ApiVersions request at rest and saturated, a fresh connection's cost, and
//! over SASL_SSL the TLS handshake and SASL exchange) and writes it as JSON
//! (`stagger_lab::fleet_file`). This program reads one or more of those files (`--real PATH`,
//! repeatable; PLAINTEXT and SASL_SSL runs may be mixed, each listener gets its own section),
//! builds the same fleet in the simulator — clients, brokers, warm-up, request and storm
//! windows, the listener's security — once per fit (the prices at rest; saturated;
//! pipelined: the saturated price as work that holds the broker's queue, what rest adds above
//! it as latency that does not; and the machine: the lab's shared cores, the brokers' CPU per
//! request as their work, their connection work beside their requests, and the clients' own
//! work on the same cores, from runs that measured those), runs every strategy through `healthy`, `one_hung` and
//! `failover_storm`, and prints Markdown: real against simulated p50, p99, attempts, new
//! connections, ApiVersions and Metadata requests per refresh and the peak, with each cell's
//! factor and whether the model is within the bounds the gentleness issue sets (×1.5 on p50
//! and p99, ×1.15 on attempts, connections and peak). Beside them, not compared: the spare
//! connections per client the warm-up left, the state each incident met.
//!
//! ```text
//! R=docs/performance/real
//! for i in 21 22 23; do cargo run --release -p stagger-lab --bin fleet_real -- --out $R/fleet-real-plain-$i.json; done
//! for i in 23 24 25 26 27; do cargo run --release -p stagger-lab --bin fleet_real -- --listener sasl_ssl \
//!     --out $R/fleet-real-sasl-$i.json; done
//! cargo run --release -p stagger-lab --bin fleet_fit -- $(for f in plain-13 plain-14 plain-17 plain-18 plain-19 \
//!     plain-20 plain-21 plain-22 plain-23 sasl-14 sasl-15 sasl-18 sasl-19 sasl-21 sasl-22 sasl-23 sasl-24 \
//!     sasl-25 sasl-26 sasl-27; \
//!     do echo --real $R/fleet-real-$f.json; done) $(for f in plain-24 plain-25 sasl-27 sasl-28 \
//!     sasl-29 sasl-30 sasl-31 sasl-32 sasl-33-storm sasl-34 sasl-35; \
//!     do echo --cold-start $R/fleet-real-$f.json; done) --out docs/performance/fleet-vs-real.md
//! ```
//!
//! `--cold-start PATH` (repeatable) adds the cold start: the connections per client a real
//! fleet opened while it bootstrapped (runs that recorded it), beside those the simulated
//! warm-up of the same fleet opened under each fit of that listener.
//!
//! The older runs (PLAINTEXT 13, 14, 17–20; SASL_SSL 14, 15, 18, 19, 21, 22) came from the
//! same commands in earlier sessions: 13–15 before `fleet_real` measured the machine's CPU,
//! 17–22 before it read the brokers' CPU per thread. The machine fit takes each price from the
//! runs that measured it (the brokers' request path from those that read the threads apart),
//! and every run counts in the real means. A storm's time varies
//! between sessions on this machine by more than between two runs of one session.
//!
//! The real runs behind `docs/performance/fleet-vs-real.md` are kept in `docs/performance/real/`,
//! so the fit can be rerun (and a model change checked against them) without a cluster.
//!
//! Several runs of one listener are compared through their mean (geometric for times); their
//! spread around it is printed as the machine's noise, and the fit averages their prices.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use stagger::RefreshConfig;
use stagger_lab::fleet_file::{self, Burst, FleetFile, RefreshEntry, Run, ThreadCpu};
use stagger_sim::fleet::{
    BrokerBackground, ClientWork, FleetConfig, FleetScenario, HostDelay, Latency, ScenarioResult, Security, Strategy,
    WarmFleet,
};

const SCENARIOS: [FleetScenario; 3] = [FleetScenario::Healthy, FleetScenario::OneHung, FleetScenario::FailoverStorm];

/// Network threads per listener of the brokers `scripts/kafka.sh` starts
/// (`num.network.threads`), which the machine fit gives its brokers.
const KAFKA_NETWORK_THREADS: u32 = 2;

/// Threads of `fleet_real`'s runtime that run the clients and their drivers (its forwarders
/// have one more of their own).
const FLEET_REAL_CLIENT_THREADS: u32 = 2;

/// The bounds of the gentleness issue: a typical factor within these, per metric.
const BOUND_TIME: f64 = 1.5;
const BOUND_COUNT: f64 = 1.15;

struct Args {
    real: Vec<PathBuf>,
    /// Runs whose cold start is compared with the model's (`--cold-start PATH`), each under
    /// the fits of its listener's `--real` runs.
    cold_start: Vec<PathBuf>,
    out: Option<PathBuf>,
    strategies: Vec<String>,
    /// Files written by a build before `ClusterConfig::gentle_until_calm`
    /// (`--real-fast-start`, `--cold-start-fast-start`): their adaptive strategies ran fast
    /// from the bootstrap, so the model runs them as `<strategy>-fast-start`.
    fast_start: Vec<PathBuf>,
}

impl Args {
    /// Reads `path`, naming its adaptive strategies `<name>-fast-start` if it is a file of
    /// a build before gentle until calm.
    fn read(&self, path: &std::path::Path) -> Result<FleetFile, String> {
        let mut file = FleetFile::read(path)?;
        if self.fast_start.iter().any(|p| p == path) {
            for run in &mut file.runs {
                let adaptive = run.strategy.starts_with("adaptive") || run.strategy.starts_with("long-lived");
                if adaptive && !run.strategy.ends_with("-fast-start") {
                    run.strategy.push_str("-fast-start");
                }
            }
        }
        Ok(file)
    }
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        real: Vec::new(),
        cold_start: Vec::new(),
        out: None,
        strategies: vec!["adaptive".into(), "sequential".into()],
        fast_start: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--real" => args.real.push(PathBuf::from(value()?)),
            "--cold-start" => args.cold_start.push(PathBuf::from(value()?)),
            "--real-fast-start" => {
                let path = PathBuf::from(value()?);
                args.fast_start.push(path.clone());
                args.real.push(path);
            }
            "--cold-start-fast-start" => {
                let path = PathBuf::from(value()?);
                args.fast_start.push(path.clone());
                args.cold_start.push(path);
            }
            "--out" => args.out = Some(PathBuf::from(value()?)),
            "--strategies" => args.strategies = value()?.split(',').map(str::to_owned).collect(),
            "-h" | "--help" => {
                println!(
                    "usage: fleet_fit --real PATH [--real PATH]... [--cold-start PATH]... [--out PATH] \
                     [--strategies adaptive,sequential] (--real-fast-start PATH, --cold-start-fast-start PATH: \
                     a file of a build before gentle until calm)"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if args.real.is_empty() {
        return Err("needs at least one --real PATH written by fleet_real".into());
    }
    for s in &args.strategies {
        strategy(s)?;
    }
    Ok(args)
}

/// Fan-out switches since removed from the core, named by earlier files' strategies: a run
/// without one ran what is now the policy itself, and a run with one is not modelled.
const REMOVED_SWITCHES: &[&str] = &["tls_burst_hold"];

/// `refresh` with the fan-out switch `switch` set `on`, or without it if it was removed and
/// was off.
fn with_switch(mut refresh: RefreshConfig, name: &str, switch: &str, on: bool) -> Result<RefreshConfig, String> {
    if REMOVED_SWITCHES.contains(&switch) {
        return if on { Err(format!("{name}: fanout.tuning.{switch} was removed")) } else { Ok(refresh) };
    }
    refresh
        .set(&format!("fanout.tuning.{switch}"), if on { "true" } else { "false" })
        .map_err(|e| format!("{name}: {e}"))?;
    Ok(refresh)
}

fn strategy(name: &str) -> Result<Strategy, String> {
    // `fleet_real`'s `<strategy>-fast-start`: fast from the bootstrap (`gentle_until_calm` off).
    if let Some(base) = name.strip_suffix("-fast-start") {
        return match strategy(base)? {
            Strategy::Core { cluster, .. } => {
                Ok(Strategy::core_with(name, stagger::ClusterConfig { gentle_until_calm: false, ..cluster }))
            }
            Strategy::Oracle => Err(format!("{name}: the oracle has no bootstrap to run fast")),
        };
    }
    // As `fleet_real` runs them: every name but `long-lived*` and `sequential-shuffled`
    // asks its seeds in the order handed out.
    let listed = |refresh: RefreshConfig| RefreshConfig { shuffle_seeds: false, ..refresh };
    Ok(match name {
        "adaptive" => Strategy::core("adaptive", listed(RefreshConfig::adaptive())),
        "sequential" => Strategy::core("sequential", listed(RefreshConfig::sequential())),
        "sequential-shuffled" => {
            Strategy::core("sequential-shuffled", RefreshConfig { shuffle_seeds: true, ..RefreshConfig::sequential() })
        }
        "staggered-500ms" => Strategy::core("staggered-500ms", listed(RefreshConfig::staggered())),
        "oracle" => Strategy::Oracle,
        // `fleet_real`'s default with one fan-out rule switched (rule-costs.md, gentleness.md).
        other if other.starts_with("adaptive-with") => {
            let (switch, on) = match other.strip_prefix("adaptive-without-") {
                Some(switch) => (switch, false),
                None => (other.strip_prefix("adaptive-with-").unwrap_or(other), true),
            };
            Strategy::core(other, with_switch(listed(RefreshConfig::adaptive()), other, switch, on)?)
        }
        other if other == "long-lived" || other.starts_with("long-lived-without-") => {
            let mut refresh = RefreshConfig { shuffle_seeds: true, ..RefreshConfig::adaptive() };
            if let Some(switch) = other.strip_prefix("long-lived-without-") {
                refresh = with_switch(refresh, other, switch, false)?;
            }
            Strategy::core(other, refresh)
        }
        other => {
            let known = "adaptive, sequential, sequential-shuffled, staggered-500ms, oracle, adaptive-with[out]-<fanout.tuning switch>, long-lived[-without-<switch>], <any>-fast-start";
            return Err(format!("unknown strategy {other:?} ({known})"));
        }
    })
}

fn micros(us: f64) -> Duration {
    Duration::from_micros(us.max(0.0).round() as u64)
}

/// The compared numbers of one row. Per refresh: attempts, new connections, ApiVersions and
/// Metadata requests; `None` where a source cannot count it (ApiVersions inside TLS).
#[derive(Clone, Debug)]
struct Row {
    source: String,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    attempts: Option<f64>,
    connections: Option<f64>,
    api_versions: Option<f64>,
    requests: Option<f64>,
    peak: Option<f64>,
    /// Spare connections per client the warm-up left: the state the incident met, shown
    /// beside the metrics but not one of them.
    spares: f64,
    failed: u64,
}

/// The metrics in table order, with their bound.
const METRICS: [(&str, f64); 7] = [
    ("p50", BOUND_TIME),
    ("p99", BOUND_TIME),
    ("attempts", BOUND_COUNT),
    ("connections", BOUND_COUNT),
    ("ApiVersions", BOUND_COUNT),
    ("Metadata", BOUND_COUNT),
    ("peak", BOUND_COUNT),
];

impl Row {
    fn values(&self) -> [Option<f64>; 7] {
        [self.p50_ms, self.p99_ms, self.attempts, self.connections, self.api_versions, self.requests, self.peak]
    }

    fn sim(source: &str, r: &ScenarioResult, spares: f64) -> Row {
        let per = |x: u64| Some(x as f64 / r.refreshes.max(1) as f64);
        Row {
            source: source.into(),
            p50_ms: r.time_to_metadata.p50_ms,
            p99_ms: r.time_to_metadata.p99_ms,
            attempts: Some(r.attempts_per_refresh),
            connections: per(r.connections),
            api_versions: per(r.api_versions),
            requests: Some(r.requests_per_refresh),
            peak: Some(r.peak_requests as f64),
            spares,
            failed: r.failed as u64,
        }
    }

    /// A real run; `label` numbers it as `file` or `file.turn`.
    fn real(label: &str, v: &Run, clients: u32) -> Row {
        let per = |x: usize| Some(x as f64 / v.refreshes.max(1) as f64);
        Row {
            source: match v.cpu_busy {
                Some(busy) => format!("**real #{label}** (cores {:.0} % busy)", busy * 100.0),
                None => format!("**real #{label}**"),
            },
            p50_ms: v.time_to_metadata.p50_ms,
            p99_ms: v.time_to_metadata.p99_ms,
            attempts: Some(v.attempts_per_refresh),
            connections: per(v.connections_per_broker.iter().sum()),
            api_versions: v.api_versions_per_broker.as_ref().and_then(|b| per(b.iter().sum())),
            requests: Some(v.requests_per_refresh),
            peak: Some(v.peak_requests as f64),
            spares: spares_held(v, clients),
            failed: v.failed as u64,
        }
    }
}

/// Spare connections per client when the incident came: those held beside the lead
/// (`ClientStats::kept_connections` − 1), or, in files written before that was counted, the
/// warm-up's cumulative `ClientStats::spares_kept` (at most one per client).
fn spares_held(v: &Run, clients: u32) -> f64 {
    let clients = clients.max(1) as f64;
    match v.kept_connections_before {
        Some(held) => (held as f64 - clients).max(0.0) / clients,
        None => (v.spares_kept_before as f64 / clients).min(1.0),
    }
}

/// The real runs' mean: geometric for times, arithmetic for counts.
fn mean_row(rows: &[Row]) -> Option<Row> {
    let n = rows.len() as f64;
    if rows.is_empty() {
        return None;
    }
    let geo = |f: fn(&Row) -> Option<f64>| -> Option<f64> {
        let v: Option<Vec<f64>> = rows.iter().map(f).collect();
        v.filter(|v| v.iter().all(|x| *x > 0.0)).map(|v| (v.iter().map(|x| x.ln()).sum::<f64>() / n).exp())
    };
    let avg = |f: fn(&Row) -> Option<f64>| -> Option<f64> {
        let v: Option<Vec<f64>> = rows.iter().map(f).collect();
        v.map(|v| v.iter().sum::<f64>() / n)
    };
    Some(Row {
        source: format!("**real, mean of {}**", rows.len()),
        p50_ms: geo(|r| r.p50_ms),
        p99_ms: geo(|r| r.p99_ms),
        attempts: avg(|r| r.attempts),
        connections: avg(|r| r.connections),
        api_versions: avg(|r| r.api_versions),
        requests: avg(|r| r.requests),
        peak: avg(|r| r.peak),
        spares: rows.iter().map(|r| r.spares).sum::<f64>() / n,
        failed: rows.iter().map(|r| r.failed).sum(),
    })
}

/// `sim ÷ real` per metric; 0 ÷ 0 is exact (1.0), `x ÷ 0` is off the scale (`None`).
fn ratios(row: &Row, real: &Row) -> [Option<f64>; 7] {
    let (a, b) = (row.values(), real.values());
    core::array::from_fn(|i| match (a[i], b[i]) {
        (Some(s), Some(r)) if s == 0.0 && r == 0.0 => Some(1.0),
        (Some(s), Some(r)) if s > 0.0 && r > 0.0 => Some(s / r),
        _ => None,
    })
}

/// A fitted simulator configuration.
struct Fit {
    name: String,
    how: String,
    config: FleetConfig,
}

/// The fits of one listener's runs: broker prices at rest, saturated, pipelined (both), and
/// the lab's machine (its shared cores and the clients' work on them), where the runs
/// measured what that needs.
fn fits(files: &[FleetFile]) -> Vec<Fit> {
    let first = &files[0];
    let avg = |f: fn(&fleet_file::Fit) -> Option<f64>| mean_price(files, f);
    let secured = |f: fn(&fleet_file::SecuredFit) -> f64| mean_price(files, |p| p.secured.as_ref().map(f));
    // The mean of a price every run has.
    let mean = |f: fn(&fleet_file::Fit) -> f64| files.iter().map(|x| f(&x.fit)).sum::<f64>() / files.len() as f64;
    let rtt = mean(|p| p.rtt_us);
    let connection = mean(|p| p.connection_saturated_us);
    let sasl = first.listener == "sasl_ssl";
    let base = FleetConfig {
        clients: first.clients,
        brokers: first.brokers,
        seed: first.seed,
        rtt: micros(rtt),
        warmup_refreshes: first.warmup_refreshes,
        warmup_spacing: micros(first.warmup_spacing_ms * 1e3),
        settle: micros(first.settle_ms * 1e3),
        request_window: micros(first.request_window_ms * 1e3),
        storm_window: micros(first.storm_window_ms * 1e3),
        peak_window: micros(first.peak_window_ms * 1e3),
        host_delay: host_delay(files),
        hung_slowdown: hung_slowdown(files),
        // Over SASL_SSL the real requests are counted by the brokers' request logs, when a
        // broker has read them; over PLAINTEXT by the forwarders, as they reach it.
        count_reads: sasl,
        ..FleetConfig::default()
    };
    // A fresh connection's cost: over PLAINTEXT all of it is the accept. Over SASL_SSL the TLS
    // handshake and the SASL exchange hold a broker for what they cost its process in CPU
    // (`/proc`, in the connect-to-close loops), charged at the handshake. Not the loops'
    // machine time per connection: on this 2-core machine that includes the clients' TLS and
    // PBKDF2, and a long-lived client derives its SCRAM keys once (`ScramKeys`), where each
    // one-shot loop refresh derives them again; the model's brokers have cores of their own.
    let plain_connection = if sasl { secured(|s| s.plaintext_connection_saturated_us) } else { Some(connection) };
    let accept = plain_connection.unwrap_or(connection.min(FleetConfig::default().accept_time.as_micros() as f64));
    let tls_sasl_work = secured(|s| s.tls_sasl_broker_cpu_us).unwrap_or(connection - accept);
    let secure_saturated = sasl.then(|| Security::sasl_ssl_scram(micros(tls_sasl_work), Duration::ZERO));
    let secure_rest = sasl.then(|| {
        // Client-observed at rest, less the round trips the model already charges.
        let tls = secured(|s| s.tls_rest_us).map_or(0.0, |t| (t - rtt).max(0.0));
        let sasl = secured(|s| s.sasl_rest_us).map_or(0.0, |t| (t - 3.0 * rtt).max(0.0));
        Security::sasl_ssl_scram(micros(tls), micros(sasl))
    });
    let mut out = Vec::new();
    // Over SASL_SSL the brokers log no ApiVersions at rest when every kept connection is
    // asked for Metadata alone (a new connection's is answered before authentication, which
    // logs nothing): then its rest price is the Metadata one at the ratio the calibration's
    // probes at rest measured between the two.
    let meta_rest = mean(|p| p.metadata_rest_us);
    let api_rest = avg(|p| p.api_versions_rest_us).unwrap_or(meta_rest * mean(|p| p.api_ratio_probe_rest));
    let rest = (meta_rest > 0.0).then_some((meta_rest, api_rest));
    if let Some((meta, api)) = rest {
        out.push(Fit {
            name: "sim (rest)".into(),
            how: "broker times of the calm warm-ups (forwarder-timed medians; with no ApiVersions logged, \
                  ApiVersions at the calibration probes' ratio to Metadata); TLS and SASL client-observed at rest"
                .into(),
            config: FleetConfig {
                service_time: micros(meta),
                api_versions_time: micros(api),
                accept_time: micros(accept),
                security: secure_rest.unwrap_or(Security::PLAINTEXT),
                ..base.clone()
            },
        });
    }
    let (meta_sat, api_sat) = (mean(|p| p.metadata_saturated_us), mean(|p| p.api_versions_saturated_us));
    out.push(Fit {
        name: "sim (saturated)".into(),
        how: "1 / the answers per second of the storm's two survivors driven together; a fresh connection's \
              accept from connect-to-close loops, its TLS and SASL from the brokers' CPU in them"
            .into(),
        config: FleetConfig {
            service_time: micros(meta_sat),
            api_versions_time: micros(api_sat),
            accept_time: micros(accept),
            security: secure_saturated.unwrap_or(Security::PLAINTEXT),
            ..base.clone()
        },
    });
    // One price per request, valid in both regimes: the saturated price is the work that
    // holds the queue, and what rest adds above it is latency that does not.
    if let Some((meta_rest, api_rest)) = rest {
        let mut latency = Latency {
            metadata: micros((meta_rest - meta_sat).max(0.0)),
            api_versions: micros((api_rest - api_sat).max(0.0)),
            ..Latency::default()
        };
        let mut security = secure_saturated.unwrap_or(Security::PLAINTEXT);
        if let (Some(rest), Some(work)) = (secure_rest, secure_saturated) {
            let work = work.tls_time.unwrap_or_default();
            latency.tls = rest.tls_time.unwrap_or_default().saturating_sub(work);
            latency.sasl = rest.sasl_time;
            security.sasl_time = Duration::ZERO;
        }
        out.push(Fit {
            name: "sim (pipelined)".into(),
            how: "work = the saturated price (holds the broker's queue), latency = rest − saturated (does not); \
                  TLS and SASL: the brokers' CPU per connection as work, client-observed rest above it as latency"
                .into(),
            config: FleetConfig {
                service_time: micros(meta_sat),
                api_versions_time: micros(api_sat),
                accept_time: micros(accept),
                security,
                latency,
                ..base.clone()
            },
        });
    }
    if let (Some((meta_rest, api_rest)), Some(machine)) = (rest, machine_prices(files)) {
        // Latency above the brokers' CPU, as the pipelined fit's above the saturated price.
        let mut latency = Latency {
            metadata: micros((meta_rest - machine.metadata_cpu).max(0.0)),
            api_versions: micros((api_rest - machine.api_versions_cpu).max(0.0)),
            ..Latency::default()
        };
        let secure_machine = machine.tls_sasl_cpu.map(|cpu| Security::sasl_ssl_scram(micros(cpu), Duration::ZERO));
        let mut security = secure_machine.unwrap_or(Security::PLAINTEXT);
        if let (Some(rest), Some(work)) = (secure_rest, secure_machine) {
            latency.tls = rest.tls_time.unwrap_or_default().saturating_sub(work.tls_time.unwrap_or_default());
            latency.sasl = rest.sasl_time;
            security.sasl_time = Duration::ZERO;
        }
        out.push(Fit {
            name: "sim (machine)".into(),
            how: format!(
                "the lab's machine: {} cores shared, in slices, by the brokers' threads and the clients' process; \
                 work = the brokers' {} CPU per request in the saturated loops, latency = rest − that{}; accept, TLS, \
                 SASL and request reads on {} network threads per broker; the clients' CPU in the storms as {} µs \
                 per message handled{} on {} threads, and the forwarders' {} µs per request relayed on one",
                machine.cores,
                if machine.request_path { "request path's" } else { "processes'" },
                if machine.background.is_zero() {
                    String::new()
                } else {
                    format!(
                        "; beside it, on a thread of its own, the rest of the process's CPU in the loops: {} µs per \
                         accept, {} µs per TLS handshake, {} µs per request",
                        machine.background.accept.as_micros(),
                        machine.background.tls.as_micros(),
                        machine.background.request.as_micros()
                    )
                },
                KAFKA_NETWORK_THREADS,
                machine.client.per_message.as_micros(),
                if machine.client.tls.is_zero() {
                    String::new()
                } else {
                    format!(
                        ", {} µs per TLS handshake and {} µs for a client's SCRAM keys",
                        machine.client.tls.as_micros(),
                        machine.client.key_derivation.as_micros()
                    )
                },
                machine.client.threads,
                machine.client.relay.as_micros(),
            ),
            config: FleetConfig {
                service_time: micros(machine.metadata_cpu),
                api_versions_time: micros(machine.api_versions_cpu),
                accept_time: micros(machine.accept_cpu),
                security,
                latency,
                shared_cores: machine.cores,
                network_threads: KAFKA_NETWORK_THREADS,
                client_work: machine.client,
                broker_background: machine.background,
                ..base.clone()
            },
        });
    }
    out
}

/// What the lab's machine charges, for the machine fit: see [`machine_prices`].
struct MachinePrices {
    cores: u32,
    /// The brokers' CPU per Metadata and per ApiVersions request, and per accepted
    /// connection beside its two requests (µs).
    metadata_cpu: f64,
    api_versions_cpu: f64,
    accept_cpu: f64,
    /// Over SASL_SSL, the brokers' CPU a TLS handshake and SASL exchange add to a fresh
    /// connection (µs).
    tls_sasl_cpu: Option<f64>,
    /// What the brokers' processes spent beside the request path per piece of work on it
    /// (zero unless `request_path`).
    background: BrokerBackground,
    /// Whether the prices are the request path's alone (runs that read the brokers' threads
    /// apart), not the whole processes'.
    request_path: bool,
    client: ClientWork,
}

/// The machine fit's prices, averaged over the runs that measured them (`None` if none did):
///
/// * the cores, from the runs' machine (`"2 cores, …"`);
/// * the brokers' CPU per Metadata and ApiVersions request in the saturated loops against
///   the storm's two survivors through their forwarders, and per fresh connection in the
///   connect-to-close loops less its two requests;
/// * the forwarders' CPU per request relayed: the driving process's CPU per request in the
///   loops through the forwarders less in those straight to the brokers;
/// * the clients' own CPU in the storms (`Run::client_cpu_ms`, less the forwarders' share)
///   over the messages the clients handled: each refresh's request, each new connection,
///   each ApiVersions and Metadata answer, over SASL_SSL each TLS handshake and SASL
///   exchange too. Over SASL_SSL, where the strategies' storms open very different numbers
///   of connections, a least-squares fit splits a TLS handshake's own cost from a
///   message's. These are what the storms cost the clients, in CPU time; what the tables
///   compare is how long the refreshes took.
fn machine_prices(files: &[FleetFile]) -> Option<MachinePrices> {
    let cores = files[0].machine.split_whitespace().next()?.parse::<u32>().ok().filter(|&c| c > 0)?;
    // Over the runs that measured it: the machine and the build are the same.
    let mean = |f: &dyn Fn(&FleetFile) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = files.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    // The request path's CPU (network threads and request handlers) where the runs read the
    // brokers' threads apart: the work a request waits for. The JIT's compiler threads spent
    // about as much again in the SASL_SSL loops, beside the requests, not in their way.
    // Older runs have the whole processes' only; prices never mix the two.
    let request_path =
        files.iter().any(|f| f.calibration.burst_metadata_two_forwarded.brokers_threads_cpu_per_request_us.is_some());
    let burst_cpu = |b: &Burst| match request_path {
        true => b.brokers_threads_cpu_per_request_us.map(|t| t.request_path),
        false => b.brokers_cpu_per_request_us,
    };
    let metadata_cpu = mean(&|f| burst_cpu(&f.calibration.burst_metadata_two_forwarded))?;
    let api_versions_cpu = mean(&|f| burst_cpu(&f.calibration.burst_api_versions_two_forwarded))?;
    let fresh = mean(&|f| burst_cpu(&f.calibration.churn_two_forwarded))?;
    let tls_sasl_cpu = mean(&|f| {
        let s = f.calibration.secured.as_ref()?;
        let (tls, plain) = (&s.churn_refresh_sasl_ssl_two_forwarded, &s.churn_refresh_plaintext_two_forwarded);
        match request_path {
            true => Some(tls.broker_threads_cpu_us?.request_path - plain.broker_threads_cpu_us?.request_path),
            false => Some(f.fit.secured.as_ref()?.tls_sasl_broker_cpu_us),
        }
    });
    let accept_cpu = (fresh - metadata_cpu - api_versions_cpu).max(0.0);
    // Beside the request path, per piece of work on it: the rest of each loop's CPU.
    let beside = |t: Option<ThreadCpu>| t.map(|t| t.total() - t.request_path);
    let bursts_beside = |b: &Burst| beside(b.brokers_threads_cpu_per_request_us);
    let background = match request_path {
        false => BrokerBackground::default(),
        true => {
            let meta = mean(&|f| bursts_beside(&f.calibration.burst_metadata_two_forwarded)).unwrap_or(0.0);
            let api = mean(&|f| bursts_beside(&f.calibration.burst_api_versions_two_forwarded)).unwrap_or(0.0);
            let fresh = mean(&|f| bursts_beside(&f.calibration.churn_two_forwarded)).unwrap_or(0.0);
            let tls = mean(&|f| {
                let s = f.calibration.secured.as_ref()?;
                Some(
                    beside(s.churn_refresh_sasl_ssl_two_forwarded.broker_threads_cpu_us)?
                        - beside(s.churn_refresh_plaintext_two_forwarded.broker_threads_cpu_us)?,
                )
            });
            BrokerBackground {
                accept: micros((fresh - meta - api).max(0.0)),
                tls: micros(tls.unwrap_or(0.0).max(0.0)),
                request: micros(((meta + api) / 2.0).max(0.0)),
            }
        }
    };
    // The forwarders' CPU per request relayed with its answer: the driving process's CPU per
    // request through them less straight to the brokers.
    let relay = mean(&|f| {
        let c = &f.calibration;
        Some(c.burst_metadata_two_forwarded.own_cpu_per_request_us? - c.burst_metadata_two.own_cpu_per_request_us?)
    })?
    .max(0.0);
    let tls_listener = files[0].listener == "sasl_ssl";
    // (the clients' own CPU µs, messages, TLS handshakes) per storm run: the process's CPU
    // less what its forwarders spent relaying.
    let mut rows = Vec::new();
    for run in files.iter().flat_map(|f| &f.runs).filter(|r| r.scenario == "failover_storm") {
        let Some(cpu) = run.client_cpu_ms.map(|ms| ms * 1e3) else { continue };
        let connections: usize = run.connections_per_broker.iter().sum();
        let api_versions = match (&run.api_versions_per_broker, &run.secured) {
            (Some(a), _) if !tls_listener => a.iter().sum::<usize>(),
            (_, Some(s)) => s.api_versions_logged_per_broker.iter().sum::<usize>() + connections,
            _ => return None,
        };
        let (secured, tls) = if tls_listener { (2 * connections, connections) } else { (0, 0) };
        let messages = run.refreshes + connections + api_versions + run.requests + secured;
        let relayed = api_versions + run.requests + secured;
        rows.push(((cpu - relay * relayed as f64).max(0.0), messages as f64, tls as f64));
    }
    let (per_message, tls) = least_squares(&rows)?;
    // A client's first SASL exchange also derives its SCRAM keys: what a one-shot SASL_SSL
    // refresh costs the client in the loops beyond a PLAINTEXT one, less its TLS handshake.
    let key_derivation = mean(&|f| {
        let s = f.calibration.secured.as_ref()?;
        Some(
            s.churn_refresh_sasl_ssl_two_forwarded.client_cpu_us
                - s.churn_refresh_plaintext_two_forwarded.client_cpu_us,
        )
    })
    .map_or(0.0, |extra| (extra - tls).max(0.0));
    Some(MachinePrices {
        cores,
        metadata_cpu,
        api_versions_cpu,
        accept_cpu,
        tls_sasl_cpu,
        background,
        request_path,
        client: ClientWork {
            per_message: micros(per_message),
            tls: micros(tls),
            threads: FLEET_REAL_CLIENT_THREADS,
            relay: micros(relay),
            key_derivation: micros(key_derivation),
        },
    })
}

/// `y ≈ m·x + t·z` over `(y, x, z)` rows, both factors at least 0: the two-factor fit when
/// `z` varies enough to tell them apart and gives `t ≥ 0`, else `y ≈ m·x` alone.
fn least_squares(rows: &[(f64, f64, f64)]) -> Option<(f64, f64)> {
    let sum = |f: &dyn Fn(&(f64, f64, f64)) -> f64| rows.iter().map(f).sum::<f64>();
    let (xx, xz, zz) = (sum(&|r| r.1 * r.1), sum(&|r| r.1 * r.2), sum(&|r| r.2 * r.2));
    let (xy, zy) = (sum(&|r| r.1 * r.0), sum(&|r| r.2 * r.0));
    if xx <= 0.0 {
        return None;
    }
    let det = xx * zz - xz * xz;
    if det > 1e-9 * xx * zz.max(1.0) {
        let m = (xy * zz - zy * xz) / det;
        let t = (zy * xx - xy * xz) / det;
        if m >= 0.0 && t >= 0.0 {
            return Some((m, t));
        }
    }
    Some(((xy / xx).max(0.0), 0.0))
}

/// The machine's pauses at rest ([`HostDelay`]): over every calm (`healthy`) real run, the
/// share of refreshes slower than twice their run's median, and their mean time above that
/// median. The median itself is the brokers' work, which the prices already carry.
fn host_delay(files: &[FleetFile]) -> HostDelay {
    let (mut slow, mut all, mut above) = (0usize, 0usize, 0.0);
    for run in files.iter().flat_map(|f| &f.runs).filter(|r| r.scenario == "healthy") {
        let took = answered_us(run, |_| true);
        let Some(&median) = took.get(took.len() / 2) else { continue };
        all += took.len();
        for &t in took.iter().filter(|&&t| t > 2 * median) {
            slow += 1;
            above += (t - median) as f64;
        }
    }
    if slow == 0 {
        return HostDelay::default();
    }
    HostDelay { share: slow as f64 / all as f64, mean: micros(above / slow as f64) }
}

/// How much slower the brokers still answering were while one was hung
/// ([`FleetConfig::hung_slowdown`]): in each real `one_hung` run, the refreshes that needed
/// one attempt (their lead was not the stopped node) over the same strategy's `healthy` run
/// in the same file, compared at the quantile where the `one_hung` run's median falls; the
/// geometric mean over runs, never below 1.
///
/// Why that quantile and not their medians: the hedged refreshes are the slow ones, so with
/// a share `s` of one-attempt refreshes, the run's median is their `0.5 / s`-quantile (the
/// 75th percentile when a third of the clients led on the stopped node). While a broker is
/// stopped, the others' answers spread out more than they slow down at the median.
fn hung_slowdown(files: &[FleetFile]) -> f64 {
    let mut logs = Vec::new();
    for f in files {
        for hung in f.runs.iter().filter(|r| r.scenario == "one_hung") {
            let Some(calm) = f.runs.iter().find(|r| r.scenario == "healthy" && r.strategy == hung.strategy) else {
                continue;
            };
            let one_attempt = answered_us(hung, |e| e.3 == 1);
            let all = answered_us(calm, |_| true);
            if one_attempt.is_empty() {
                continue;
            }
            let q = (0.5 * hung.refresh_list.len() as f64 / one_attempt.len() as f64).min(0.99);
            let at = |v: &[u64]| v.get((v.len() as f64 * q) as usize).map(|&t| t as f64);
            if let (Some(h), Some(c)) = (at(&one_attempt), at(&all)) {
                if h > 0.0 && c > 0.0 {
                    logs.push((h / c).ln());
                }
            }
        }
    }
    if logs.is_empty() {
        return 1.0;
    }
    (logs.iter().sum::<f64>() / logs.len() as f64).exp().max(1.0)
}

/// The times to metadata (µs) of a real run's answered refreshes that `which` keeps, sorted.
fn answered_us(run: &Run, which: impl Fn(&RefreshEntry) -> bool) -> Vec<u64> {
    let mut took: Vec<u64> = run.refresh_list.iter().filter(|e| which(e)).filter_map(|e| e.2).collect();
    took.sort_unstable();
    took
}

/// The mean of a price over the runs that have it.
fn mean_price(files: &[FleetFile], price: impl Fn(&fleet_file::Fit) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = files.iter().filter_map(|x| price(&x.fit)).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
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

fn fmt_count(x: Option<f64>) -> String {
    x.map_or("—".into(), |x| if x >= 10.0 { format!("{x:.0}") } else { format!("{x:.3}") })
}

fn fmt_ratio(x: Option<f64>) -> String {
    x.map_or("—".into(), |x| format!("{x:.2}"))
}

/// `exp(mean |ln r|)`: how far off a set of ratios typically is, as a factor ≥ 1.
fn typical(ratios: &[f64]) -> Option<f64> {
    (!ratios.is_empty()).then(|| (ratios.iter().map(|r| r.ln().abs()).sum::<f64>() / ratios.len() as f64).exp())
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
    let mut groups: Vec<(String, Vec<FleetFile>)> = Vec::new();
    for path in &args.real {
        let file = args.read(path)?;
        match groups.iter_mut().find(|(l, _)| *l == file.listener) {
            Some((_, files)) => {
                let a = &files[0];
                if (a.clients, a.brokers, a.warmup_refreshes) != (file.clients, file.brokers, file.warmup_refreshes)
                    || a.request_window_ms != file.request_window_ms
                    || a.storm_window_ms != file.storm_window_ms
                {
                    return Err(format!(
                        "{} runs a different fleet than the other {} runs",
                        path.display(),
                        a.listener
                    ));
                }
                files.push(file);
            }
            None => groups.push((file.listener.clone(), vec![file])),
        }
    }
    let mut md = String::new();
    header(&mut md, &groups);
    let mut summary = Vec::new();
    let mut listener_fits = Vec::new();
    for (listener, files) in &groups {
        let fits = fits(files);
        let mut results: Vec<Vec<Simulated>> = Vec::new();
        for f in &fits {
            let mut per_strategy = Vec::new();
            for name in &args.strategies {
                let t = Instant::now();
                // Each incident starts from the real fleet's state before it: its spares, and
                // where they sat (with the clients whose lead then fails, or with the others).
                let mut simulated = Simulated { scenarios: Vec::new(), spares_per_client: Vec::new() };
                for scenario in SCENARIOS {
                    let (warm_spares, warm_spares_failing) = match real_spares_by_lead(files, name, scenario.name()) {
                        Some((others, failing)) => (others, Some(failing)),
                        None => (real_spares(files, name), None),
                    };
                    let warm_leads = real_leads(files, name, scenario.name());
                    let config = FleetConfig { warm_spares, warm_spares_failing, warm_leads, ..f.config.clone() };
                    let warm = WarmFleet::new(&config, &strategy(name)?);
                    let result = warm.run(scenario);
                    let clients = config.clients.max(1) as f64;
                    simulated.spares_per_client.push(result.spares_before as f64 / clients);
                    simulated.scenarios.push(result);
                }
                per_strategy.push(simulated);
                eprintln!("fleet_fit: {listener} {:<32} {:<12} {:.1} s", f.name, name, t.elapsed().as_secs_f64());
            }
            results.push(per_strategy);
        }
        summary.push(section(&mut md, listener, files, &fits, &results, &args.strategies));
        listener_fits.push((listener.clone(), fits));
    }
    verdict(&mut md, &summary);
    if !args.cold_start.is_empty() {
        let files = args.cold_start.iter().map(|p| args.read(p)).collect::<Result<Vec<_>, _>>()?;
        cold_start_section(&mut md, &listener_fits, &files);
    }
    print!("{md}");
    if let Some(out) = &args.out {
        std::fs::write(out, &md).map_err(|e| format!("writing {}: {e}", out.display()))?;
        eprintln!("fleet_fit: wrote {}", out.display());
    }
    eprintln!("fleet_fit: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Where the real runs of `scenario` under strategy `name` led when the incident came, in the
/// simulator's order ([`FleetConfig::warm_leads`]): the share on the failed node, then the
/// others' from largest to smallest (runs differ in which broker a herd chose, not in its
/// size, so each run's survivors are sorted before the mean).
fn real_leads(files: &[FleetFile], name: &str, scenario: &str) -> Vec<f64> {
    let mut sum: Vec<f64> = Vec::new();
    let mut runs = 0.0_f64;
    for f in files {
        let Some(node) = (f.failed_node as usize).checked_sub(1) else { continue };
        for r in f.runs.iter().filter(|r| r.strategy == name && r.scenario == scenario) {
            let kept = &r.kept_before_per_broker;
            let total: usize = kept.iter().sum();
            if total == 0 || node >= kept.len() {
                continue;
            }
            let mut others: Vec<f64> =
                kept.iter().enumerate().filter(|&(b, _)| b != node).map(|(_, &k)| k as f64 / total as f64).collect();
            others.sort_by(|a, b| b.total_cmp(a));
            let shares: Vec<f64> = std::iter::once(kept[node] as f64 / total as f64).chain(others).collect();
            sum.resize(shares.len().max(sum.len()), 0.0);
            sum.iter_mut().zip(&shares).for_each(|(s, x)| *s += x);
            runs += 1.0;
        }
    }
    sum.iter().map(|s| s / runs.max(1.0)).collect()
}

/// Where the real runs of `scenario` under strategy `name` held spares when the incident came:
/// the share of the clients leading on a surviving broker holding one, and the share of those
/// leading on the failed node (`None` for files written before `spares_by_lead_before`).
fn real_spares_by_lead(files: &[FleetFile], name: &str, scenario: &str) -> Option<(f64, f64)> {
    let mut shares = Vec::new();
    for f in files {
        let node = (f.failed_node as usize).checked_sub(1)?;
        for r in f.runs.iter().filter(|r| r.strategy == name && r.scenario == scenario) {
            let by_lead = r.spares_by_lead_before.as_ref()?;
            let (mut others, mut led) = ((0, 0), (0, 0));
            for (b, (&spares, &kept)) in by_lead.iter().zip(&r.kept_before_per_broker).enumerate() {
                let side = if b == node { &mut led } else { &mut others };
                *side = (side.0 + spares, side.1 + kept);
            }
            let share = |(spares, kept): (usize, usize)| if kept == 0 { 0.0 } else { spares as f64 / kept as f64 };
            shares.push((share(others), share(led)));
        }
    }
    let n = shares.len() as f64;
    (!shares.is_empty()).then(|| {
        let sum = shares.iter().fold((0.0, 0.0), |a, s| (a.0 + s.0, a.1 + s.1));
        (sum.0 / n, sum.1 / n)
    })
}

/// The real runs' spares per client under strategy `name`, over every scenario's warm-up.
fn real_spares(files: &[FleetFile], name: &str) -> f64 {
    let v: Vec<f64> = files
        .iter()
        .flat_map(|f| f.runs.iter().filter(|r| r.strategy == name).map(|r| spares_held(r, f.clients)))
        .collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// One fit's simulated fleet under one strategy.
struct Simulated {
    /// Each of `SCENARIOS`, run on a copy of the warm fleet.
    scenarios: Vec<ScenarioResult>,
    /// Spare connections each client held when each scenario's incident came, on average.
    spares_per_client: Vec<f64>,
}

fn header(md: &mut String, groups: &[(String, Vec<FleetFile>)]) {
    let first = &groups[0].1[0];
    let _ = writeln!(md, "# The fleet model against a real cluster\n");
    let _ = writeln!(
        md,
        "{} real `stagger_tokio::Client`s in one process against a real {}-broker Apache Kafka {} cluster on loopback \
         (machine: {}), and the fleet simulator (`stagger_sim::fleet`) at the same scale with its prices fitted to what \
         that cluster charged. Listeners: {}. Generated by `lab/src/bin/fleet_fit.rs` from `fleet_real`'s JSON; \
         reproduce with the commands in its module doc (each real run starts and stops its own cluster).\n",
        first.clients,
        first.brokers,
        first.kafka_version,
        first.machine,
        groups.iter().map(|(l, f)| format!("{l} ({} runs)", f.len())).collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(
        md,
        "What the simulator charges (`sim/src/fleet/mod.rs`): a Metadata request `service_time` (exponential), an \
         ApiVersions request `api_versions_time`, an accepted connection `accept_time`, over TLS a handshake of one round \
         trip and `tls_time`, over SASL SCRAM three more round trips and `sasl_time`, all in the broker's one queue (the pipelined fit adds a latency per request, `latency`, which does not hold it), \
         and a share of Metadata answers delayed by a pause of the machine (`host_delay`: the calm real runs' refreshes \
         slower than twice their median, and their mean time above it), which holds no queue. While a broker is hung, \
         every one of these prices is multiplied by `hung_slowdown` (*others while one hangs*): the real one-hung runs' \
         refreshes that needed one attempt (their lead was not the stopped node) over the same strategy's healthy \
         ones, at the quantile where the one-hung run's median falls, fitted from the very runs the one-hung tables compare, so those tables check the rest of the model \
         (the hedged clients, the tail) more than its median. \
         The machine fit models the lab itself, where the brokers' threads and those of the process running all \
         clients and the forwarders share the machine's cores (`shared_cores`, taken in slices, the thread that has \
         run least first): a broker's work is its request path's CPU per request in the saturated loops (its network \
         threads' and request handlers', where the runs read the JVM's threads apart; else the whole process's), \
         and what the rest of its process spent per piece of that work in the same loops (`broker_background`: the \
         JIT compiler, the collector) takes turns on the cores without holding any queue; its accept, TLS, SASL and \
         request reads run on its network threads beside its request thread (`network_threads`), in poll \
         iterations that hand the requests they read on when they end, as Kafka's selector loop does; and the clients' \
         own work (`client_work`: per message on the runtime's worker threads, per request relayed on the \
         forwarders' thread, and each client's one SCRAM key derivation) is what the real storms and loops cost the \
         process in CPU time, an input, while the tables compare times. \
         Real counts: time to metadata from `Client::refresh_because` to its return; attempts from `Client::stats`; \
         connections accepted by the counting forwarders; ApiVersions and Metadata from the forwarders over PLAINTEXT \
         and from the brokers' request log over SASL_SSL (where the pre-authentication ApiVersions is not counted: —; \
         the log counts a request once the broker has read it, and so does the model there, `count_reads`). \
         *Warm spares / client* is the warm fleet's state before the incident, not a compared metric: the connections \
         a client held beside its lead (`ClientStats::kept_connections` − 1; in runs written before that was counted, \
         the warm-up's `ClientStats::spares_kept`), which a storm's refresh reuses instead of opening a new connection. \
         The model's own warm-up keeps none and spreads leads by seed rotation, where a real SASL_SSL cold start \
         herds leads onto the broker whose TLS handshakes finished first and keeps spares beside them. So each \
         scenario's simulated fleet starts from the real runs' state under its strategy: the share of clients \
         leading on each broker (the failed node's, then the others' from largest, `FleetConfig::warm_leads`), and \
         the share holding a spare among those leading on the failed node and among the others \
         (`FleetConfig::warm_spares_failing`, `FleetConfig::warm_spares`; the real `spares_by_lead_before`); \
         the tables compare what the incident does from the same state. \
         Factors are simulated ÷ real; the bounds are ×{BOUND_TIME} on p50 and p99 and ×{BOUND_COUNT} on the counts.\n"
    );
}

/// Per fit: the typical factor per metric over every cell, for the verdict.
struct Summary {
    listener: String,
    fits: Vec<(String, [Option<f64>; 7], Vec<String>)>,
    /// Per fit, the scenarios whose own typical factors are outside the bounds.
    scenarios_off: Vec<Vec<String>>,
}

fn section(
    md: &mut String,
    listener: &str,
    files: &[FleetFile],
    fits: &[Fit],
    results: &[Vec<Simulated>],
    strategies: &[String],
) -> Summary {
    let _ = writeln!(md, "## {}\n", listener.to_uppercase());
    let _ = writeln!(md, "### Fitted prices\n");
    let _ = writeln!(
        md,
        "| fit | rtt | Metadata | ApiVersions | accept | TLS | SASL | host pauses | others while one hangs | how |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for f in fits {
        let c = &f.config;
        let us = |d: Duration| format!("{} µs", d.as_micros());
        // Work, and the latency beside it when the fit has one.
        let priced = |work: Duration, latency: Duration| {
            if latency.is_zero() {
                us(work)
            } else {
                format!("{} + {} latency", us(work), us(latency))
            }
        };
        let l = &c.latency;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | ×{:.2} | {} |",
            f.name,
            us(c.rtt),
            priced(c.service_time, l.metadata),
            priced(c.api_versions_time, l.api_versions),
            us(c.accept_time),
            c.security.tls_time.map_or("—".into(), |t| priced(t, l.tls)),
            if c.security.sasl_round_trips > 0 {
                format!("{} RTT + {}", c.security.sasl_round_trips, priced(c.security.sasl_time, l.sasl))
            } else {
                "—".into()
            },
            match c.host_delay {
                h if h.share > 0.0 => format!("{:.1} % of answers, mean {}", h.share * 100.0, us(h.mean)),
                _ => "—".into(),
            },
            c.hung_slowdown,
            f.how
        );
    }
    let _ = writeln!(md);
    // ratios[fit][metric] over every cell; real noise the same way.
    let mut cells: Vec<[Vec<f64>; 7]> = fits.iter().map(|_| Default::default()).collect();
    // The same per scenario: by_scenario[fit][scenario][metric].
    let mut by_scenario: Vec<Vec<[Vec<f64>; 7]>> =
        fits.iter().map(|_| SCENARIOS.iter().map(|_| Default::default()).collect()).collect();
    let mut noise: [Vec<f64>; 7] = Default::default();
    let mut worst: Vec<Vec<String>> = fits.iter().map(|_| Vec::new()).collect();
    for (si, &scenario) in SCENARIOS.iter().enumerate() {
        let _ = writeln!(md, "### {}\n", scenario.title());
        let _ = writeln!(
            md,
            "| strategy | source | p50 | p99 | attempts | connections | ApiVersions | Metadata | peak / 100 ms | warm spares / client | gave up | factors (p50, p99, attempts, connections, ApiVersions, Metadata, peak) |"
        );
        let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        for (k, name) in strategies.iter().enumerate() {
            // Every turn of every file: a run that alternates strategies (`--strategies
            // sequential,long-lived,sequential,long-lived`) measures each one several times.
            let reals: Vec<Row> = files
                .iter()
                .enumerate()
                .flat_map(|(n, f)| {
                    let turns: Vec<&Run> =
                        f.runs.iter().filter(|r| r.scenario == scenario.name() && r.strategy == *name).collect();
                    let many = turns.len() > 1;
                    turns.into_iter().enumerate().map(move |(t, r)| {
                        let label = if many { format!("{}.{}", n + 1, t + 1) } else { format!("{}", n + 1) };
                        Row::real(&label, r, f.clients)
                    })
                })
                .collect();
            let mean = mean_row(&reals);
            let mut line = |row: &Row, factors: Option<[Option<f64>; 7]>| {
                let _ = writeln!(
                    md,
                    "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    row.source,
                    fmt_ms(row.p50_ms),
                    fmt_ms(row.p99_ms),
                    fmt_count(row.attempts),
                    fmt_count(row.connections),
                    fmt_count(row.api_versions),
                    fmt_count(row.requests),
                    fmt_count(row.peak),
                    fmt_count(Some(row.spares)),
                    row.failed,
                    factors.map_or(String::new(), |f| f.iter().map(|x| fmt_ratio(*x)).collect::<Vec<_>>().join(" · "))
                );
            };
            if reals.len() > 1 {
                for r in &reals {
                    let f = mean.as_ref().map(|m| ratios(r, m));
                    if let Some(f) = f {
                        for (m, x) in f.iter().enumerate() {
                            noise[m].extend(x);
                        }
                    }
                    line(r, f);
                }
            }
            if let Some(m) = &mean {
                line(m, None);
            }
            for (fi, f) in fits.iter().enumerate() {
                let simulated = &results[fi][k];
                let row = Row::sim(&f.name, &simulated.scenarios[si], simulated.spares_per_client[si]);
                let factors = mean.as_ref().map(|m| ratios(&row, m));
                if let Some(factors) = factors {
                    for (m, x) in factors.iter().enumerate() {
                        cells[fi][m].extend(x);
                        by_scenario[fi][si][m].extend(x);
                        if let Some(x) = x.filter(|x| x.ln().abs() > METRICS[m].1.ln()) {
                            worst[fi].push(format!("{} {name} {} ×{x:.2}", scenario.name(), METRICS[m].0));
                        }
                    }
                }
                line(&row, factors);
            }
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md, "### How far off, typically\n");
    let _ = writeln!(md, "`exp(mean |ln(sim ÷ real)|)` over every cell above; the real runs' row is their spread around their mean (this machine's noise).\n");
    let _ = writeln!(md, "| fit | {} |", METRICS.map(|m| m.0).join(" | "));
    let _ = writeln!(md, "|---|{}", "---:|".repeat(METRICS.len()));
    let mut out = Summary { listener: listener.into(), fits: Vec::new(), scenarios_off: Vec::new() };
    let fmt_typ = |t: Option<f64>| t.map_or("—".into(), |t| format!("×{t:.2}"));
    for (fi, f) in fits.iter().enumerate() {
        let t: [Option<f64>; 7] = core::array::from_fn(|m| typical(&cells[fi][m]));
        let _ = writeln!(md, "| {} | {} |", f.name, t.map(fmt_typ).join(" | "));
        out.fits.push((f.name.clone(), t, worst[fi].clone()));
    }
    if noise.iter().any(|n| !n.is_empty()) {
        let t: [Option<f64>; 7] = core::array::from_fn(|m| typical(&noise[m]));
        let _ = writeln!(md, "| real runs (noise) | {} |", t.map(fmt_typ).join(" | "));
    }
    let _ = writeln!(md, "\nThe same per scenario (the bounds hold a fit only if they hold in every scenario):\n");
    let _ = writeln!(md, "| fit | scenario | {} |", METRICS.map(|m| m.0).join(" | "));
    let _ = writeln!(md, "|---|---|{}", "---:|".repeat(METRICS.len()));
    for (fi, f) in fits.iter().enumerate() {
        let mut off = Vec::new();
        for (si, scenario) in SCENARIOS.iter().enumerate() {
            let t: [Option<f64>; 7] = core::array::from_fn(|m| typical(&by_scenario[fi][si][m]));
            let _ = writeln!(md, "| {} | {} | {} |", f.name, scenario.name(), t.map(fmt_typ).join(" | "));
            if METRICS.iter().zip(&t).any(|((_, bound), t)| t.is_some_and(|t| t > *bound)) {
                off.push(scenario.name().to_string());
            }
        }
        out.scenarios_off.push(off);
    }
    let _ = writeln!(md);
    out
}

/// A real fleet's cold start beside the model's: the connections per client its first
/// refreshes opened (`fleet_real`'s `cold_start_connections`: from the warm-up's start until a
/// second after the last client's first refresh began) against all the connections the
/// simulated warm-up of the same fleet opened from the same cold state, under each fit of the
/// listener. Neither model nor fit is tuned to these runs: they check what the fits, made from
/// the other runs, say of a moment the fit never saw.
fn cold_start_section(md: &mut String, listener_fits: &[(String, Vec<Fit>)], files: &[FleetFile]) {
    let _ = writeln!(md, "## The cold start\n");
    let _ = writeln!(
        md,
        "Connections per client that a fleet of {} clients opened while it bootstrapped, real (the mean \
         over each scenario's fleet, and the range) against the simulated warm-up of the same fleet from \
         the same cold state under each fit (`fleet_fit --cold-start PATH`). The simulated count is of the \
         whole warm-up, the real one of its first two seconds; calm refreshes after a bootstrap open \
         almost none in either. Beside them, how long the bootstraps took: real (the range of the \
         fleets' p50 and p99, where recorded) and, for a strategy that shuffles its seeds, the model's \
         cold start with the clients asking within the same second.\n",
        files.first().map_or(0, |f| f.clients)
    );
    let _ = writeln!(
        md,
        "| listener | strategy | real fleets | real | real range | real bootstrap p50, p99 | model (factor) |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---|---|---|");
    for (listener, fits) in listener_fits {
        let of_listener: Vec<&FleetFile> = files.iter().filter(|f| &f.listener == listener).collect();
        let mut names: Vec<&str> = Vec::new();
        for r in of_listener.iter().flat_map(|f| &f.runs).filter(|r| r.cold_start_connections.is_some()) {
            if !names.contains(&r.strategy.as_str()) {
                names.push(&r.strategy);
            }
        }
        for name in names {
            let Ok(strategy) = strategy(name) else { continue };
            let real: Vec<f64> = of_listener
                .iter()
                .flat_map(|f| {
                    let clients = f.clients.max(1) as f64;
                    let runs = f.runs.iter().filter(|r| r.strategy == name);
                    runs.filter_map(move |r| r.cold_start_connections.map(|c| c as f64 / clients))
                })
                .collect();
            let mean = real.iter().sum::<f64>() / real.len().max(1) as f64;
            let (lo, hi) = real.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
            let times: Vec<[f64; 2]> = of_listener
                .iter()
                .flat_map(|f| f.runs.iter().filter(|r| r.strategy == name).filter_map(|r| r.bootstrap_ms))
                .collect();
            let range = |i: usize| {
                let (lo, hi) = times.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), t| (lo.min(t[i]), hi.max(t[i])));
                format!("{lo:.0}–{hi:.0} ms")
            };
            let bootstrap = if times.is_empty() { "—".to_string() } else { format!("{}, {}", range(0), range(1)) };
            let model: Vec<String> = fits
                .iter()
                .map(|fit| {
                    let warm = WarmFleet::new(&fit.config, &strategy);
                    let opened: u64 = warm.clusters().flatten().map(|c| c.stats().connections_opened).sum();
                    let per_client = opened as f64 / fit.config.clients.max(1) as f64;
                    // The bootstraps alone: every client cold, asking within the warm-up's
                    // spacing, as the real fleet's first refreshes do. The model's cold start
                    // gives every client the seeds in one order, so only a strategy that
                    // shuffles them starts as the real fleet's clients do.
                    let shuffles = matches!(&strategy, Strategy::Core { cluster, .. } if cluster.refresh.shuffle_seeds);
                    let boot = shuffles.then(|| {
                        let cold = FleetConfig { storm_window: fit.config.warmup_spacing, ..fit.config.clone() };
                        let t = WarmFleet::new(&cold, &strategy).run(FleetScenario::ColdStart).time_to_metadata;
                        format!("; bootstrap {}, {}", fmt_ms(t.p50_ms), fmt_ms(t.p99_ms))
                    });
                    format!(
                        "{} {per_client:.2} (×{:.2}{})",
                        fit.name,
                        per_client / mean.max(f64::MIN_POSITIVE),
                        boot.unwrap_or_default()
                    )
                })
                .collect();
            let _ = writeln!(
                md,
                "| {} | {name} | {} | {mean:.2} | {lo:.2}–{hi:.2} | {bootstrap} | {} |",
                listener.to_uppercase(),
                real.len(),
                model.join(" · ")
            );
        }
    }
    let _ = writeln!(md);
}

fn verdict(md: &mut String, summaries: &[Summary]) {
    let _ = writeln!(md, "## Within the bounds?\n");
    for s in summaries {
        for ((name, typical, worst), scenarios_off) in s.fits.iter().zip(&s.scenarios_off) {
            let off: Vec<String> = METRICS
                .iter()
                .zip(typical)
                .filter_map(|((m, bound), t)| t.filter(|t| t > bound).map(|t| format!("{m} ×{t:.2}")))
                .collect();
            let _ = writeln!(
                md,
                "* **{} {}:** {}{}",
                s.listener.to_uppercase(),
                name,
                match (off.is_empty(), scenarios_off.is_empty()) {
                    (true, true) => "typical factors within the bounds, in every scenario".to_string(),
                    (true, false) =>
                        format!("typical factors within the bounds, but not in {}", scenarios_off.join(", ")),
                    (false, _) => format!("typically off in {}", off.join(", ")),
                },
                if worst.is_empty() { String::new() } else { format!("; cells outside: {}", worst.join("; ")) }
            );
        }
    }
    let _ = writeln!(md);
}

#[cfg(test)]
mod tests {
    use super::{hung_slowdown, least_squares, FleetFile, RefreshEntry, Run};

    #[test]
    fn hung_slowdown_compares_at_the_quantile_of_the_runs_median() {
        let run = |scenario: &str, times: Vec<(u64, u64)>| Run {
            scenario: scenario.into(),
            strategy: "sequential".into(),
            refresh_list: times.iter().enumerate().map(|(i, &(t, a))| RefreshEntry(i, 0, Some(t), a)).collect(),
            ..Run::default()
        };
        // Calm: 300 refreshes of 1000..1299 µs.
        let calm = run("healthy", (0..300).map(|i| (1_000 + i, 1)).collect());
        // One hung: 200 one-attempt refreshes, half near 1.1 ms and half near 3 ms, and 100
        // hedged ones far slower. The run's median is the one-attempt refreshes' 75th
        // percentile (3050 µs), compared with the calm run's (1225 µs).
        let mut hung: Vec<(u64, u64)> = (0..100).map(|i| (1_100 + i, 1)).collect();
        hung.extend((0..100).map(|i| (3_000 + i, 1)));
        hung.extend((0..100).map(|_| (50_000, 2)));
        let file = FleetFile { runs: vec![calm, run("one_hung", hung)], ..FleetFile::default() };
        let factor = hung_slowdown(&[file]);
        assert!((factor - 3_050.0 / 1_225.0).abs() < 1e-9, "{factor}");
        // Never below 1; no one-hung run, no slowdown.
        assert_eq!(hung_slowdown(&[FleetFile::default()]), 1.0);
    }

    #[test]
    fn least_squares_splits_two_prices_when_the_second_count_varies() {
        // CPU = 40 per message + 400 per handshake, exactly.
        let rows: Vec<(f64, f64, f64)> =
            [(1000.0, 5.0), (1400.0, 100.0), (990.0, 3.0)].iter().map(|&(m, t)| (40.0 * m + 400.0 * t, m, t)).collect();
        let (m, t) = least_squares(&rows).unwrap();
        assert!((m - 40.0).abs() < 1e-6 && (t - 400.0).abs() < 1e-6, "{m} {t}");
    }

    #[test]
    fn least_squares_charges_messages_alone_when_the_second_count_cannot_be_told_apart() {
        // No handshakes (PLAINTEXT): one price, through the origin.
        let rows = [(4000.0, 100.0, 0.0), (9000.0, 200.0, 0.0)];
        assert_eq!(least_squares(&rows), Some((44.0, 0.0)));
        // A fit that would need a negative handshake price falls back to the one price.
        let rows = [(1000.0, 10.0, 0.0), (900.0, 10.0, 5.0)];
        assert_eq!(least_squares(&rows), Some((95.0, 0.0)));
        assert_eq!(least_squares(&[]), None);
    }
}
