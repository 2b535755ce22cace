//! The fleet's event loop: one priority queue of timed events for every client and broker.
//!
//! Why one queue: clients interact only through the brokers' queues, so a single totally
//! ordered stream of events (time, then insertion order) is both the simplest faithful model
//! and deterministic. Each client is a real [`Cluster`]; the engine carries out its
//! `Connect`/`Cancel` events against simulated brokers and feeds the results back, exactly as
//! an adapter would.
//!
//! By concern: this file holds the engine's state; [`warm`] builds and warms a fleet and
//! turns a measured run into a [`ScenarioResult`](super::ScenarioResult); [`events`] is the
//! event loop that moves clients and brokers through time.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Ordering;
use core::time::Duration;

mod events;
mod machine;
mod placement;
mod warm;

use super::FleetConfig;
use crate::Scenario;
use stagger::{AttemptId, BrokerIndex, Cluster, ClusterEvent, Metadata, RefreshCause, Rng};

/// Upper bound on events one phase may process: a core livelock must end the run, not hang it.
const MAX_EVENTS: u64 = 400_000_000;

/// Periodic refreshes are switched off (well, pushed a day away): the simulation asks for
/// every refresh itself, so what is measured is exactly the scenario's requests.
const REFRESH_INTERVAL: Duration = Duration::from_secs(24 * 3600);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Healthy,
    Hung,
    Dead,
}

#[derive(Clone, Copy, Debug)]
struct Broker {
    mode: Mode,
    /// When the broker finishes the last request queued so far (µs).
    free_at: u64,
    /// When each network thread finishes the work queued on it so far (µs), with
    /// [`FleetConfig::network_threads`]; unused without.
    network_free_at: [u64; NETWORK_THREADS],
    /// When it would finish if every request the oracle has sent it, including those
    /// still on the wire, were queued already: what the all-knowing oracle balances on.
    promised_until: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    /// The application asks client `client` for fresh metadata.
    Request { client: u32, measured: bool },
    /// The client's core asked to be woken now (stale unless `gen` is current).
    Timer { client: u32, gen: u32 },
    /// The TCP handshake of `attempt` completed; the client sends ApiVersions (or, on a TLS
    /// listener, its TLS ClientHello).
    Connected { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// The TLS ClientHello reaches the broker.
    TlsArrive { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// The broker's TLS handshake answer reaches the client: the broker process runs (the
    /// core hears `FirstFrame`); the client sends ApiVersions.
    Secured { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// `attempt` starts on the connection kept from an earlier refresh: no handshake, no
    /// ApiVersions and no SASL (the connection agreed its versions and authenticated
    /// already): Metadata alone, whose answer is the broker's first.
    Reused { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// A new connection's ApiVersions request reaches the broker.
    ApiArrive { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// The ApiVersions answer reaches the client, which sends the Metadata request (or, on a
    /// SASL listener's new connection, starts the SASL exchange).
    ApiAnswer { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// The SASL exchange's first request reaches the broker.
    SaslArrive { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// The SASL exchange's last answer reaches the client, which sends the Metadata request.
    Authenticated { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// The Metadata request reaches the broker.
    MetaArrive { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// The broker's metadata answer reaches the client.
    Response { client: u32, attempt: AttemptId },
    /// The broker refused `attempt`'s connection.
    Refused { client: u32, attempt: AttemptId },
    /// A slice of work on shared core `core` ends ([`machine`]).
    Slice { core: u16 },
    /// A broker's network thread has read `attempt`'s request; it joins the request queue.
    Read { client: u32, attempt: AttemptId, broker: u16, draw: Draw, read: Read },
}

/// The random parts of one attempt: its connection's round trip and the broker time its
/// request takes (both µs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Draw {
    rtt: u32,
    service: u32,
    /// The machine's pause before the client reads the Metadata answer (µs; mostly 0).
    host: u32,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    at: u64,
    seq: u64,
    ev: Ev,
    /// Whether the client's work on `ev` ([`FleetConfig::client_work`]) is done: the event
    /// first queues for a core, then comes back paid.
    paid: bool,
}

/// The most network threads a broker has ([`FleetConfig::MAX_NETWORK_THREADS`]).
const NETWORK_THREADS: usize = FleetConfig::MAX_NETWORK_THREADS as usize;

/// Which of a broker's queues a piece of work waits in ([`FleetConfig::network_threads`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    /// The request threads: Metadata, and ApiVersions on an authenticated connection (and
    /// everything, without network threads).
    Requests,
    /// Network thread `k`: accepting, the TLS handshake, the SASL exchange and its
    /// ApiVersions, and reading each request, for the connections pinned to it.
    Network(u8),
    /// The process's work beside the request path ([`FleetConfig::broker_background`]),
    /// with shared cores only: no answer waits for it.
    Background,
}

/// What a network thread read, for the request threads to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// A new connection's ApiVersions.
    ApiVersions,
    Metadata,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed, so `BinaryHeap` (a max-heap) pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Clone, Copy, Debug)]
struct Measured {
    requested_at: u64,
    epoch: u32,
    done: bool,
}

/// A loser draining: `(attempt, broker, until µs, what it is kept as)`.
type Draining = (AttemptId, BrokerIndex, u64, stagger::Drain);

#[derive(Clone, Debug)]
struct Client {
    /// `None` for an oracle client.
    cluster: Option<Cluster>,
    /// Attempts started and neither cancelled nor answered.
    live: Vec<AttemptId>,
    /// Attempts whose Metadata request is sent and whose answer has not come.
    awaiting_metadata: Vec<AttemptId>,
    /// Losers finishing their exchange to offer their connection to be kept, as the session
    /// drains them: with the broker (the book's index) each goes to, when the drain gives up
    /// (µs), and what it is offered as when its answer comes ([`Cluster::keep_drained`]).
    draining: Vec<Draining>,
    timer_at: Option<u64>,
    timer_gen: u32,
    warm_left: u32,
    /// Whether the client has derived its SCRAM keys ([`crate::fleet::ClientWork::key_derivation`]).
    keys_derived: bool,
    measured: Option<Measured>,
    /// Attempts drawn so far in the measurement (picks each attempt's random stream).
    draws: u32,
    /// Why the measured refresh runs, and the broker named (the storm's clients know).
    cause: (RefreshCause, Option<BrokerIndex>),
}

/// Counters of the measurement phase.
#[derive(Clone, Debug, Default)]
struct Tally {
    t0: u64,
    arrivals: Vec<Vec<u32>>,
    /// Per broker, each piece of work it did during the measurement: when it started (µs
    /// from `t0`) and how long it took (µs).
    work: Vec<Vec<(u32, u32)>>,
    attempts: u64,
    reached: u64,
    reused: u64,
    tls_handshakes: u64,
    api_versions: u64,
    requests_sent: u64,
    refused: u64,
    cancelled_before_handshake: u64,
    hedges: u64,
    core_started: u64,
    spares_before: u64,
    times: Vec<u64>,
    failed: u32,
    outstanding: u32,
}

#[derive(Clone, Debug)]
struct Engine {
    brokers: Vec<Broker>,
    clients: Vec<Client>,
    heap: BinaryHeap<Entry>,
    seq: u64,
    rng: Rng,
    seed: u64,
    metadata: Metadata,
    now: u64,
    horizon: u64,
    rtt_us: f64,
    service_us: f64,
    /// Broker time of an ApiVersions request (µs).
    api_us: u32,
    /// Broker time of accepting (and later closing) a connection (µs).
    accept_us: u32,
    /// Broker time of a TLS handshake (µs), `None` without TLS.
    tls_us: Option<u32>,
    /// Round trips and broker time (µs) of the SASL exchange (0 round trips: no SASL).
    sasl_round_trips: u32,
    sasl_us: u32,
    /// Latencies beside the work (µs): Metadata, ApiVersions, TLS, SASL ([`Latency`](super::Latency)).
    latency_us: [u64; 4],
    /// [`crate::fleet::HostDelay`]: the share of answers delayed and their mean delay (µs).
    host_delay: (f64, f64),
    /// The cores every broker and client shares; `None` when each has cores of its own.
    machine: Option<machine::Machine>,
    /// [`FleetConfig::network_threads`].
    network_threads: u8,
    /// [`FleetConfig::client_work`]: per message, beside it per TLS handshake, per request
    /// relayed, and a client's first SASL exchange's key derivation (µs).
    client_work_us: (u32, u32, u32, u32),
    /// [`FleetConfig::broker_background`]: per accept, per TLS handshake, per request (µs).
    background_us: (u32, u32, u32),
    /// [`FleetConfig::count_reads`].
    count_reads: bool,
    warm_spacing_us: u64,
    tally: Option<Tally>,
    scratch: Vec<ClusterEvent>,
    events: u64,
    overflow: bool,
}

/// A fleet after its calm warm-up, ready to run scenarios.
///
/// Why separate from running: the warm-up (up to 64 refreshes per client) costs more than a
/// scenario, and every scenario starts from the same warmed state, so one warm-up per
/// strategy serves all four scenarios (each run works on a copy).
#[derive(Clone, Debug)]
pub struct WarmFleet {
    config: FleetConfig,
    strategy: crate::fleet::Strategy,
    strategy_name: alloc::string::String,
    engine: Engine,
}

impl Engine {
    /// Multiplies by `factor` what a refresh on a kept connection pays: the round trip, the
    /// ApiVersions and Metadata work and their latencies, the clients' and forwarders' work
    /// per message ([`FleetConfig::client_work`](super::FleetConfig::client_work)), and the pauses
    /// ([`FleetConfig::hung_slowdown`](super::FleetConfig::hung_slowdown), measured on such
    /// refreshes); a new connection's accept, TLS and SASL costs stay. A factor that is not a
    /// positive finite number changes nothing.
    fn slow_down(&mut self, factor: f64) {
        if !(factor.is_finite() && factor > 0.0) || factor == 1.0 {
            return;
        }
        self.rtt_us *= factor;
        self.service_us *= factor;
        self.api_us = (f64::from(self.api_us) * factor).min(f64::from(u32::MAX)) as u32;
        for us in &mut self.latency_us[..2] {
            *us = (*us as f64 * factor) as u64;
        }
        self.host_delay.1 *= factor;
        let scale = |us: &mut u32| *us = (f64::from(*us) * factor).min(f64::from(u32::MAX)) as u32;
        scale(&mut self.client_work_us.0);
        scale(&mut self.client_work_us.2);
    }
}

/// Mixes a seed with a stream number (SplitMix64's finaliser), for independent streams.
fn mix(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What every healthy broker answers: the standard simulated cluster's brokers, no topics.
///
/// Why no topics: a client learns brokers from metadata, which is all the fleet measures;
/// topic lists would only add allocations to each of the millions of simulated answers.
fn fleet_metadata(brokers: usize) -> Metadata {
    Metadata { topics: Vec::new(), ..Scenario::standard_metadata(brokers) }
}

/// `broker-i:9092` → `i` (the simulated cluster's addresses), without allocating.
fn broker_of(address: &str) -> Option<usize> {
    address.strip_prefix("broker-")?.strip_suffix(":9092")?.parse().ok()
}
