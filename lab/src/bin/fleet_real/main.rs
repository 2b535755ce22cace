//! The fleet model checked against reality: a few hundred real [`stagger_tokio::Client`]s on a
//! real 3-broker Apache Kafka cluster, with a broker hung or killed under them.
//!
//! Starts a Kafka 4.4 KRaft cluster (`scripts/kafka.sh`, through `stagger-kafka-fixture`)
//! whose brokers advertise, for PLAINTEXT, the addresses of counting forwarders this process
//! runs on 127.0.0.1 (one per broker, see `lab/src/bin/fleet_real/forwarder.rs`): clients bootstrap from
//! the forwarders and learn the forwarders from metadata, so every request of the fleet
//! passes one and is counted — Metadata (api key 3) and ApiVersions (18) per broker, with the
//! time each took the broker, and the connections accepted. (Inter-broker replication also
//! runs over that listener; it is told apart by its client id and not counted.) That is the
//! default, `--listener plaintext`; `--listener sasl_ssl` runs the same over TLS and SASL
//! (see [below](#over-tls-and-sasl---listener-sasl_ssl)).
//!
//! Then:
//!
//! 1. **Calibration** (`lab/src/bin/fleet_real/calibrate.rs`): the loopback round trip, what a forwarder
//!    adds, each broker's time per ApiVersions and Metadata request at rest, and the answers
//!    per second of saturated brokers (alone, two at once, all three) — the simulator's
//!    `rtt`, `service_time` and its ApiVersions/Metadata cost ratio, measured.
//! 2. **Scenarios**, mirroring `stagger_sim::fleet`, for each strategy (`adaptive`, the
//!    default, and `sequential`): N fresh clients (default 300), each with the three brokers
//!    as seeds, listed in rotation (a strategy that shuffles its seeds, as `long-lived` and
//!    `sequential-shuffled` do, draws its own order from the client's seed), warm up with
//!    calm refreshes (the simulator's `warmup_for` count at the same spacing); then
//!    * `healthy`: every client refreshes once at a random time within the window (10 s);
//!    * `one_hung`: node 2 is stopped (`SIGSTOP`: connections are accepted, nothing answers)
//!      and every client refreshes within the window; `SIGCONT` afterwards;
//!    * `failover_storm`: node 2 is restarted (so every strategy's storm starts from the same
//!      cluster), the clients warm up, node 2 is killed (`SIGKILL`) and its forwarder closes
//!      its listener and connections (refused, as a dead broker's address is), then every
//!      client refreshes within 10 ms; the node is restarted afterwards;
//!    * `storm_hung_survivor`: the same storm with the next node (node 3) stopped (`SIGSTOP`)
//!      just before node 2 is killed, so a survivor the clients reconnect to, or keep a connection to,
//!      accepts and never answers: what a strategy pays past a silent connected broker in a
//!      storm (the choice a throttling broker also poses); `SIGCONT` afterwards.
//!
//!    Each refresh's time to metadata (the call to `Client::refresh` until it returns), its
//!    attempts (`Client::stats`), the Metadata requests per refresh and the peak Metadata
//!    requests one broker received within 100 ms (sliding, as the simulator counts; fixed
//!    100 ms buckets are recorded too). Beside the counts, what the refreshes cost each
//!    broker's process in CPU time, in all and within its busiest 100 ms (`/proc`, read every
//!    10 ms: `lab/src/bin/fleet_real/broker_cpu.rs`): a request on a kept connection and a new
//!    TLS and SASL connection count as one request each, and cost the broker very differently.
//!    And what they cost this process, which runs every client and forwarder on the same
//!    cores (`client_cpu_ms`, the kernel's CPU clock for the process): the fleet model's
//!    machine fit charges it to the clients.
//!
//! Writes everything (every refresh's time, every broker's requests per 100 ms, the
//! calibration and the fitted simulator parameters) as JSON (`stagger_lab::fleet_file`) to
//! `--out` (default `target/fleet-real.json` under `CARGO_TARGET_DIR`, or
//! `/tmp/fleet-real.json`), which
//! `cargo run --release -p stagger-lab --bin fleet_fit -- --real PATH...` reads to run the
//! simulator with the same fleet and the fitted times. About 6 minutes with the defaults
//! (cluster start ~1 min, calibration ~1 min, six runs); the cluster is stopped at the end,
//! and by its watchdog if this process dies. Two runs show the machine's run-to-run noise:
//!
//! ```text
//! for i in 1 2; do cargo run --release -p stagger-lab --bin fleet_real -- --out /tmp/fleet-real-$i.json; done
//! ```
//!
//! Options: `--clients N` (300), `--warmup N` (16 calm refreshes per client of a strategy
//! that starts one attempt at a time, at most 2 for one that starts several, as in the
//! simulator), `--warmup-spacing-ms X` (1000),
//! `--window-ms X` (10000), `--storm-ms X` (10), `--settle-ms X` (2000), `--seed N` (1),
//! `--reseed-turns` (each entry of `--strategies` draws from a seed of its own: where the
//! clients' shuffled seeds put their leads and where the dead broker's clients reconnect,
//! which with one seed is the same draw in every turn of a strategy),
//! `--strategies adaptive,sequential` (`long-lived` is a `Client`'s default; a
//! `-fast-start` suffix runs a strategy fast from its bootstrap, without
//! `ClusterConfig::gentle_until_calm`), `--scenarios healthy,one_hung,failover_storm`,
//! `--node N` (2: the broker hung or killed), `--no-causes` (the storm's refreshes do not
//! say why: plain `Client::refresh`), `--listener plaintext|sasl_ssl` (below), `--out PATH`,
//! `--show-attempts K` (print every attempt of each measured refresh that started K or more:
//! `Client::last_refresh`, to see where extra connections came from), `--no-practice-storm`
//! (skip the uncounted storm run before the measured ones: the first storm a cluster meets is
//! slower whichever strategy faces it), `--practice-each` (an uncounted storm of each strategy
//! right before its measured one instead: the brokers' JIT compilers then meet the strategy's
//! mix of requests before the measurement, where otherwise they may work during it), `--broker-property KEY=VALUE` (repeatable: a line for
//! every broker's `server.properties`, such as KIP-612's `max.connection.creation.rate=20`, to
//! run the fleet against brokers that throttle new connections), `--storm-connection-rate R`
//! (the same protection at `R` connections per second per broker, set through the cluster's
//! admin request just before each storm's kill and removed after it: `throttle.rs`),
//! `--gentle-bootstrap` (each client's first refresh says a failover is likely,
//! `refresh_because(StaleMetadata)`: a gentle bootstrap, to measure what it would cost and save),
//! `--broker-cpus LIST` (every broker runs on these CPUs only, `kafka.sh --cpus`; run this
//! process under `taskset -c` on the others, so that the clients and the brokers do not share
//! a core: the JSON records both lists).
//!
//! In the storm each client says why it refreshes, as a real one would know
//! (`Client::refresh_because`): a client whose kept connection was to the dead broker
//! `ConnectionLost` (naming it), every other `StaleMetadata` (its requests for the dead
//! broker's partitions answer NOT_LEADER). Both strategies are told the same.
//!
//! # Over TLS and SASL: `--listener sasl_ssl`
//!
//! ```text
//! cargo run --release -p stagger-lab --bin fleet_real -- \
//!     --listener sasl_ssl --out /tmp/fleet-real-sasl_ssl.json
//! ```
//!
//! About a minute longer than plaintext (the TLS and SASL calibration). The fleet's clients
//! speak TLS (trusting the cluster's CA) and SASL SCRAM-SHA-512 (the
//! fixture's user) to the brokers' SASL_SSL listeners, which advertise the forwarders
//! (`kafka.sh --advertise-sasl-ssl`); everything that connects for the fleet
//! (`wait_healthy` too) goes the same way. The default `--out` is then `fleet-real-sasl_ssl.json`
//! (beside the plaintext one, never over it), and the JSON says `"listener": "sasl_ssl"`.
//! What is counted where:
//!
//! * **The forwarders** relay the TLS bytes unread and count the connections accepted and,
//!   from the TLS records' clear headers, the handshakes per broker: ClientHellos the broker
//!   answered (`tls_handshakes_per_broker`: it did the key exchange), those established
//!   (`tls_established_per_broker`: it sent something after the client's Finished), and
//!   those it never answered (`tls_unanswered_per_broker`: a stopped broker's).
//! * **The brokers' request logs** (`kafka.sh --request-log`, read by
//!   `lab/src/bin/fleet_real/request_log.rs`) give the fleet's Metadata requests (client id
//!   `fleet-real`, listener SASL_SSL) per broker, each with the broker's own time
//!   (`totalTimeMs`: from reading it to sending its answer, without the network, where the
//!   plaintext forwarders time the round trip from them to the broker and back) and its
//!   arrival (the line's time minus that, on the forwarders' time base): so
//!   `requests_per_broker`, `requests_per_refresh`, `peak_requests`, `metadata_per_100ms` and
//!   `broker_metadata_time` mean what they do over plaintext. Kafka 4.4's request log has no
//!   line for what the SASL authenticator answers before a connection is authenticated: the
//!   ApiVersions, SaslHandshake and SaslAuthenticate of every fresh connection (checked on a
//!   real log: of a stagger exchange over SASL_SSL, correlation ids 1 to 4 — ApiVersions,
//!   SaslHandshake, SaslAuthenticate twice — have no line and its Metadata, id 5, has one;
//!   the Java client's second ApiVersions, sent after authenticating, is logged). So
//!   `api_versions_per_broker` is null; `api_versions_logged_per_broker` counts only the
//!   ApiVersions the log does show, those a kept connection sends before its Metadata
//!   (`Exchange::resumed`: after authentication, answered by the same request handler as
//!   over plaintext), not the one of each fresh connection, and `broker_api_versions_time`
//!   and `warmup_broker_api_versions_time` are the broker's times of those.
//!   `unanswered_requests_per_broker` is null too: a broker logs only what it answered, so a
//!   request on a kept connection to a stopped broker (its ApiVersions; the Metadata waits
//!   for the answer) leaves no line, where over plaintext the forwarder counts it — here
//!   only the attempt counts. A request whose connection closed before the broker had its
//!   answer ready is not logged either, so a cancelled loser's request may be missing.
//!   Logging every request costs the brokers work (at DEBUG Kafka turns each request and
//!   its answer into JSON), in the calibration as in the runs: the plaintext probes'
//!   saturated times come out higher than in a plaintext run (two small runs of each:
//!   Metadata 17 and 34 µs → 42 and 40 µs, ApiVersions, with its long answer, 47 and 49 µs →
//!   136 and 83 µs). The fleet's Metadata, and the ApiVersions of its kept connections, pay
//!   it in the runs too; its pre-authentication ApiVersions does not.
//! * **The calibration** (`lab/src/bin/fleet_real/secured.rs`) keeps every plaintext probe
//!   (raw frames to the brokers' PLAINTEXT ports, directly and through a second set of
//!   plaintext forwarders that nobody advertises: a broker's time per request does not depend
//!   on the listener) and adds, through the forwarders of both listeners, one-shot
//!   sequential refreshes on fresh connections: at rest, 200 per broker one at a time, timed
//!   by phase from the attempts' reports (TCP up, the first answer — over TLS the handshake
//!   done — and the Metadata answer); saturated, 16 closed loops per surviving broker of the
//!   storm over each listener, with the CPU time each broker process used per refresh. The
//!   `fit` object gets `tls_rest_us`, `sasl_rest_us`, `tls_round_trips`,
//!   `sasl_round_trips`, `connection_saturated_us` including TLS and SASL and
//!   `plaintext_connection_saturated_us`, the same measured over PLAINTEXT (see
//!   [`fit_secured`]).

mod broker_cpu;
mod calibrate;
mod forwarder;
mod request_log;
mod secured;
mod throttle;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use stagger::kafka::sasl::{Sasl, Secret};
use stagger::report::{AttemptOutcome, AttemptReport};
use stagger::{ClusterConfig, RefreshCause, RefreshConfig, Rng};
use stagger_kafka_fixture::{free_base_port, KafkaCluster, Options, SASL_PASSWORD, SASL_USERNAME};
use stagger_lab::fleet_file::{
    Calibration, FirstChoiceCounts, Fit, FleetFile, Fresh, Idle, RefreshDetail, RefreshEntry, Run, SecuredCalibration,
    SecuredCounts, SecuredFit, Spread, WinnerTimes,
};
use stagger_tokio::{Client, ClientOptions, ExchangeConfig, RefreshOptions, TlsOptions};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

use calibrate::Frames;
use forwarder::{Forwarder, Framing, Log, API_VERSIONS, METADATA};
use request_log::RequestLog;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The fleet's client id: how the forwarders tell its requests from the brokers' own.
const CLIENT_ID: &str = "fleet-real";
/// The calibration's client id (its requests are not the fleet's).
const PROBE_ID: &str = "fleet-probe";
const BROKERS: usize = 3;
/// Periodic refreshes pushed a day away, as in the simulator: only the scenario refreshes.
const REFRESH_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// How long the cold start is read for after the last client's first refresh began
/// (`Run::cold_start_broker_threads_cpu_ms`): a SASL_SSL bootstrap on this machine takes
/// tens of milliseconds, hundreds at worst.
const COLD_START_TAIL: Duration = Duration::from_millis(1_000);

/// A refresh still running after this long counts as given up.
const GIVE_UP: Duration = Duration::from_secs(90);
/// The window of the peak count.
const PEAK_WINDOW_US: u64 = 100_000;
/// Requests still answered after the last refresh returned are counted for this long.
const GRACE: Duration = Duration::from_millis(500);

/// The listener the fleet connects through.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Listener {
    Plaintext,
    /// TLS, then SASL SCRAM-SHA-512.
    SaslSsl,
}

impl Listener {
    fn name(self) -> &'static str {
        match self {
            Listener::Plaintext => "plaintext",
            Listener::SaslSsl => "sasl_ssl",
        }
    }

    /// Kafka's name of the listener (what the request log says).
    fn kafka_name(self) -> &'static str {
        match self {
            Listener::Plaintext => "PLAINTEXT",
            Listener::SaslSsl => "SASL_SSL",
        }
    }

    fn parse(s: &str) -> Res<Listener> {
        match s {
            "plaintext" => Ok(Listener::Plaintext),
            "sasl_ssl" => Ok(Listener::SaslSsl),
            other => Err(format!("unknown listener {other:?} (plaintext, sasl_ssl)").into()),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Scenario {
    Healthy,
    OneHung,
    FailoverStorm,
    StormHungSurvivor,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Healthy => "healthy",
            Scenario::OneHung => "one_hung",
            Scenario::FailoverStorm => "failover_storm",
            Scenario::StormHungSurvivor => "storm_hung_survivor",
        }
    }

    /// A node is killed and every client refreshes within the storm window.
    fn is_storm(self) -> bool {
        matches!(self, Scenario::FailoverStorm | Scenario::StormHungSurvivor)
    }

    const ALL: [Scenario; 4] =
        [Scenario::Healthy, Scenario::OneHung, Scenario::FailoverStorm, Scenario::StormHungSurvivor];

    fn parse(s: &str) -> Res<Scenario> {
        Scenario::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            let known: Vec<&str> = Scenario::ALL.iter().map(|k| k.name()).collect();
            format!("unknown scenario {s:?} ({})", known.join(", ")).into()
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
    /// Each turn (each entry of `--strategies`) draws from a seed of its own.
    reseed_turns: bool,
    strategies: Vec<String>,
    scenarios: Vec<Scenario>,
    node: u32,
    /// Whether the storm's refreshes say why (`Client::refresh_because`).
    causes: bool,
    /// Whether each client's bootstrap says a failover is likely (`--gentle-bootstrap`).
    gentle_bootstrap: bool,
    /// Print the attempts of measured refreshes that started at least this many.
    show_attempts: Option<u64>,
    /// Run one uncounted storm before the measured ones.
    practice_storm: bool,
    /// Run an uncounted storm of each strategy right before its measured one
    /// (`--practice-each`): the brokers' JIT compilers then meet the strategy's mix of
    /// requests before the measurement, not during it.
    practice_each: bool,
    listener: Listener,
    /// `KEY=VALUE` lines for every broker's `server.properties` (`--broker-property`).
    broker_properties: Vec<String>,
    /// KIP-612's connection creation rate set on every broker while each storm runs
    /// (`--storm-connection-rate`, [`throttle`]).
    storm_connection_rate: Option<f64>,
    /// The CPUs every broker runs on (`--broker-cpus`, `kafka.sh --cpus`).
    broker_cpus: Option<String>,
    out: PathBuf,
}

/// The CPUs this process may run on (`Cpus_allowed_list` in `/proc/self/status`), when
/// fewer than the machine has: a run under `taskset`.
fn client_cpus() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim().to_owned();
    let machine = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    (list != machine.trim()).then_some(list)
}

/// `fleet-real.json` for plaintext, `fleet-real-sasl_ssl.json` otherwise (never over the
/// plaintext one), under `CARGO_TARGET_DIR` or `/tmp`.
fn default_out(listener: Listener) -> PathBuf {
    let name = match listener {
        Listener::Plaintext => "fleet-real.json".to_owned(),
        other => format!("fleet-real-{}.json", other.name()),
    };
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir).join(name),
        None => PathBuf::from("/tmp").join(name),
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
        reseed_turns: false,
        strategies: vec!["adaptive".into(), "sequential".into()],
        scenarios: vec![Scenario::Healthy, Scenario::OneHung, Scenario::FailoverStorm],
        node: 2,
        causes: true,
        gentle_bootstrap: false,
        show_attempts: None,
        practice_storm: true,
        practice_each: false,
        listener: Listener::Plaintext,
        broker_properties: Vec::new(),
        storm_connection_rate: None,
        broker_cpus: None,
        out: PathBuf::new(),
    };
    let mut out = None;
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
            "--reseed-turns" => args.reseed_turns = true,
            "--strategies" => args.strategies = value()?.split(',').map(str::to_owned).collect(),
            "--scenarios" => args.scenarios = value()?.split(',').map(Scenario::parse).collect::<Res<_>>()?,
            "--node" => args.node = value()?.parse()?,
            "--listener" => args.listener = Listener::parse(&value()?)?,
            "--out" => out = Some(PathBuf::from(value()?)),
            "--no-causes" => args.causes = false,
            "--gentle-bootstrap" => args.gentle_bootstrap = true,
            "--show-attempts" => args.show_attempts = Some(value()?.parse()?),
            "--no-practice-storm" => args.practice_storm = false,
            "--practice-each" => args.practice_each = true,
            "--broker-property" => args.broker_properties.push(value()?),
            "--broker-cpus" => args.broker_cpus = Some(value()?),
            "--storm-connection-rate" => {
                let rate: f64 = value()?.parse()?;
                if !(rate > 0.0 && rate.is_finite()) {
                    return Err(format!("--storm-connection-rate: {rate} is not a positive rate").into());
                }
                args.storm_connection_rate = Some(rate);
            }
            "-h" | "--help" => {
                println!(
                    "usage: fleet_real [--clients N] [--warmup N] [--warmup-spacing-ms X] [--window-ms X] \
                     [--storm-ms X] [--settle-ms X] [--seed N] [--reseed-turns] [--strategies a,b] [--scenarios a,b] [--node N] [--no-causes] \
                     [--listener plaintext|sasl_ssl] [--out PATH] [--show-attempts K] [--no-practice-storm] [--practice-each] \
                     [--broker-property KEY=VALUE]... [--storm-connection-rate R] [--broker-cpus LIST]"
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
    args.out = out.unwrap_or_else(|| default_out(args.listener));
    Ok(args)
}

/// The cluster view a strategy runs, as the simulator's `Strategy::core` builds it;
/// `<strategy>-fast-start` is that strategy fast from its bootstrap
/// (`ClusterConfig::gentle_until_calm` off, the build before it).
fn strategy(name: &str) -> Res<ClusterConfig> {
    if let Some(base) = name.strip_suffix("-fast-start") {
        return Ok(ClusterConfig { gentle_until_calm: false, ..strategy(base)? });
    }
    // Every name but `long-lived*` and `sequential-shuffled` hands the seeds out in rotation,
    // asked in that order (`listed`).
    let listed = |refresh: RefreshConfig| RefreshConfig { shuffle_seeds: false, ..refresh };
    let refresh = match name {
        "adaptive" => listed(RefreshConfig::adaptive()),
        "sequential" => listed(RefreshConfig::sequential()),
        // The naive client as librdkafka, franz-go, Sarama and the Java client place it:
        // seeds shuffled per client, not handed out in rotation.
        "sequential-shuffled" => RefreshConfig { shuffle_seeds: true, ..RefreshConfig::sequential() },
        "staggered-500ms" => listed(RefreshConfig::staggered()),
        // The default with one fan-out rule off, to measure what it earns (rule-costs.md).
        other if other.starts_with("adaptive-without-") => {
            let mut refresh = listed(RefreshConfig::adaptive());
            refresh.set(&format!("fanout.tuning.{}", &other["adaptive-without-".len()..]), "false")?;
            refresh
        }
        // The default with one fan-out rule on that a one-shot refresh leaves off.
        other if other.starts_with("adaptive-with-") => {
            let mut refresh = listed(RefreshConfig::adaptive());
            refresh.set(&format!("fanout.tuning.{}", &other["adaptive-with-".len()..]), "true")?;
            refresh
        }
        // What a `Client` runs by default (`ClusterConfig::default()`: seeds shuffled), or
        // that with one fan-out rule off.
        other if other == "long-lived" || other.starts_with("long-lived-without-") => {
            let mut refresh = RefreshConfig { shuffle_seeds: true, ..RefreshConfig::adaptive() };
            if let Some(switch) = other.strip_prefix("long-lived-without-") {
                refresh.set(&format!("fanout.tuning.{switch}"), "false")?;
            }
            refresh
        }
        other => {
            let known = "adaptive, sequential, sequential-shuffled, staggered-500ms, adaptive-with[out]-<fanout.tuning switch>, long-lived[-without-<switch>], <any>-fast-start";
            return Err(format!("unknown strategy {other:?} ({known})").into());
        }
    };
    Ok(ClusterConfig { refresh, refresh_interval: REFRESH_INTERVAL, ..ClusterConfig::default() })
}

/// What a warm-up refresh that moved a client's lead did, as a key to count by: how many
/// attempts it started, how the attempt on the lead it left ended (or that it did not try
/// that broker), how the winner reached its broker (a kept connection or a new one), and
/// whether the lead left was the broker the bootstrap left it on.
fn warmup_move(attempts: &[AttemptReport], left: Option<&str>, first_lead: &Option<String>) -> String {
    let on_left = attempts.iter().find(|a| Some(a.broker.as_str()) == left);
    let left_how = match on_left {
        None => "not tried".to_string(),
        Some(a) => match &a.outcome {
            AttemptOutcome::Cancelled(reason) => format!("cancelled {}", reason.name()),
            AttemptOutcome::Failed(e) => format!("failed {}", e.kind.name()),
            other => other.name().to_string(),
        },
    };
    let winner = match attempts.iter().find(|a| a.outcome == AttemptOutcome::Won) {
        Some(a) if a.reused_connection => "won on a kept connection",
        Some(_) => "won on a new connection",
        None => "no winner",
    };
    let home = if left == first_lead.as_deref() { "left home" } else { "left elsewhere" };
    format!("{} tried: lead {left_how}, {winner}, {home}", attempts.len())
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
    /// The forwarders the brokers advertise for the run's listener: the fleet's path.
    forwarders: Vec<Forwarder>,
    /// For `sasl_ssl`: forwarders to the brokers' PLAINTEXT listeners, advertised by nobody,
    /// for the calibration's plaintext probes (for `plaintext`, `forwarders` serve).
    plain_forwarders: Vec<Forwarder>,
    /// For `sasl_ssl`: every broker's request log, where the fleet's requests are counted.
    request_logs: Option<Mutex<Vec<RequestLog>>>,
    /// The brokers' own PLAINTEXT addresses (the plaintext forwarders' targets).
    direct: Vec<SocketAddr>,
}

impl Lab {
    fn seeds(&self) -> Vec<String> {
        self.forwarders.iter().map(|f| f.address().to_string()).collect()
    }

    /// The forwarders to the brokers' PLAINTEXT listeners.
    fn plain_forwarders(&self) -> &[Forwarder] {
        match self.args.listener {
            Listener::Plaintext => &self.forwarders,
            Listener::SaslSsl => &self.plain_forwarders,
        }
    }

    fn us(&self, at: Instant) -> u64 {
        at.duration_since(self.base).as_micros() as u64
    }

    /// What every broker's forwarder saw since the last call, with (for `sasl_ssl`) the
    /// fleet's requests from the broker's request log.
    fn take_logs(&self) -> Res<Vec<Log>> {
        let mut logs: Vec<Log> = self.forwarders.iter().map(Forwarder::take).collect();
        if let Some(request_logs) = &self.request_logs {
            for forwarder in &self.plain_forwarders {
                forwarder.take();
            }
            let mut request_logs = request_logs.lock().unwrap_or_else(PoisonError::into_inner);
            for (log, requests) in logs.iter_mut().zip(request_logs.iter_mut()) {
                log.requests = requests.take(CLIENT_ID, self.args.listener.kafka_name())?;
            }
        }
        Ok(logs)
    }

    /// What an exchange with `client_id` through `listener` sends (SASL) and how it
    /// secures its connection (TLS trusting the cluster's CA).
    fn security(&self, listener: Listener, client_id: &str) -> Res<(ExchangeConfig, Option<TlsOptions>)> {
        let mut exchange = ExchangeConfig { client_id: client_id.into(), ..ExchangeConfig::default() };
        match listener {
            Listener::Plaintext => Ok((exchange, None)),
            Listener::SaslSsl => {
                let sasl = Sasl::from_parts("SCRAM-SHA-512", SASL_USERNAME, Secret::new(SASL_PASSWORD))
                    .ok_or("this build of stagger has no SCRAM-SHA-512")?;
                exchange.sasl = Some(sasl);
                Ok((exchange, Some(TlsOptions { ca_file: Some(self.cluster.ca()), ..TlsOptions::default() })))
            }
        }
    }

    /// A one-shot sequential refresh through `listener` with `client_id`.
    fn refresh_options(&self, listener: Listener, client_id: &str) -> Res<RefreshOptions> {
        let (exchange, tls) = self.security(listener, client_id)?;
        Ok(RefreshOptions { config: RefreshConfig::sequential(), exchange, tls, ..RefreshOptions::default() })
    }
}

fn main() -> Res<()> {
    let args = parse_args()?;
    let started = Instant::now();
    let base = Instant::now();
    // The same moment on the wall clock: what the brokers' request logs are timed by.
    let base_wall = SystemTime::now();
    // The forwarders run on a runtime of their own, so a burst of client work does not
    // delay the relaying (both still share the machine's cores with the brokers).
    let forwarder_rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name("forwarder").enable_all().build()?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("fleet").enable_all().build()?;
    let base_port = free_base_port(BROKERS as u32);
    // The forwarders' ports: another free block below the ephemeral range.
    let forward_port = free_base_port(1);
    // Node i listens on base + 10 (i - 1): PLAINTEXT at + 0, SASL_SSL at + 3 (kafka.sh).
    let listening = |offset: u16| -> Vec<SocketAddr> {
        (0..BROKERS).map(|i| SocketAddr::from(([127, 0, 0, 1], base_port + 10 * i as u16 + offset))).collect()
    };
    let direct = listening(0);
    let (fleet_targets, framing) = match args.listener {
        Listener::Plaintext => (direct.clone(), Framing::Kafka(CLIENT_ID.into())),
        Listener::SaslSsl => (listening(3), Framing::Tls),
    };
    // Listening before the cluster starts: its readiness checks may be sent on to them.
    let (forwarders, plain_forwarders) = forwarder_rt.block_on(async {
        let mut fleet = Vec::new();
        for (i, &target) in fleet_targets.iter().enumerate() {
            let bind = SocketAddr::from(([127, 0, 0, 1], forward_port + i as u16));
            fleet.push(Forwarder::start(bind, target, base, framing.clone()).await?);
        }
        let mut plain = Vec::new();
        if args.listener != Listener::Plaintext {
            for (i, &target) in direct.iter().enumerate() {
                let bind = SocketAddr::from(([127, 0, 0, 1], forward_port + (BROKERS + i) as u16));
                plain.push(Forwarder::start(bind, target, base, Framing::Kafka(CLIENT_ID.into())).await?);
            }
        }
        Ok::<_, std::io::Error>((fleet, plain))
    })?;
    let advertised: Vec<String> = forwarders.iter().map(|f| f.address().to_string()).collect();
    let sasl_ssl = args.listener == Listener::SaslSsl;
    let options = Options {
        advertise_plaintext: (!sasl_ssl).then(|| advertised.clone()),
        advertise_sasl_ssl: sasl_ssl.then(|| advertised.clone()),
        request_log: sasl_ssl,
        base_port: Some(base_port),
        broker_properties: args.broker_properties.clone(),
        cpus: args.broker_cpus.clone(),
        ..Options::default()
    };
    eprintln!(
        "fleet_real: starting a {BROKERS}-broker Kafka cluster (brokers on {base_port}.., {} forwarders on {forward_port}..)",
        args.listener.kafka_name()
    );
    let cluster =
        KafkaCluster::start(&options).ok_or("this machine cannot run Apache Kafka (needs java 17+ and mvn)")?;
    let request_logs = match args.listener {
        Listener::Plaintext => None,
        Listener::SaslSsl => {
            let files = cluster.request_logs().ok_or("the cluster was started without request logs")?;
            Some(Mutex::new(files.into_iter().map(|f| RequestLog::new(f, base_wall)).collect()))
        }
    };
    let lab = Lab { args: args.clone(), base, rt, cluster, forwarders, plain_forwarders, request_logs, direct };
    eprintln!("fleet_real: cluster {} up after {:.1} s", lab.cluster.cluster_id(), started.elapsed().as_secs_f64());

    let mut calibration = calibrate(&lab)?;
    calibration.loadavg_after = loadavg();
    let mut fit = fit(&calibration, args.listener);
    eprintln!("fleet_real: calibrated {}", serde_json::to_string(&fit)?);

    let mut runs = Vec::new();
    for &scenario in &args.scenarios {
        // The first storm a cluster meets is slower whichever strategy faces it (measured:
        // `docs/performance/storm.md`), so one storm is run first and not counted.
        let storm = scenario.is_storm();
        if storm && args.practice_storm && !args.practice_each {
            if let Some(name) = args.strategies.first() {
                practice(&lab, name)?;
            }
        }
        for (turn, name) in args.strategies.iter().enumerate() {
            if storm && args.practice_each {
                practice(&lab, name)?;
            }
            let t = Instant::now();
            let seed = if args.reseed_turns { mix(args.seed, 0x7E00 + turn as u64) } else { args.seed };
            let mut run = run(&lab, name, scenario, seed)?;
            run.seed = args.reseed_turns.then_some(seed);
            eprintln!(
                "fleet_real: {:<15} {:<10} p50 {:>9} p99 {:>9}  attempts/refresh {:.3}  requests/refresh {:.3}  connections {:?}  kept before {:?} (after bootstrap {:?}, on first seed {:?})  spares {}  reused {}  peak {:>4}  broker CPU {:.0?} ms, peak {:.0?} ms / 100 ms  ({:.0} s)",
                scenario.name(),
                name,
                fmt_ms(run.time_to_metadata.p50_ms),
                fmt_ms(run.time_to_metadata.p99_ms),
                run.attempts_per_refresh,
                run.requests_per_refresh,
                run.connections_per_broker,
                run.kept_before_per_broker,
                run.leads_after_bootstrap_per_broker.clone().unwrap_or_default(),
                run.leads_on_first_seed.unwrap_or_default(),
                run.spares_kept_before,
                run.connections_reused_during,
                run.peak_requests,
                run.broker_cpu_ms.clone().unwrap_or_default(),
                run.broker_cpu_peak_ms_per_100ms.clone().unwrap_or_default(),
                t.elapsed().as_secs_f64()
            );
            for line in breakdown(&run) {
                eprintln!("fleet_real:     {line}");
            }
            runs.push(run);
        }
    }
    fit_rest(&mut fit, &runs, args.listener);
    eprintln!("fleet_real: fitted {}", serde_json::to_string(&fit)?);
    let requests_counted_by = (args.listener == Listener::SaslSsl).then(|| {
        "the brokers' request logs (Metadata of client fleet-real on SASL_SSL; the requests the SASL \
         authenticator answers before authentication are not logged); connections and TLS handshakes by the forwarders"
            .to_owned()
    });
    let report = FleetFile {
        listener: args.listener.name().into(),
        machine: machine(),
        kafka_version: lab.cluster.version().into(),
        brokers: BROKERS as u32,
        clients: args.clients as u32,
        warmup_refreshes: args.warmup,
        warmup_spacing_ms: args.warmup_spacing.as_secs_f64() * 1e3,
        settle_ms: args.settle.as_secs_f64() * 1e3,
        request_window_ms: args.window.as_secs_f64() * 1e3,
        storm_window_ms: args.storm.as_secs_f64() * 1e3,
        peak_window_ms: PEAK_WINDOW_US as f64 / 1e3,
        seed: args.seed,
        failed_node: args.node,
        broker_properties: args.broker_properties.clone(),
        storm_connection_rate: args.storm_connection_rate,
        broker_cpus: args.broker_cpus.clone(),
        client_cpus: client_cpus(),
        gentle_bootstrap: args.gentle_bootstrap,
        requests_counted_by,
        calibration,
        fit,
        runs,
        took_s: started.elapsed().as_secs_f64(),
    };
    if let Some(dir) = args.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&report)?)?;
    eprintln!(
        "fleet_real: wrote {} after {:.0} s; stopping the cluster",
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    let Lab { cluster, rt, forwarders, plain_forwarders, .. } = lab;
    drop(cluster);
    rt.shutdown_timeout(Duration::from_secs(2));
    drop(forwarders);
    drop(plain_forwarders);
    forwarder_rt.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}

fn fmt_ms(ms: Option<f64>) -> String {
    match ms {
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

fn calibrate(lab: &Lab) -> Res<Calibration> {
    let fwd: Vec<SocketAddr> = lab.plain_forwarders().iter().map(Forwarder::address).collect();
    let direct = lab.direct.clone();
    let node = lab.args.node as usize - 1;
    let survivors: Vec<SocketAddr> = (0..BROKERS).filter(|&i| i != node).map(|i| direct[i]).collect();
    let survivors_fwd: Vec<SocketAddr> = (0..BROKERS).filter(|&i| i != node).map(|i| fwd[i]).collect();
    let pids: Vec<i32> = (1..=BROKERS as u32).map(|n| lab.cluster.pid(n)).collect();
    let mut calibration = lab.rt.block_on(async {
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
        let pids = &pids;
        let mut alone = Vec::new();
        for &d in &direct {
            alone.push(calibrate::burst(&[d], &frames.metadata, "metadata", conns, n, reps, pids).await?);
        }
        let all = calibrate::burst(&direct, &frames.metadata, "metadata", conns, n, reps, pids).await?;
        let two = calibrate::burst(&survivors, &frames.metadata, "metadata", conns, n, reps, pids).await?;
        let all_fwd = calibrate::burst(&fwd, &frames.metadata, "metadata", conns, n, reps, pids).await?;
        let two_fwd = calibrate::burst(&survivors_fwd, &frames.metadata, "metadata", conns, n, reps, pids).await?;
        let api_all = calibrate::burst(&direct, &frames.api_versions, "api_versions", conns, n, reps, pids).await?;
        let api_two_fwd =
            calibrate::burst(&survivors_fwd, &frames.api_versions, "api_versions", conns, n, reps, pids).await?;
        let churn_two_fwd = calibrate::churn(&survivors_fwd, &frames, 16, 600, reps, pids).await?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(Calibration {
            api_versions_request_bytes: frames.api_versions.len(),
            metadata_request_bytes: frames.metadata.len(),
            metadata_response_bytes: frames.metadata_response,
            idle_gap_ms: gap.as_secs_f64() * 1e3,
            idle_direct,
            idle_forwarded: idle_fwd,
            burst_metadata_alone: alone,
            burst_metadata_all: all,
            burst_metadata_two: two,
            burst_metadata_all_forwarded: all_fwd,
            burst_metadata_two_forwarded: two_fwd,
            burst_api_versions_all: api_all,
            burst_api_versions_two_forwarded: api_two_fwd,
            churn_two_forwarded: churn_two_fwd,
            secured: None,
            loadavg_after: None,
        })
    })?;
    if lab.args.listener == Listener::SaslSsl {
        calibration.secured = Some(lab.rt.block_on(calibrate_secured(lab))?);
    }
    // The calibration's requests are not the fleet's; forget them.
    lab.take_logs()?;
    Ok(calibration)
}

/// What TLS and SASL cost a fresh connection (`secured.rs`), at rest and saturated, beside
/// the same over PLAINTEXT, through both listeners' forwarders.
async fn calibrate_secured(lab: &Lab) -> Res<SecuredCalibration> {
    let sasl_seeds = lab.seeds();
    let plain_seeds: Vec<String> = lab.plain_forwarders().iter().map(|f| f.address().to_string()).collect();
    let sasl = lab.refresh_options(Listener::SaslSsl, PROBE_ID)?;
    let plain = lab.refresh_options(Listener::Plaintext, PROBE_ID)?;
    // The brokers' TLS and SASL path is compiled first, as their request path was.
    secured::warm(&sasl_seeds, &sasl, 400).await?;
    secured::warm(&plain_seeds, &plain, 400).await?;
    for forwarder in &lab.forwarders {
        forwarder.take();
    }
    let (count, gap) = (200, Duration::from_millis(2));
    let (mut rest_sasl, mut rest_plain, mut handshakes) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..BROKERS {
        rest_sasl.push(secured::at_rest(&sasl_seeds[b], &sasl, count, gap).await?);
        handshakes.push(secured::handshake_times(&lab.forwarders[b].take().handshakes));
        rest_plain.push(secured::at_rest(&plain_seeds[b], &plain, count, gap).await?);
    }
    eprintln!(
        "fleet_real: fresh refreshes at rest, mean over brokers of each one's median: SASL_SSL {:.0} µs (TLS {:.0} µs), \
         PLAINTEXT {:.0} µs",
        avg(&rest_sasl.iter().map(|f| f.total.p50_us).collect::<Vec<_>>()),
        avg(&rest_sasl.iter().map(|f| f.first_answer.p50_us).collect::<Vec<_>>()),
        avg(&rest_plain.iter().map(|f| f.total.p50_us).collect::<Vec<_>>()),
    );
    let node = lab.args.node as usize - 1;
    let survivors: Vec<usize> = (0..BROKERS).filter(|&i| i != node).collect();
    let pids: Vec<i32> = survivors.iter().map(|&i| lab.cluster.pid(i as u32 + 1)).collect();
    let pick = |seeds: &[String]| -> Vec<String> { survivors.iter().map(|&i| seeds[i].clone()).collect() };
    let (loops, per_target, reps) = (16, 400, 3);
    let churn_sasl =
        secured::churn(&pick(&sasl_seeds), &pids, &sasl, loops, per_target, reps, "fresh refresh sasl_ssl").await?;
    let churn_plain =
        secured::churn(&pick(&plain_seeds), &pids, &plain, loops, per_target, reps, "fresh refresh plaintext").await?;
    for forwarder in &lab.forwarders {
        forwarder.take();
    }
    Ok(SecuredCalibration {
        fresh_rest_count: count,
        fresh_rest_gap_ms: gap.as_secs_f64() * 1e3,
        fresh_rest_sasl_ssl: rest_sasl,
        fresh_rest_plaintext: rest_plain,
        tls_handshakes_rest: handshakes,
        churn_refresh_sasl_ssl_two_forwarded: churn_sasl,
        churn_refresh_plaintext_two_forwarded: churn_plain,
    })
}

/// The mean of `v` (0 for none).
fn avg(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
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
fn fit(c: &Calibration, listener: Listener) -> Fit {
    let idle = |of: &[Idle], stat: fn(&Idle) -> f64| -> f64 { avg(&of.iter().map(stat).collect::<Vec<_>>()) };
    let connect = idle(&c.idle_direct, |i| i.connect.p50_us);
    let meta_direct_p50 = idle(&c.idle_direct, |i| i.metadata.p50_us);
    let meta_fwd_p50 = idle(&c.idle_forwarded, |i| i.metadata.p50_us);
    let meta_rest = (idle(&c.idle_direct, |i| i.metadata.trimmed_mean_us) - connect).max(1.0);
    let api_rest = (idle(&c.idle_direct, |i| i.api_versions.trimmed_mean_us) - connect).max(1.0);
    let relay = (meta_fwd_p50 - meta_direct_p50).max(0.0);
    let rtt = connect + relay;
    let meta_sat = avg(&c.burst_metadata_two_forwarded.service_us);
    let api_sat = avg(&c.burst_api_versions_two_forwarded.service_us);
    let alone = avg(&c.burst_metadata_alone.iter().filter_map(|b| b.service_us.first().copied()).collect::<Vec<_>>());
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let churn = avg(&c.churn_two_forwarded.service_us);
    let mut fit = Fit {
        fresh_attempt_saturated_us: churn.round(),
        connection_saturated_us: (churn - meta_sat - api_sat).round(),
        rtt_us: rtt.round(),
        loopback_connect_us: connect.round(),
        forwarder_relay_us: relay.round(),
        metadata_probe_rest_us: meta_rest.round(),
        api_versions_probe_rest_us: api_rest.round(),
        metadata_saturated_us: meta_sat.round(),
        api_versions_saturated_us: api_sat.round(),
        metadata_saturated_alone_direct_us: alone.round(),
        metadata_saturated_all_direct_us: avg(&c.burst_metadata_all.service_us).round(),
        api_ratio_probe_rest: round(api_rest / meta_rest),
        api_ratio_saturated: if meta_sat > 0.0 { round(api_sat / meta_sat) } else { 0.0 },
        service_saturated_us: ((meta_sat + api_sat) / 1.05).round(),
        // The prices at rest come from the runs' warm-ups (`fit_rest`).
        ..Fit::default()
    };
    if let (Listener::SaslSsl, Some(secured)) = (listener, &c.secured) {
        fit_secured(&mut fit, secured, meta_sat + api_sat);
    }
    fit
}

/// TLS 1.3's full handshake costs a fresh connection one round trip before the client can
/// send its first request: ClientHello out, the broker's whole flight (ServerHello through
/// Finished) back; the client's Finished goes out with its first request.
const TLS_ROUND_TRIPS: u32 = 1;
/// SCRAM over Kafka: SaslHandshake (the mechanism), then SaslAuthenticate with the
/// client-first message (answered by server-first: nonce, salt, iterations) and with the
/// client-final message (answered by server-final: the broker's signature), each a round
/// trip. The pre-authentication ApiVersions before them is a round trip a plaintext
/// connection pays as well, so it is not counted here.
const SASL_ROUND_TRIPS: u32 = 3;

/// The fit's TLS and SASL knobs (`--listener sasl_ssl`), from `secured.rs`'s measurements.
/// `requests_saturated_us` is ApiVersions + Metadata of a saturated broker (the plaintext
/// bursts: a broker's time per request does not depend on the listener).
///
/// * `fresh_attempt_saturated_us`: 1 / the fresh SASL_SSL refreshes per second each
///   surviving broker answered in closed loops (connect, TLS, SASL, ApiVersions, Metadata,
///   close), and `connection_saturated_us` that minus the two requests: the connection's own
///   cost, TLS and SASL included. Both are the raw-frame plaintext loops' in plaintext mode;
///   those stay as `fresh_attempt_raw_plaintext_saturated_us` and
///   `connection_raw_plaintext_saturated_us`.
/// * `fresh_refresh_plaintext_saturated_us`: the same refresh loops over PLAINTEXT, in the
///   same run, `plaintext_connection_saturated_us` that minus the two requests, and
///   `tls_sasl_saturated_us` the difference of the two listeners' loops (=
///   `connection_saturated_us - plaintext_connection_saturated_us`): what TLS and SASL add,
///   measured the same way. (The refresh loops' plaintext connection costs more than the
///   raw-frame one by the client's driver, which shares the cores.) On a
///   2-core machine the clients' TLS and PBKDF2 take cores from the brokers, so these are
///   the machine's time per connection; `*_broker_cpu_us` are the brokers' own CPU time per
///   refresh (from `/proc`), `tls_sasl_broker_cpu_us` their difference.
/// * `tls_rest_us`: the TLS handshake a client sees at rest (TCP up to handshake done, the
///   median of each broker's median, averaged); `sasl_rest_us`: what the rest of a SASL_SSL
///   exchange takes beyond a plaintext one's ApiVersions + Metadata (SaslHandshake and two
///   SaslAuthenticate, with the client's PBKDF2), measured the same way.
/// * `tls_round_trips`, `sasl_round_trips`: the constants above.
fn fit_secured(fit: &mut Fit, c: &SecuredCalibration, requests_saturated_us: f64) {
    let p50 = |of: &[Fresh], phase: fn(&Fresh) -> &Spread| avg(&of.iter().map(|f| phase(f).p50_us).collect::<Vec<_>>());
    let churn = avg(&c.churn_refresh_sasl_ssl_two_forwarded.rate.service_us);
    let churn_plain = avg(&c.churn_refresh_plaintext_two_forwarded.rate.service_us);
    let cpu = avg(&c.churn_refresh_sasl_ssl_two_forwarded.broker_cpu_us);
    let cpu_plain = avg(&c.churn_refresh_plaintext_two_forwarded.broker_cpu_us);
    fit.secured = Some(SecuredFit {
        fresh_attempt_raw_plaintext_saturated_us: fit.fresh_attempt_saturated_us,
        connection_raw_plaintext_saturated_us: fit.connection_saturated_us,
        fresh_refresh_plaintext_saturated_us: churn_plain.round(),
        plaintext_connection_saturated_us: (churn_plain - requests_saturated_us).round(),
        tls_sasl_saturated_us: (churn - churn_plain).round(),
        fresh_refresh_broker_cpu_us: cpu.round(),
        fresh_refresh_plaintext_broker_cpu_us: cpu_plain.round(),
        tls_sasl_broker_cpu_us: (cpu - cpu_plain).round(),
        tls_rest_us: p50(&c.fresh_rest_sasl_ssl, |f| &f.first_answer).round(),
        sasl_rest_us: (p50(&c.fresh_rest_sasl_ssl, |f| &f.after_first_answer)
            - p50(&c.fresh_rest_plaintext, |f| &f.exchange))
        .round(),
        tls_round_trips: TLS_ROUND_TRIPS,
        sasl_round_trips: SASL_ROUND_TRIPS,
    });
    fit.fresh_attempt_saturated_us = churn.round();
    fit.connection_saturated_us = (churn - requests_saturated_us).round();
}

/// The broker's time per request at rest, from the forwarders' timing of the fleet's own
/// ApiVersions and Metadata requests during every run's calm warm-up (about
/// `clients / warmup_spacing` refreshes per second over three brokers): per run the median
/// over brokers of each broker's median, then the median over runs. Medians, because on a
/// shared 2-core machine the means are dominated by moments nobody was scheduled (a few
/// requests of 30 ms and more), which is the machine, not the broker's work; the means are
/// recorded too. `service_rest_us = (ApiVersions + Metadata) / 1.05` (see [`fit`]).
///
/// Over SASL_SSL the times are the brokers' own (`totalTimeMs` of their request logs,
/// without the forwarder's hop), and the ApiVersions ones are those of kept connections (a
/// fresh connection's is answered by the SASL authenticator, which logs nothing); with none
/// logged (every warm-up refresh on a fresh connection) `api_versions_rest_us`, its mean,
/// the ratio and `service_rest_us` are null.
fn fit_rest(fit: &mut Fit, runs: &[Run], listener: Listener) {
    fn median(mut v: Vec<f64>) -> f64 {
        if v.is_empty() {
            return 0.0;
        }
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }
    let per_run = |times: fn(&Run) -> &[Spread], stat: fn(&Spread) -> f64| -> f64 {
        median(
            runs.iter()
                .map(|run| median(times(run).iter().filter(|b| b.n > 0).map(stat).collect()))
                .filter(|&x| x > 0.0)
                .collect(),
        )
    };
    let meta_times: fn(&Run) -> &[Spread] = |r| &r.warmup_broker_metadata_time;
    let api_times: fn(&Run) -> &[Spread] = |r| &r.warmup_broker_api_versions_time;
    let meta = per_run(meta_times, |b| b.p50_us);
    let api = per_run(api_times, |b| b.p50_us);
    fit.metadata_rest_us = meta.round();
    fit.metadata_rest_mean_us = per_run(meta_times, |b| b.mean_us).round();
    // Over SASL_SSL with no ApiVersions logged, its price is unknown, not zero.
    let api_known = listener != Listener::SaslSsl || api != 0.0;
    fit.api_versions_rest_us = api_known.then(|| api.round());
    fit.api_versions_rest_mean_us = api_known.then(|| per_run(api_times, |b| b.mean_us).round());
    fit.api_ratio_rest = api_known.then(|| if meta > 0.0 { (api / meta * 1000.0).round() / 1000.0 } else { 0.0 });
    fit.service_rest_us = api_known.then(|| ((meta + api) / 1.05).round());
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
    detail: RefreshDetail,
}

/// One turn: `name`'s fresh fleet meets `scenario`; its clients' seeds, warm-up and
/// schedule draw from `seed`.
fn run(lab: &Lab, name: &str, scenario: Scenario, seed: u64) -> Res<Run> {
    let args = &lab.args;
    if scenario.is_storm() {
        // Every strategy's storm kills a node restarted just before its clients start, so
        // no strategy meets a cluster the one before it left (the node it killed restarted,
        // the quorum's and the partitions' leaders moved).
        restart_and_warm(lab, args.node)?;
        wait_healthy(lab)?;
    }
    let config = strategy(name)?;
    let seeds = lab.seeds();
    // The simulator's rule, so every strategy meets the incident after the same refreshes and
    // the same time since the killed node's restart: with 2 warm-ups for
    // `sequential-shuffled` and 16 for the default, the default's storm was slower in every
    // turn for the same work (`docs/performance/storm.md`, "Placed alike, warmed alike").
    let warmup = stagger_sim::fleet::warmup_refreshes_for(&config, args.warmup);
    let scenario_seed = mix(seed, 0x100 + scenario as u64);
    // Fresh clients, each with the three brokers as seeds, rotated (as the simulator's).
    let (exchange, tls) = lab.security(args.listener, CLIENT_ID)?;
    let options = ClientOptions { exchange, tls, ..ClientOptions::default() };
    let clients: Vec<Arc<Client>> = lab.rt.block_on(async {
        (0..args.clients)
            .map(|i| {
                let seeds: Vec<&str> = (0..BROKERS).map(|k| seeds[(i + k) % BROKERS].as_str()).collect();
                let cfg = ClusterConfig { refresh: config.refresh.with_seed(mix(seed, 1 + i as u64)), ..config };
                Client::new(cfg, &seeds, options.clone()).map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()
    })?;

    // The calm warm-up: the simulator's schedule (first at a random time within one
    // spacing, then every spacing × [0.5, 1.5)).
    let spacing = args.warmup_spacing;
    // The cold start, read apart: the brokers' CPU by thread and the clients' new
    // connections from the warm-up's start until every client's first refresh has had
    // `COLD_START_TAIL` to finish.
    let pids: Vec<i32> = (1..=BROKERS as u32).map(|n| lab.cluster.pid(n)).collect();
    let cold_start = {
        let before = broker_cpu::ThreadsCpu::start(pids);
        let clients = clients.clone();
        std::thread::spawn(move || {
            std::thread::sleep(spacing + COLD_START_TAIL);
            let opened: u64 = clients.iter().map(|c| c.stats().connections_opened).sum();
            (before.ms_since(), opened)
        })
    };
    let warm_failed = lab.rt.block_on(async {
        let mut set = JoinSet::new();
        for (i, client) in clients.iter().enumerate() {
            let client = client.clone();
            let gentle_bootstrap = args.gentle_bootstrap;
            let mut rng = Rng::new(mix(mix(seed, 0x5C), i as u64));
            set.spawn(async move {
                let mut failed = 0u32;
                let mut first_lead = None;
                let mut first_choice = None;
                let mut bootstrap_us = None;
                let mut moves = Vec::new();
                let mut last_lead = None;
                let mut at = tokio::time::Instant::now() + spacing.mul_f64(rng.unit());
                for k in 0..warmup {
                    tokio::time::sleep_until(at).await;
                    let lead_before = client.stats().kept;
                    if k > 1 && lead_before != last_lead && lead_before == first_lead {
                        moves.push("came back home between refreshes".to_string());
                    }
                    if k == 1 {
                        // Where the bootstrap left the client's lead, a drained first choice
                        // included (it becomes home when its answer comes, after the winner's).
                        first_lead = lead_before.clone();
                    }
                    let asked = tokio::time::Instant::now();
                    let refresh = async {
                        if k == 0 && gentle_bootstrap {
                            client.refresh_because(RefreshCause::StaleMetadata, None).await
                        } else {
                            client.refresh().await
                        }
                    };
                    let answered = matches!(tokio::time::timeout(GIVE_UP, refresh).await, Ok(Ok(_)));
                    if !answered {
                        failed += 1;
                    }
                    if k == 0 && answered {
                        bootstrap_us = Some(asked.elapsed().as_micros() as u64);
                    }
                    let lead_after = client.stats().kept;
                    if k > 0 && lead_before.is_some() && lead_after != lead_before {
                        let how = warmup_move(&client.last_refresh(), lead_before.as_deref(), &first_lead);
                        let when = if k <= 3 { format!("refresh {k}") } else { "refresh 4+".to_string() };
                        moves.push(format!("{when}, {how}"));
                    }
                    last_lead = lead_after;
                    if k == 0 {
                        // The bootstrap's first attempt: the broker this client chose (seeds
                        // shuffled or not), and how many brokers its bootstrap tried.
                        let attempts = client.last_refresh();
                        first_choice = attempts.first().map(|a| {
                            let how = match &a.outcome {
                                AttemptOutcome::Cancelled(reason) => format!("cancelled {reason:?}"),
                                other => other.name().to_string(),
                            };
                            let how =
                                format!("{how}, {}", if a.connected.is_some() { "connected" } else { "not connected" });
                            (a.broker.clone(), attempts.len(), how)
                        });
                    }
                    at += spacing.mul_f64(0.5 + rng.unit());
                }
                (i, failed, first_lead, first_choice, bootstrap_us, moves)
            });
        }
        let mut failed = 0;
        let mut first_leads = vec![None; clients.len()];
        let mut first_choices = vec![None; clients.len()];
        let mut bootstraps = Vec::new();
        let mut moves = std::collections::BTreeMap::new();
        while let Some(f) = set.join_next().await {
            match f {
                Ok((i, n, lead, choice, took, moved)) => {
                    failed += n;
                    first_leads[i] = lead;
                    first_choices[i] = choice;
                    bootstraps.extend(took);
                    for m in moved {
                        *moves.entry(m).or_insert(0usize) += 1;
                    }
                }
                Err(_) => failed += 1,
            }
        }
        (failed, first_leads, first_choices, bootstraps, moves)
    });
    let (warm_failed, first_leads, first_choices, mut bootstraps, warmup_moves) = warm_failed;
    if !warmup_moves.is_empty() {
        eprintln!("fleet_real:   leads moved by the warm-up's calm refreshes: {warmup_moves:?}");
    }
    // How long the clients' bootstraps took (those answered): how long a cold start's
    // handshakes queued, which decides how many clients hedged into them.
    bootstraps.sort_unstable();
    let quantile =
        |q: f64| bootstraps.get(((bootstraps.len() as f64 * q) as usize).min(bootstraps.len().saturating_sub(1)));
    let bootstrap_ms = quantile(0.5).zip(quantile(0.99)).map(|(a, b)| [*a as f64 / 1e3, *b as f64 / 1e3]);
    let cold_start = cold_start.join().ok();
    let warm_logs = lab.take_logs()?;
    let warm_latency = broker_latency(&warm_logs, METADATA, 0, u64::MAX);
    let warm_api_latency = broker_latency(&warm_logs, API_VERSIONS, 0, u64::MAX);
    std::thread::sleep(args.settle);

    // Which broker each client keeps a connection to, read before the incident: once the
    // dead broker's connections close, a client has released it and `kept` no longer says.
    let kept_before: Vec<Option<String>> = clients.iter().map(|c| c.stats().kept).collect();
    // Spare connections the warm-up left (losers drained and kept), and reuses so far.
    let spares_before: u64 = clients.iter().map(|c| c.stats().spares_kept).sum();
    let held_before: u64 = clients.iter().map(|c| u64::from(c.stats().kept_connections)).sum();
    let spare_held: Vec<bool> = clients.iter().map(|c| c.stats().kept_connections > 1).collect();
    let reused_before: u64 = clients.iter().map(|c| c.stats().connections_reused).sum();
    // The incident.
    let node = args.node;
    let mut paused = None;
    match scenario {
        Scenario::Healthy => {}
        Scenario::OneHung => paused = Some(lab.cluster.pause(node)),
        Scenario::FailoverStorm | Scenario::StormHungSurvivor => {
            if scenario == Scenario::StormHungSurvivor {
                paused = Some(lab.cluster.pause(survivor(node) as u32 + 1));
            }
            if let Some(rate) = args.storm_connection_rate {
                throttle::set_rate(&lab.cluster.plaintext()[survivor(node)], Some(rate))?;
            }
            lab.cluster.kill(node);
            lab.forwarders[node as usize - 1].refuse();
            // The dead broker's kept connections close; give every client time to notice.
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    let window = if scenario.is_storm() { args.storm } else { args.window };
    lab.take_logs()?;
    let (load_before, cpu_before) = (loadavg(), cpu_ticks());
    let pids: Vec<i32> = (1..=BROKERS as u32).map(|n| lab.cluster.pid(n)).collect();
    let threads_before = broker_cpu::ThreadsCpu::start(pids.clone());
    let broker_cpu = broker_cpu::Sampler::start(pids);
    let t0 = Instant::now() + Duration::from_millis(20);
    let t0_us = lab.us(t0);
    let process_before = process_cpu_us();
    let mut refreshes: Vec<Refresh> = lab.rt.block_on(async {
        let mut schedule = Rng::new(scenario_seed);
        let start = tokio::time::Instant::from_std(t0);
        let mut set = JoinSet::new();
        let dead = seeds[node as usize - 1].clone();
        for (i, client) in clients.iter().enumerate() {
            let client = client.clone();
            let nodes = seeds.clone();
            let at = start + window.mul_f64(schedule.unit());
            // What each client would know in a failover: its connection to the dead broker
            // was lost, or (the others) its requests for that broker's partitions now say
            // NOT_LEADER. Elsewhere it knows nothing. Both strategies are told the same.
            let cause = match scenario {
                Scenario::FailoverStorm | Scenario::StormHungSurvivor if args.causes => {
                    if kept_before[i].as_deref() == Some(dead.as_str()) {
                        (RefreshCause::ConnectionLost, Some(dead.clone()))
                    } else {
                        (RefreshCause::StaleMetadata, None)
                    }
                }
                _ => (RefreshCause::Requested, None),
            };
            let show = args.show_attempts;
            set.spawn(async move {
                tokio::time::sleep_until(at).await;
                let before = client.stats();
                let asked = Instant::now();
                let result = tokio::time::timeout(GIVE_UP, client.refresh_because(cause.0, cause.1.as_deref())).await;
                let took = asked.elapsed();
                let after = client.stats();
                let attempts = after.attempts - before.attempts;
                let us = |d: Duration| d.as_micros() as u64;
                let winner = client.last_refresh().iter().find(|a| matches!(a.outcome, AttemptOutcome::Won)).map(|a| {
                    WinnerTimes {
                        node: nodes.iter().position(|b| *b == a.broker).map(|k| k as u32 + 1),
                        reused: a.reused_connection,
                        started_us: us(a.started),
                        connected_us: a.connected.map(us),
                        answered_us: a.answered.map(us),
                        ended_us: a.ended.map(us),
                    }
                });
                let detail = RefreshDetail {
                    cause: cause.0.name().into(),
                    opened: after.connections_opened - before.connections_opened,
                    winner,
                };
                if show.is_some_and(|k| attempts >= k) {
                    let ms = |d: Option<Duration>| d.map_or("-".into(), |d| format!("{:.1}", d.as_secs_f64() * 1e3));
                    let rows: Vec<String> = client
                        .last_refresh()
                        .iter()
                        .map(|a| {
                            let times = [Some(a.started), a.connected, a.answered, a.ended].map(ms).join("/");
                            format!("{} {} {times} ms", a.broker, a.outcome.name())
                        })
                        .collect();
                    eprintln!("fleet_real: client {i} took {took:.1?}: {}", rows.join(" | "));
                }
                let asked_us = asked.saturating_duration_since(t0).as_micros() as u64;
                match result {
                    Ok(Ok(_)) => Refresh {
                        client: i,
                        asked_us,
                        took_us: Some(took.as_micros() as u64),
                        attempts,
                        error: None,
                        detail,
                    },
                    Ok(Err(e)) => {
                        Refresh { client: i, asked_us, took_us: None, attempts, error: Some(e.to_string()), detail }
                    }
                    Err(_) => {
                        Refresh { client: i, asked_us, took_us: None, attempts, error: Some("gave up".into()), detail }
                    }
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
    // This process's CPU while the clients refreshed: the clients', and the forwarders'
    // relaying their bytes, on the cores the brokers use too.
    let process_cpu = process_before.zip(process_cpu_us()).map(|(b, a)| a.saturating_sub(b) as f64 / 1e3);
    std::thread::sleep(GRACE);
    if scenario.is_storm() && args.storm_connection_rate.is_some() {
        throttle::set_rate(&lab.cluster.plaintext()[survivor(node)], None)?;
    }
    let broker_cpu = broker_cpu.finish();
    let broker_threads = threads_before.ms_since();
    let end_us = lab.us(Instant::now());
    let logs = lab.take_logs()?;
    let (load_after, cpu_after) = (loadavg(), cpu_ticks());
    // The machine's cores busy during the measurement (everyone's work, not only ours).
    let busy = match (cpu_before, cpu_after) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => Some((b1 - b0) as f64 / (t1 - t0) as f64),
        _ => None,
    };

    let reused_during: u64 = clients.iter().map(|c| c.stats().connections_reused).sum::<u64>() - reused_before;
    // Close the clients (and their connections) before the cluster recovers.
    lab.rt.block_on(async {
        for client in clients {
            if let Ok(client) = Arc::try_unwrap(client) {
                client.close().await;
            }
        }
    });
    drop(paused);
    if scenario.is_storm() {
        lab.forwarders[node as usize - 1].accept_again();
        restart_and_warm(lab, node)?;
    }
    wait_healthy(lab)?;

    refreshes.sort_by_key(|r| r.client);
    let mut run = summarise(
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
    // Where the clients' kept connections were when the incident came: a storm's clients
    // kept on the dead broker must open a new connection whatever the strategy, so the
    // connections a strategy adds are those beyond this.
    let seeds = lab.seeds();
    let kept_per_broker: Vec<usize> =
        seeds.iter().map(|s| kept_before.iter().filter(|k| k.as_deref() == Some(s.as_str())).count()).collect();
    run.kept_before_per_broker = kept_per_broker;
    // Whether leads stayed where each client's bootstrap put them, and whether that was its
    // first seed (client `i`'s is `seeds[i % BROKERS]`): a herd forms at the bootstrap or later.
    let leads_on = |leads: &[Option<String>]| -> Vec<usize> {
        seeds.iter().map(|s| leads.iter().filter(|k| k.as_deref() == Some(s.as_str())).count()).collect()
    };
    run.leads_after_bootstrap_per_broker = Some(leads_on(&first_leads));
    if let Some((cpu, opened)) = cold_start {
        run.cold_start_broker_threads_cpu_ms = Some(cpu);
        run.cold_start_connections = Some(opened);
    }
    run.bootstrap_ms = bootstrap_ms;
    let on_first_seed = |leads: &[Option<String>]| {
        leads.iter().enumerate().filter(|(i, k)| k.as_deref() == Some(seeds[i % BROKERS].as_str())).count()
    };
    run.leads_on_first_seed = Some([on_first_seed(&first_leads), on_first_seed(&kept_before)]);
    // Whether leads stayed where each client's bootstrap chose (its first attempt's broker,
    // seeds shuffled or not), split by whether the bootstrap tried more than one broker.
    let on_choice = |leads: &[Option<String>], hedged: bool| {
        let choices = first_choices.iter().zip(leads);
        choices
            .filter(|(c, l)| c.as_ref().is_some_and(|(b, n, _)| (*n > 1) == hedged && l.as_deref() == Some(b.as_str())))
            .count()
    };
    let hedged = first_choices.iter().filter(|c| c.as_ref().is_some_and(|(_, n, _)| *n > 1)).count();
    let mut off_choice = std::collections::BTreeMap::new();
    for (c, l) in first_choices.iter().zip(&kept_before) {
        if let Some((_, n, how)) = c.as_ref().filter(|(b, _, _)| l.as_deref() != Some(b.as_str())) {
            *off_choice.entry(format!("{} tried: first {how}", n)).or_insert(0usize) += 1;
        }
    }
    run.bootstrap_first_choice = Some(FirstChoiceCounts {
        bootstraps_hedged: hedged,
        on_choice_after_bootstrap: [on_choice(&first_leads, false), on_choice(&first_leads, true)],
        on_choice_before_incident: [on_choice(&kept_before, false), on_choice(&kept_before, true)],
        off_choice_before_incident: Some(off_choice),
        warmup_moves: Some(warmup_moves),
    });
    // Which of those clients also held a spare: a storm spares a new connection only to the
    // clients that lost their lead, so where the spares sit decides what they save.
    run.spares_by_lead_before = Some(
        seeds
            .iter()
            .map(|s| {
                let with_spare = kept_before.iter().zip(&spare_held);
                with_spare.filter(|(k, spare)| **spare && k.as_deref() == Some(s.as_str())).count()
            })
            .collect(),
    );
    run.spares_kept_before = spares_before;
    run.kept_connections_before = Some(held_before);
    run.connections_reused_during = reused_during;
    run.loadavg_before = load_before;
    run.loadavg_after = load_after;
    run.cpu_busy = busy;
    run.broker_cpu_ms = Some(broker_cpu.total_ms);
    run.broker_cpu_peak_ms_per_100ms = Some(broker_cpu.peak_ms_per_100ms);
    run.broker_threads_cpu_ms = Some(broker_threads);
    run.client_cpu_ms = process_cpu;
    Ok(run)
}

/// Restarts `node` and warms it: a restarted broker's JIT is cold, and its start kept the
/// cores busy, so its request path is warmed up as the calibration did (its TLS and SASL
/// path too), then the machine settles.
fn restart_and_warm(lab: &Lab, node: u32) -> Res<()> {
    lab.cluster.restart(node);
    let direct = lab.direct.clone();
    let tls_warm = match lab.args.listener {
        Listener::Plaintext => None,
        Listener::SaslSsl => Some((lab.refresh_options(Listener::SaslSsl, PROBE_ID)?, vec![dead_seed(lab)])),
    };
    lab.rt.block_on(async {
        let frames = calibrate::capture(direct[node as usize - 1], PROBE_ID).await?;
        calibrate::warm(&direct, &frames, 6000).await?;
        if let Some((options, seed)) = &tls_warm {
            secured::warm(seed, options, 400).await?;
        }
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    })?;
    std::thread::sleep(Duration::from_secs(8));
    Ok(())
}

/// The index (from 0) of a broker that survives when `node` (from 1) is killed.
fn survivor(node: u32) -> usize {
    node as usize % BROKERS
}

/// The seed (forwarder) of the broker a scenario hangs or kills.
fn dead_seed(lab: &Lab) -> String {
    lab.seeds()[lab.args.node as usize - 1].clone()
}

/// CPU time this process (every client and forwarder thread) has used, µs, at the
/// kernel's own precision rather than `/proc`'s 10 ms ticks: a storm's refreshes last tens
/// of milliseconds.
fn process_cpu_us() -> Option<u64> {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    (rc == 0).then(|| t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1_000)
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
    // Through the fleet's listener, with the default client id (not counted as the fleet).
    let options = lab.refresh_options(lab.args.listener, &ExchangeConfig::default().client_id)?;
    lab.rt.block_on(async {
        for seed in &seeds {
            loop {
                let ok = stagger_tokio::refresh_with(&options, &[seed.as_str()], |_| {})
                    .await
                    .is_ok_and(|o| o.metadata.brokers.len() == BROKERS);
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
    lab.take_logs()?;
    std::thread::sleep(Duration::from_secs(2));
    lab.take_logs()?;
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

/// An uncounted storm of strategy `name`.
fn practice(lab: &Lab, name: &str) -> Res<()> {
    let practice = run(lab, name, Scenario::FailoverStorm, lab.args.seed)?;
    eprintln!("fleet_real: practice storm ({name}, not counted): p50 {}", fmt_ms(practice.time_to_metadata.p50_ms));
    Ok(())
}

/// A run's refreshes grouped by cause and by whether the winner ran on a kept connection,
/// each group with its time to metadata and the median of where its winners' time went: so a
/// difference between strategies shows whether the clients that reconnected or everyone
/// were slower.
fn breakdown(run: &Run) -> Vec<String> {
    let Some(details) = &run.refresh_details else { return Vec::new() };
    /// The refreshes of one group: each one's time to metadata and its detail.
    type Group<'a> = Vec<(Option<u64>, &'a RefreshDetail)>;
    let mut groups: std::collections::BTreeMap<(String, &str), Group> = Default::default();
    for (entry, detail) in run.refresh_list.iter().zip(details) {
        let kept = match detail.winner {
            Some(w) if w.reused => "kept",
            Some(_) => "fresh",
            None => "failed",
        };
        groups.entry((detail.cause.clone(), kept)).or_default().push((entry.2, detail));
    }
    // Nearest rank, in ms; "-" for none.
    let quantile = |mut v: Vec<u64>, q: f64| -> String {
        v.sort_unstable();
        let rank = ((v.len() as f64 * q) as usize).min(v.len().saturating_sub(1));
        v.get(rank).map_or("-".into(), |&us| format!("{:.1}", us as f64 / 1e3))
    };
    let median = |v: Vec<u64>| quantile(v, 0.5);
    groups
        .into_iter()
        .map(|((cause, kept), rows)| {
            let took = median(rows.iter().filter_map(|r| r.0).collect());
            let p99 = quantile(rows.iter().filter_map(|r| r.0).collect(), 0.99);
            let opened: u64 = rows.iter().map(|r| r.1.opened).sum();
            let phase = |f: fn(&WinnerTimes) -> Option<u64>| median(rows.iter().filter_map(|r| r.1.winner.and_then(|w| f(&w))).collect());
            format!(
                "{cause:<17} {kept:<6} n {:>3}  p50 {took:>6} ms  p99 {p99:>6} ms  opened {opened:>3}  winner's median started/connected/answered/ended {}/{}/{}/{} ms",
                rows.len(),
                phase(|w| Some(w.started_us)),
                phase(|w| w.connected_us),
                phase(|w| w.answered_us),
                phase(|w| w.ended_us),
            )
        })
        .collect()
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
) -> Run {
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
    let sasl_ssl = lab.args.listener == Listener::SaslSsl;
    // The TLS handshakes whose ClientHello passed within the run, per broker.
    let handshakes = |pick: fn(&forwarder::Handshake) -> bool| -> Vec<usize> {
        logs.iter().map(|log| log.handshakes.iter().filter(|h| in_run(h.hello_us) && pick(h)).count()).collect()
    };
    Run {
        scenario: scenario.name().into(),
        strategy: name.into(),
        window_ms: window.as_secs_f64() * 1e3,
        warmup_refreshes: warmup,
        warmup_failed: warm_failed,
        refreshes: refreshes.len(),
        failed,
        errors: refreshes.iter().filter_map(|r| r.error.clone()).take(5).collect(),
        time_to_metadata: stagger_sim::fleet::Percentiles::of_sorted(&times),
        attempts,
        attempts_per_refresh: attempts as f64 / n,
        requests,
        requests_per_refresh: requests as f64 / n,
        peak_requests: peak,
        peak_broker,
        peak_requests_fixed_buckets: peak_fixed,
        requests_per_broker: per_broker,
        // Not in the brokers' request logs over SASL_SSL (see the module docs): unknown, not zero.
        api_versions_per_broker: (!sasl_ssl).then_some(api_per_broker),
        connections_per_broker: conns_per_broker,
        unanswered_requests_per_broker: (!sasl_ssl).then_some(unanswered),
        broker_metadata_time: broker_latency(logs, METADATA, t0_us, end_us),
        broker_api_versions_time: broker_latency(logs, API_VERSIONS, t0_us, end_us),
        warmup_broker_metadata_time: warm_latency,
        warmup_broker_api_versions_time: warm_api_latency,
        metadata_per_100ms: buckets_all,
        refresh_list: refreshes.iter().map(|r| RefreshEntry(r.client, r.asked_us, r.took_us, r.attempts)).collect(),
        refresh_details: Some(refreshes.iter().map(|r| r.detail.clone()).collect()),
        secured: sasl_ssl.then(|| SecuredCounts {
            api_versions_logged_per_broker: logs
                .iter()
                .map(|log| log.requests.iter().filter(|r| r.api == API_VERSIONS && in_run(r.at_us)).count())
                .collect(),
            tls_handshakes_per_broker: handshakes(|h| h.answered_us.is_some()),
            tls_established_per_broker: handshakes(|h| h.established_us.is_some()),
            tls_unanswered_per_broker: handshakes(|h| h.answered_us.is_none()),
        }),
        // Set by `run`, which saw the clients before the incident and the machine around it.
        ..Run::default()
    }
}

#[cfg(test)]
mod tests;
