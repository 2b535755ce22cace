//! librdkafka itself, measured on the scenarios of `realsockets` (issue 7, item 4).
//!
//! `docs/performance/realsockets.md` compares our default policy with librdkafka figures quoted
//! in the issue and with an *assumed* librdkafka connection count. This program replaces both
//! with measurements of librdkafka (the version linked by the `rdkafka` crate, in-process) on
//! the same faults, built the same way as in `realsockets` (a 6-broker librdkafka mock cluster
//! per scenario, the faulty brokers first in `bootstrap.servers`):
//!
//! * `silent k`: the first k seeds are mock brokers with a 1 h round-trip time (they accept TCP
//!   and never answer);
//! * `refusing k`: the first k seeds are mock brokers that are down (port bound, not
//!   listening: the kernel answers the SYN with a RST);
//! * `no handshake`: the first seed is a loopback listener (backlog 1, never accepting) whose
//!   accept queue is pre-filled, so the kernel drops the SYNs and `connect` hangs; the other
//!   five seeds are brokers 1–5;
//! * two baselines without a fault: the seeds directly, and the seeds through the proxies.
//!
//! Each run creates a fresh `BaseConsumer` (no group) with `bootstrap.servers` = the seed list,
//! calls `fetch_metadata(None, 30 s)`, keeps the client 300 ms longer (polling it for its
//! statistics) and drops it. Connections are counted without trusting librdkafka:
//!
//! * every healthy or silent seed is a counting TCP proxy (tokio, loopback only) in front of
//!   its mock broker: its accepted connections are the TCP handshakes librdkafka completed;
//! * a packet capture on `lo` (an `AF_PACKET` socket with a BPF filter keeping SYN and RST
//!   segments between 127.0.0.1 ports; needs `CAP_NET_RAW`, skipped otherwise) timestamps every
//!   SYN, SYN-ACK and RST, so refused and never-answered attempts are counted too, split at
//!   the moment metadata arrived, and so are connections to the brokers' own addresses learned
//!   from metadata (those bypass the proxies; the proxies' own upstream connections are
//!   excluded);
//! * the proxies' accept counts are compared with the SYN-ACKs captured, and librdkafka's own
//!   statistics (`connects` per broker handle, `statistics.interval.ms` = 100) with the
//!   capture. librdkafka 2.10+ decommissions its bootstrap handles once metadata has listed
//!   the brokers, so its statistics after metadata only cover the learned brokers' handles:
//!   the cross-check is on those.
//!
//! ```text
//! cargo run --release -p stagger-lab --bin librdkafka_reference [-- RUNS]
//! ```
//!
//! `RUNS` (default 60) runs per scenario; each run ends by itself (bounded by the 30 s metadata
//! timeout, in practice well under a second). About three minutes in all.

mod capture;
mod proxy;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::error::Error;
use std::ffi::CString;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rdkafka::bindings as rdsys;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use stagger_lab::measure::{median, ms};
use stagger_test_faults::blackhole::{blackhole, Blackhole};
use tokio::runtime::Runtime;

use capture::{Capture, Segment, ACK, RST, SYN};
use proxy::{proxy, Proxy, UpstreamLog};

/// The mock cluster type `realsockets` uses, so the brokers behave the same.
type Mock = MockCluster<'static, DefaultProducerContext>;
/// Any error ends the program with a message: it is a measurement, not a service.
type Res<T> = Result<T, Box<dyn Error>>;

/// Brokers per mock cluster, as in `realsockets`.
const BROKERS: i32 = 6;
/// Runs per scenario unless given on the command line: librdkafka picks brokers at random, so
/// more runs than `realsockets`' 7 are needed to see the spread.
const RUNS: usize = 60;
/// The `fetch_metadata` timeout: far above anything measured, so it only bounds a broken run.
const METADATA_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client is kept after its metadata arrived: long enough for a statistics event
/// and to see whether librdkafka keeps connecting once it has an answer.
const LINGER: Duration = Duration::from_millis(300);
/// librdkafka's statistics period for the cross-check (ms); below [`LINGER`].
const STATS_INTERVAL_MS: &str = "100";
/// "Accepts TCP, never answers", as in `realsockets`.
const SILENT_RTT: Duration = Duration::from_secs(3600);
/// Time for the capture thread and the proxies to catch up after a client is dropped.
const SETTLE: Duration = Duration::from_millis(50);

/// What is wrong with the first seeds of a scenario.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// No fault: a baseline; `proxied` says whether the seeds are the counting proxies.
    None { proxied: bool },
    /// Mock brokers with a 1 h round trip.
    Silent,
    /// Mock brokers that are down.
    Refusing,
    /// A listener whose TCP handshake never completes.
    NoHandshake,
}

/// One scenario to measure.
struct Spec {
    /// Its name in the tables (as in `realsockets`).
    name: &'static str,
    /// What is wrong with the first seeds.
    fault: Fault,
    /// How many seeds are faulty.
    k: usize,
    /// The librdkafka figure the issue quoted for it, to compare with.
    quoted: &'static str,
}

/// What one seed is, so the tables can split "to faulty brokers" from the rest.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    /// A mock broker that answers.
    Healthy,
    /// A mock broker with a 1 h round trip.
    Silent,
    /// A mock broker that is down (connect refused).
    Refusing,
    /// The listener whose handshake never completes.
    Blackhole,
}

/// One entry of `bootstrap.servers`: its address, what it is, and its counting proxy (none for
/// refusing and blackhole seeds: a proxy would accept and so change what librdkafka sees).
struct Seed {
    /// What goes into `bootstrap.servers`.
    address: SocketAddr,
    /// What it is.
    role: Role,
    /// Its counting proxy, if it has one (then `address` is the proxy's).
    proxy: Option<Proxy>,
}

/// A built scenario. Field order is drop order: proxies go before the cluster behind them.
struct Scenario {
    /// What was built.
    spec: &'static Spec,
    /// The seed list, faulty seeds first.
    seeds: Vec<Seed>,
    /// The mock brokers' own ports: a connection there not made by a proxy is librdkafka using
    /// an address it learned from metadata.
    broker_ports: Vec<u16>,
    /// The silent brokers' own ports: librdkafka may pick one of them again once it has
    /// learned the brokers from metadata.
    silent_ports: HashSet<u16>,
    /// Kept alive for the scenario's runs.
    _blackhole: Option<Blackhole>,
    /// Kept alive for the scenario's runs (dropped last).
    _mock: Mock,
}

impl Scenario {
    /// The seed list as librdkafka gets it.
    fn bootstrap(&self) -> String {
        self.seeds.iter().map(|s| s.address.to_string()).collect::<Vec<_>>().join(",")
    }

    /// Which seed listens on `port`, if any.
    fn seed_index(&self, port: u16) -> Option<usize> {
        self.seeds.iter().position(|s| s.address.port() == port)
    }

    /// Whether seed `i` is one of the faulty ones.
    fn faulty(&self, i: usize) -> bool {
        self.seeds[i].role != Role::Healthy
    }
}

/// A consumer context that keeps librdkafka's last statistics JSON and when it arrived.
#[derive(Default)]
struct StatsContext {
    /// When the last statistics arrived, and their JSON.
    last: Mutex<Option<(SystemTime, Vec<u8>)>>,
}

impl ClientContext for StatsContext {
    /// Keeps the raw JSON; it is decoded after the run.
    fn stats_raw(&self, statistics: &[u8]) {
        *self.last.lock().unwrap() = Some((SystemTime::now(), statistics.to_vec()));
    }
}

impl ConsumerContext for StatsContext {}

/// Per-port connection attempts according to librdkafka's statistics (`connects` of every
/// broker handle, keyed by the port of its `nodename`).
fn stats_connects(json: &[u8]) -> Option<HashMap<u16, u64>> {
    let value: serde_json::Value = serde_json::from_slice(json).ok()?;
    let mut out = HashMap::new();
    for broker in value.get("brokers")?.as_object()?.values() {
        let Some(nodename) = broker.get("nodename").and_then(|n| n.as_str()) else { continue };
        let Some(port) = nodename.rsplit(':').next().and_then(|p| p.parse::<u16>().ok()) else { continue };
        let connects = broker.get("connects").and_then(|c| c.as_u64()).unwrap_or(0);
        *out.entry(port).or_insert(0) += connects;
    }
    Some(out)
}

/// What the capture saw during one run (client creation to client dropped).
#[derive(Default)]
struct Wire {
    /// Per seed: connect attempts (distinct client ports that sent a SYN) before metadata
    /// arrived, and in the whole run.
    attempts: Vec<(usize, usize)>,
    /// Per seed: TCP handshakes completed (SYN-ACK sent back), before metadata and in all.
    opened: Vec<(usize, usize)>,
    /// Per seed: attempts answered with a RST, in the whole run.
    refused: Vec<usize>,
    /// Per seed: SYN segments including retransmissions, in the whole run.
    syns: Vec<usize>,
    /// Attempts to the brokers' own addresses (learned from metadata), before and in all.
    learned: (usize, usize),
    /// Handshakes completed with the brokers' own addresses, before metadata and in all.
    learned_opened: (usize, usize),
    /// Before metadata, attempts and handshakes on the own addresses of silent brokers.
    learned_faulty: (usize, usize),
    /// Of the learned-address attempts after metadata, those to a silent broker.
    learned_silent: usize,
    /// Time since client creation of each attempt before metadata, in order, and whether it
    /// went to a faulty broker.
    timeline: Vec<(Duration, bool)>,
    /// Attempts per learned (non-seed) port up to the last statistics event, for the
    /// cross-check: librdkafka drops its bootstrap handles (and their counters) once metadata
    /// has arrived, so its last statistics only cover the handles of learned brokers.
    until_stats: HashMap<u16, u64>,
}

/// Sorts one run's segments into a [`Wire`].
fn wire(
    s: &Scenario,
    segments: &[Segment],
    upstream: &HashSet<(u16, u16)>,
    start: SystemTime,
    metadata: SystemTime,
    stats_at: Option<SystemTime>,
) -> Wire {
    let brokers: HashSet<u16> = s.broker_ports.iter().copied().collect();
    let ours = |client: u16, server: u16| {
        s.seed_index(server).is_some() || (brokers.contains(&server) && !upstream.contains(&(client, server)))
    };
    // (client port, server port) → first SYN
    let mut attempts: BTreeMap<(u16, u16), SystemTime> = BTreeMap::new();
    let mut syns: HashMap<u16, usize> = HashMap::new();
    for seg in segments.iter().filter(|seg| seg.at >= start && seg.flags & (SYN | ACK) == SYN) {
        if ours(seg.src, seg.dst) {
            let first = attempts.entry((seg.src, seg.dst)).or_insert(seg.at);
            *first = (*first).min(seg.at);
            *syns.entry(seg.dst).or_insert(0) += 1;
        }
    }
    let mut opened: HashMap<(u16, u16), SystemTime> = HashMap::new();
    let mut refused: HashSet<(u16, u16)> = HashSet::new();
    for seg in segments.iter().filter(|seg| seg.at >= start) {
        let key = (seg.dst, seg.src);
        if !attempts.contains_key(&key) {
            continue;
        }
        if seg.flags & (SYN | ACK) == SYN | ACK {
            let first = opened.entry(key).or_insert(seg.at);
            *first = (*first).min(seg.at);
        } else if seg.flags & RST != 0 && !opened.contains_key(&key) {
            refused.insert(key);
        }
    }
    let n = s.seeds.len();
    let mut w = Wire {
        attempts: vec![(0, 0); n],
        opened: vec![(0, 0); n],
        refused: vec![0; n],
        syns: vec![0; n],
        ..Wire::default()
    };
    for (&(client, server), &at) in &attempts {
        let before = at <= metadata;
        if stats_at.is_some_and(|t| at <= t) && s.seed_index(server).is_none() {
            *w.until_stats.entry(server).or_insert(0) += 1;
        }
        match s.seed_index(server) {
            Some(i) => {
                w.attempts[i].1 += 1;
                if before {
                    w.attempts[i].0 += 1;
                    w.timeline.push((at.duration_since(start).unwrap_or_default(), s.faulty(i)));
                }
                if let Some(&up) = opened.get(&(client, server)) {
                    w.opened[i].1 += 1;
                    if up <= metadata {
                        w.opened[i].0 += 1;
                    }
                }
                if refused.contains(&(client, server)) {
                    w.refused[i] += 1;
                }
            }
            None => {
                let silent = s.silent_ports.contains(&server);
                let up = opened.get(&(client, server)).copied();
                w.learned.1 += 1;
                w.learned_opened.1 += usize::from(up.is_some());
                if before {
                    w.learned.0 += 1;
                    w.timeline.push((at.duration_since(start).unwrap_or_default(), silent));
                    let up_before = up.is_some_and(|t| t <= metadata);
                    w.learned_opened.0 += usize::from(up_before);
                    if silent {
                        w.learned_faulty.0 += 1;
                        w.learned_faulty.1 += usize::from(up_before);
                    }
                } else if silent {
                    w.learned_silent += 1;
                }
            }
        }
    }
    for (i, seed) in s.seeds.iter().enumerate() {
        w.syns[i] = syns.get(&seed.address.port()).copied().unwrap_or(0);
    }
    w.timeline.sort();
    w
}

/// One measured run.
struct Run {
    /// Client creation to metadata.
    elapsed: Duration,
    /// `rd_kafka_new` alone (part of `elapsed`).
    created: Duration,
    /// Dropping the client (`rd_kafka_destroy`).
    destroy: Duration,
    /// The seed whose answer `fetch_metadata` returned; `None` when the answer came through a
    /// handle for a broker learned from metadata (see [`Run::resent`]).
    answered_by: Option<usize>,
    /// Whether the application's request had to be sent again to a learned broker: librdkafka
    /// sends its own metadata request when a connection comes up; when that answer is
    /// handled first, it drops its bootstrap handles (with the application's request in
    /// flight on one of them) and retries on a learned broker, which needs a new connection.
    resent: bool,
    /// Per seed: connections its proxy accepted during the run (`None`: not proxied).
    accepts: Vec<Option<usize>>,
    /// The capture's view, if the capture runs.
    wire: Option<Wire>,
    /// librdkafka's own count, from its last statistics.
    stats: Option<HashMap<u16, u64>>,
}

impl Run {
    /// Faulty brokers librdkafka tried before metadata arrived: seeds, and silent brokers'
    /// own addresses (capture; else its statistics, seeds only).
    fn faulty_tried(&self, s: &Scenario) -> usize {
        let learned = self.wire.as_ref().map_or(0, |w| w.learned_faulty.0);
        learned
            + (0..s.seeds.len())
                .filter(|&i| s.faulty(i))
                .filter(|&i| match (&self.wire, &self.stats) {
                    (Some(w), _) => w.attempts[i].0 > 0,
                    (None, Some(stats)) => stats.get(&s.seeds[i].address.port()).is_some_and(|&c| c > 0),
                    (None, None) => false,
                })
                .count()
    }

    /// Sums a per-seed count over all seeds and over the faulty ones.
    fn split(s: &Scenario, per_seed: impl Fn(usize) -> usize) -> (usize, usize) {
        let total = (0..s.seeds.len()).map(&per_seed).sum();
        let faulty = (0..s.seeds.len()).filter(|&i| s.faulty(i)).map(&per_seed).sum();
        (total, faulty)
    }

    /// TCP connections opened before metadata: (total, to faulty brokers), seeds and learned
    /// addresses. Without the capture, the proxies' accept counts over the whole run
    /// (refusing and blackhole seeds count 0, learned addresses are not seen).
    fn opened(&self, s: &Scenario) -> (usize, usize) {
        match &self.wire {
            Some(w) => {
                let (total, faulty) = Run::split(s, |i| w.opened[i].0);
                (total + w.learned_opened.0, faulty + w.learned_faulty.1)
            }
            None => Run::split(s, |i| self.accepts[i].unwrap_or(0)),
        }
    }

    /// Connect attempts before metadata: (total, to faulty brokers), seeds and learned
    /// addresses. Without the capture, librdkafka's statistics (whole run).
    fn attempts(&self, s: &Scenario) -> (usize, usize) {
        match (&self.wire, &self.stats) {
            (Some(w), _) => {
                let (total, faulty) = Run::split(s, |i| w.attempts[i].0);
                (total + w.learned.0, faulty + w.learned_faulty.0)
            }
            (None, Some(stats)) => {
                Run::split(s, |i| stats.get(&s.seeds[i].address.port()).copied().unwrap_or(0) as usize)
            }
            (None, None) => (0, 0),
        }
    }

    /// Attempts after metadata arrived, until the client was dropped (seeds and learned
    /// addresses); `None` without the capture.
    fn after(&self) -> Option<usize> {
        let w = self.wire.as_ref()?;
        Some(w.attempts.iter().map(|(before, all)| all - before).sum::<usize>() + w.learned.1 - w.learned.0)
    }

    /// Whether every proxy accepted exactly the handshakes the capture saw.
    fn proxies_agree(&self) -> Option<bool> {
        let w = self.wire.as_ref()?;
        Some(self.accepts.iter().zip(&w.opened).all(|(a, (_, opened))| a.is_none_or(|a| a == *opened)))
    }

    /// Whether librdkafka's `connects` for its learned brokers equal the capture's attempts,
    /// port by port; `None` when the seeds are the brokers' own addresses (bootstrap and
    /// learned handles then share ports and cannot be told apart).
    fn stats_agree(&self, s: &Scenario) -> Option<bool> {
        if s.seeds.iter().all(|seed| seed.proxy.is_none() && seed.role == Role::Healthy) {
            return None;
        }
        let (w, stats) = (self.wire.as_ref()?, self.stats.as_ref()?);
        let ports: HashSet<u16> = stats.keys().chain(w.until_stats.keys()).copied().collect();
        Some(ports.iter().all(|p| stats.get(p).copied().unwrap_or(0) == w.until_stats.get(p).copied().unwrap_or(0)))
    }
}

/// One run: a fresh client, metadata, a short linger for statistics, the client dropped.
fn run(s: &Scenario, capture: Option<&Capture>, upstream: &UpstreamLog) -> Res<Run> {
    upstream.0.lock().unwrap().clear();
    if let Some(c) = capture {
        c.segments.lock().unwrap().clear();
    }
    let accepts_before: Vec<Option<usize>> =
        s.seeds.iter().map(|seed| seed.proxy.as_ref().map(|p| p.accepted.load(Ordering::SeqCst))).collect();

    let wall_start = SystemTime::now();
    let started = Instant::now();
    let consumer: BaseConsumer<StatsContext> = ClientConfig::new()
        .set("bootstrap.servers", s.bootstrap())
        .set("statistics.interval.ms", STATS_INTERVAL_MS)
        .create_with_context(StatsContext::default())?;
    let created = started.elapsed();
    let metadata = consumer.fetch_metadata(None, METADATA_TIMEOUT)?;
    let elapsed = started.elapsed();
    let wall_metadata = SystemTime::now();

    // The mock leaves brokers that are down out of its metadata.
    let listed = if s.spec.fault == Fault::Refusing { BROKERS as usize - s.spec.k } else { BROKERS as usize };
    if metadata.brokers().len() != listed {
        return Err(format!("{}: metadata lists {} brokers", s.spec.name, metadata.brokers().len()).into());
    }
    // "127.0.0.1:PORT/bootstrap" (a seed) or "127.0.0.1:PORT/ID" (a learned broker).
    let answered = metadata.orig_broker_name().to_owned();
    let port = answered.split(['/', ':']).nth(1).and_then(|p| p.parse::<u16>().ok()).unwrap_or(0);
    let resent = !answered.ends_with("/bootstrap");
    let answered_by = if resent { None } else { s.seed_index(port) };
    let known = answered_by.is_some() || (resent && s.broker_ports.contains(&port));
    if !known || answered_by.is_some_and(|i| s.faulty(i)) || s.silent_ports.contains(&port) {
        return Err(format!("{}: answer from {answered}, not a healthy broker", s.spec.name).into());
    }
    drop(metadata);

    let linger_end = Instant::now() + LINGER;
    while Instant::now() < linger_end {
        let _ = consumer.poll(Duration::from_millis(10));
    }
    let last_stats = consumer.context().last.lock().unwrap().take();
    let destroying = Instant::now();
    drop(consumer);
    let destroy = destroying.elapsed();
    std::thread::sleep(SETTLE);

    let accepts = s
        .seeds
        .iter()
        .zip(&accepts_before)
        .map(|(seed, before)| Some(seed.proxy.as_ref()?.accepted.load(Ordering::SeqCst) - (*before)?))
        .collect();
    let stats_at = last_stats.as_ref().map(|(at, _)| *at);
    let wire = capture.map(|c| {
        let segments = c.segments.lock().unwrap().clone();
        let upstream = upstream.0.lock().unwrap().clone();
        wire(s, &segments, &upstream, wall_start, wall_metadata, stats_at)
    });
    let stats = last_stats.and_then(|(_, json)| stats_connects(&json));
    Ok(Run { elapsed, created, destroy, answered_by, resent, accepts, wire, stats })
}

/// Every broker's node id and address, in node-id order, from librdkafka's own metadata.
fn discover(bootstrap: &str) -> Res<Vec<(i32, SocketAddr)>> {
    let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let metadata = consumer.fetch_metadata(None, Duration::from_secs(10))?;
    let mut brokers = Vec::new();
    for b in metadata.brokers() {
        let address = (b.host(), b.port() as u16)
            .to_socket_addrs()?
            .find(SocketAddr::is_ipv4)
            .ok_or_else(|| format!("broker {} at {}: no IPv4 address", b.id(), b.host()))?;
        brokers.push((b.id(), address));
    }
    brokers.sort();
    Ok(brokers)
}

/// Builds a scenario as `realsockets` does: a fresh cluster, the faults on the lowest node
/// ids, the faulty seeds first; healthy and silent seeds behind counting proxies.
fn scenario(rt: &Runtime, spec: &'static Spec, upstream: &Arc<UpstreamLog>) -> Res<Scenario> {
    let mock = MockCluster::new(BROKERS)?;
    mock.create_topic("demo", 6, 3)?;
    let brokers = discover(&mock.bootstrap_servers())?;
    let faulty = match spec.fault {
        Fault::Silent | Fault::Refusing => spec.k,
        Fault::None { .. } | Fault::NoHandshake => 0,
    };
    for (id, _) in brokers.iter().take(faulty) {
        match spec.fault {
            Fault::Silent => mock.broker_round_trip_time(*id, SILENT_RTT)?,
            Fault::Refusing => mock.broker_down(*id)?,
            _ => {}
        }
    }
    let mut seeds = Vec::new();
    let mut hole = None;
    if spec.fault == Fault::NoHandshake {
        let h = rt.block_on(blackhole())?;
        seeds.push(Seed { address: h.address, role: Role::Blackhole, proxy: None });
        hole = Some(h);
    }
    let count = if hole.is_some() { BROKERS as usize - 1 } else { BROKERS as usize };
    for (i, (_, address)) in brokers.iter().enumerate().take(count) {
        let role = match spec.fault {
            Fault::Silent if i < faulty => Role::Silent,
            Fault::Refusing if i < faulty => Role::Refusing,
            _ => Role::Healthy,
        };
        let proxied = role != Role::Refusing && spec.fault != (Fault::None { proxied: false });
        let proxy = if proxied { Some(rt.block_on(proxy(*address, Arc::clone(upstream)))?) } else { None };
        let address = proxy.as_ref().map_or(*address, |p| p.address);
        seeds.push(Seed { address, role, proxy });
    }
    let broker_ports = brokers.iter().map(|(_, a)| a.port()).collect();
    let silent_ports = match spec.fault {
        Fault::Silent => brokers.iter().take(faulty).map(|(_, a)| a.port()).collect(),
        _ => HashSet::new(),
    };
    Ok(Scenario { spec, seeds, broker_ports, silent_ports, _blackhole: hole, _mock: mock })
}

/// The scenarios of `realsockets`, plus two baselines (no fault; with and without proxies).
static SPECS: [Spec; 7] = [
    Spec { name: "no fault, seeds direct", fault: Fault::None { proxied: false }, k: 0, quoted: "—" },
    Spec { name: "no fault, via proxies", fault: Fault::None { proxied: true }, k: 0, quoted: "—" },
    Spec { name: "silent × 1", fault: Fault::Silent, k: 1, quoted: "≈60 ms" },
    Spec { name: "silent × 3", fault: Fault::Silent, k: 3, quoted: "110–160 ms" },
    Spec { name: "refusing × 1", fault: Fault::Refusing, k: 1, quoted: "—" },
    Spec { name: "refusing × 2", fault: Fault::Refusing, k: 2, quoted: "≈110 ms" },
    Spec { name: "no handshake × 1", fault: Fault::NoHandshake, k: 1, quoted: "—" },
];

/// "a" or "a–b" for a range of counts.
fn span(values: impl IntoIterator<Item = usize>) -> String {
    let v: Vec<usize> = values.into_iter().collect();
    match (v.iter().min(), v.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
        (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
        _ => "—".to_owned(),
    }
}

/// "median ms | min–max ms" table cells.
fn times(runs: &[&Run]) -> String {
    let t: Vec<Duration> = runs.iter().map(|r| r.elapsed).collect();
    format!("{:.1} ms | {:.1}–{:.1} ms", ms(median(&t)), ms(*t.iter().min().unwrap()), ms(*t.iter().max().unwrap()))
}

/// "total / to faulty" cells, each a range over the runs.
fn pair(runs: &[&Run], f: impl Fn(&Run) -> (usize, usize)) -> String {
    format!("{} / {}", span(runs.iter().map(|r| f(r).0)), span(runs.iter().map(|r| f(r).1)))
}

/// "n/m" of the runs where a check holds, or "n/a".
fn agreement(runs: &[Run], f: impl Fn(&Run) -> Option<bool>) -> String {
    let checked: Vec<bool> = runs.iter().filter_map(f).collect();
    if checked.is_empty() {
        "n/a".to_owned()
    } else {
        format!("{}/{}", checked.iter().filter(|&&ok| ok).count(), checked.len())
    }
}

/// How a seed list looks, for the scenario's heading.
fn describe(s: &Scenario) -> String {
    s.seeds
        .iter()
        .map(|seed| {
            let role = match seed.role {
                Role::Healthy => "healthy",
                Role::Silent => "silent",
                Role::Refusing => "refusing",
                Role::Blackhole => "no-handshake",
            };
            if seed.proxy.is_some() {
                format!("{role} (proxied)")
            } else {
                role.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One line of the summary table at the end.
struct Summary {
    /// The scenario.
    name: &'static str,
    /// The issue's figure for it.
    quoted: &'static str,
    /// The measured cells.
    cells: String,
}

/// Prints a scenario's table (all runs, then grouped by how many faulty seeds librdkafka tried
/// before its answer) and the notes below it; returns its summary line.
fn report(s: &Scenario, runs: &[Run]) -> Summary {
    println!("### {}\n", s.spec.name);
    println!("Seeds, in `bootstrap.servers` order: {}.\n", describe(s));
    println!("| runs | faulty brokers tried | request re-sent to a learned broker | median | min–max | TCP connections opened before metadata (total / to faulty) | connect attempts before metadata (total / to faulty) |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let all: Vec<&Run> = runs.iter().collect();
    let row = |label: String, group: &[&Run]| {
        let resent = group.iter().filter(|r| r.resent).count();
        let resent = match resent {
            0 => "no".to_owned(),
            n if n == group.len() => "yes".to_owned(),
            n => format!("{n}/{}", group.len()),
        };
        println!(
            "| {label} | {} | {resent} | {} | {} | {} |",
            span(group.iter().map(|r| r.faulty_tried(s))),
            times(group),
            pair(group, |r| r.opened(s)),
            pair(group, |r| r.attempts(s)),
        );
    };
    row(format!("all {}", runs.len()), &all);
    let mut groups: BTreeMap<(usize, bool), Vec<&Run>> = BTreeMap::new();
    for r in runs {
        groups.entry((r.faulty_tried(s), r.resent)).or_default().push(r);
    }
    if groups.len() > 1 {
        for group in groups.values() {
            row(group.len().to_string(), group);
        }
    }
    println!();

    let first_faulty = runs
        .iter()
        .filter(|r| r.wire.as_ref().and_then(|w| w.timeline.first()).is_some_and(|&(_, faulty)| faulty))
        .count();
    let first_at: Vec<Duration> =
        runs.iter().filter_map(|r| r.wire.as_ref().and_then(|w| w.timeline.first()).map(|&(t, _)| t)).collect();
    let mut gaps: Vec<Duration> = Vec::new();
    for r in runs {
        if let Some(w) = &r.wire {
            gaps.extend(w.timeline.windows(2).map(|p| p[1].0.saturating_sub(p[0].0)));
        }
    }
    let created: Vec<Duration> = runs.iter().map(|r| r.created).collect();
    let destroy: Vec<Duration> = runs.iter().map(|r| r.destroy).collect();
    let mut answered: BTreeMap<String, usize> = BTreeMap::new();
    for r in runs {
        let by = r.answered_by.map_or("a learned broker".to_owned(), |i| format!("seed #{}", i + 1));
        *answered.entry(by).or_insert(0) += 1;
    }
    if !first_at.is_empty() {
        println!(
            "* First connect attempt {:.1} ms after client creation began (median; `rd_kafka_new` itself took {:.1} ms); it went to a faulty seed in {first_faulty}/{} runs.",
            ms(median(&first_at)),
            ms(median(&created)),
            runs.len()
        );
    }
    if !gaps.is_empty() {
        println!(
            "* Spacing between successive connect attempts before metadata: median {:.1} ms, min–max {:.1}–{:.1} ms ({} gaps).",
            ms(median(&gaps)),
            ms(*gaps.iter().min().unwrap()),
            ms(*gaps.iter().max().unwrap()),
            gaps.len()
        );
    }
    let faulty_idx: Vec<usize> = (0..s.seeds.len()).filter(|&i| s.faulty(i)).collect();
    if !faulty_idx.is_empty() && runs.iter().all(|r| r.wire.is_some()) {
        let per_run = |f: &dyn Fn(&Wire, usize) -> usize| {
            span(runs.iter().map(|r| faulty_idx.iter().map(|&i| f(r.wire.as_ref().unwrap(), i)).sum()))
        };
        println!(
            "* Faulty seeds over the whole run (until the client was dropped): attempts {}, handshakes completed {}, refused (RST) {}, SYN segments incl. retransmissions {}.",
            per_run(&|w, i| w.attempts[i].1),
            per_run(&|w, i| w.opened[i].1),
            per_run(&|w, i| w.refused[i]),
            per_run(&|w, i| w.syns[i]),
        );
    }
    if runs.iter().all(|r| r.wire.is_some()) {
        println!(
            "* After metadata, in the {:.0} ms the client was kept: {} further connect attempts ({} of them to addresses learned from metadata, {} to a silent broker's own address).",
            ms(LINGER),
            span(runs.iter().filter_map(Run::after)),
            span(runs.iter().map(|r| r.wire.as_ref().map_or(0, |w| w.learned.1 - w.learned.0))),
            span(runs.iter().map(|r| r.wire.as_ref().map_or(0, |w| w.learned_silent))),
        );
    }
    println!(
        "* Metadata answered by (runs): {}; client drop (`rd_kafka_destroy`): median {:.1} ms, max {:.1} ms.",
        answered.iter().map(|(by, n)| format!("{by}: {n}")).collect::<Vec<_>>().join(", "),
        ms(median(&destroy)),
        ms(*destroy.iter().max().unwrap()),
    );
    println!(
        "* Cross-checks: proxy accepts = SYN-ACKs captured in {} runs; librdkafka's final statistics (`connects` of the learned-broker handles) = attempts captured on those ports in {} runs.\n",
        agreement(runs, Run::proxies_agree),
        agreement(runs, |r| r.stats_agree(s)),
    );
    Summary {
        name: s.spec.name,
        quoted: s.spec.quoted,
        cells: format!(
            "{} | {:.1} ms | {} | {} | {}/{} | {}/{} | {}",
            times(&all),
            ms(median(&runs.iter().map(|r| r.elapsed - r.created).collect::<Vec<_>>())),
            pair(&all, |r| r.opened(s)),
            pair(&all, |r| r.attempts(s)),
            runs.iter().filter(|r| r.faulty_tried(s) > 0).count(),
            runs.len(),
            runs.iter().filter(|r| r.resent).count(),
            runs.len(),
            if runs.iter().all(|r| r.wire.is_some()) {
                span(runs.iter().filter_map(Run::after))
            } else {
                "n/a".to_owned()
            },
        ),
    }
}

/// librdkafka's value of a configuration property on a fresh configuration (its default).
fn default_of(name: &str) -> String {
    let Ok(key) = CString::new(name) else { return "?".to_owned() };
    let mut buffer = vec![0u8; 512];
    let mut size = buffer.len();
    // SAFETY: a fresh conf object, a NUL-terminated key, a buffer of `size` bytes; the conf is
    // destroyed right after.
    unsafe {
        let conf = rdsys::rd_kafka_conf_new();
        let rc = rdsys::rd_kafka_conf_get(conf, key.as_ptr(), buffer.as_mut_ptr().cast(), &mut size);
        rdsys::rd_kafka_conf_destroy(conf);
        if rc != rdsys::rd_kafka_conf_res_t::RD_KAFKA_CONF_OK {
            return "?".to_owned();
        }
    }
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

/// The 1-minute, 5-minute and 15-minute load averages, to say how busy the machine was.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned())
}

/// Measures every scenario and prints the markdown for `docs/performance/librdkafka.md`.
fn main() -> Res<()> {
    let runs_per_scenario = match std::env::args().nth(1) {
        Some(arg) => arg.parse::<usize>().map_err(|e| format!("RUNS: {e}"))?.max(1),
        None => RUNS,
    };
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let (_, version) = rdkafka::util::get_rdkafka_version();
    println!(
        "librdkafka {version} (via `rdkafka`), 6-broker mock clusters on loopback, {runs_per_scenario} runs per scenario, \
         each a fresh `BaseConsumer` and `fetch_metadata(None, 30 s)`. Load average at start: {}.\n",
        loadavg()
    );

    println!("### librdkafka defaults in effect (read from a fresh configuration)\n");
    println!("| property | value |\n|---|---:|");
    for name in [
        "enable.sparse.connections",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "socket.connection.setup.timeout.ms",
        "api.version.request.timeout.ms",
        "socket.timeout.ms",
        "socket.nagle.disable",
        "metadata.recovery.strategy",
    ] {
        println!("| `{name}` | {} |", default_of(name));
    }
    let backoff: i64 = default_of("reconnect.backoff.ms").parse().unwrap_or(100);
    println!(
        "| sparse connect interval = clamp(`reconnect.backoff.ms` / 2, 11, 1000) (derived, rdkafka_conf.c) | {} |\n",
        (backoff / 2).clamp(11, 1000)
    );

    let capture = match Capture::start() {
        Ok(c) => match c.self_test() {
            Ok(()) => Some(c),
            Err(e) => {
                println!("Packet capture unusable ({e}): counts come from the proxies and librdkafka's statistics.\n");
                None
            }
        },
        Err(e) => {
            println!("No packet capture ({e}; needs CAP_NET_RAW): counts come from the proxies and librdkafka's statistics.\n");
            None
        }
    };
    if let Some(c) = &capture {
        let _ = c.statistics(); // reset the kernel's counters
        println!("Packet capture on `lo`: self-test passed (a loopback connect showed its SYN and SYN-ACK).\n");
    }

    let upstream = Arc::new(UpstreamLog::default());
    let mut summaries = Vec::new();
    for spec in &SPECS {
        let s = scenario(&rt, spec, &upstream)?;
        let mut runs = Vec::new();
        for _ in 0..runs_per_scenario {
            runs.push(run(&s, capture.as_deref(), &upstream)?);
        }
        summaries.push(report(&s, &runs));
        drop(s);
    }

    println!("### Summary\n");
    println!(
        "| scenario | issue's figure | median | min–max | `fetch_metadata` call alone, median | TCP connections opened before metadata (total / to faulty) | connect attempts before metadata (total / to faulty) | runs that tried a faulty broker | runs whose request was re-sent to a learned broker | connect attempts in the {:.0} ms after metadata |",
        ms(LINGER)
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for summary in &summaries {
        println!("| {} | {} | {} |", summary.name, summary.quoted, summary.cells);
    }
    if let Some(c) = &capture {
        c.stop.store(true, Ordering::Relaxed);
        match c.statistics() {
            Some(st) => println!(
                "\nPacket capture: {} SYN/RST segments kept by the filter (all of loopback, this and other processes), {} dropped.",
                st.packets, st.drops
            ),
            None => println!("\nPacket capture: drop count unavailable."),
        }
    }
    println!("Load average at end: {}. Total run time: {:.0} s.", loadavg(), started.elapsed().as_secs_f64());
    Ok(())
}
