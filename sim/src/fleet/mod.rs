//! The fleet simulation: many clients, one cluster whose brokers queue requests.
//!
//! Why it exists: a single refresh against idle brokers cannot show the cost that matters
//! most on a big cluster — load. Here `C` clients (default 10,000), each running its own core
//! [`Cluster`](stagger::Cluster) with its own seed, share `B` brokers (default 30). Every
//! broker serves metadata requests one at a time from a FIFO queue, so a burst of requests
//! raises everyone's latency, and extra (hedged) attempts cost real capacity. The same
//! machinery runs an **oracle** client that knows which brokers are healthy, is connected to
//! every one, and asks the least loaded one: the yardstick for "nearly as fast as an
//! all-knowing client".
//!
//! Everything is virtual time and deterministic (`no_std` + `alloc`, one seeded PRNG, a
//! totally ordered event queue): the same [`FleetConfig`] gives the same [`ScenarioResult`]s,
//! byte for byte, which is what lets `docs/performance/` be regenerated and diffed.
//!
//! The model, and why each piece is there:
//!
//! * **Network**: every connection has a round trip drawn from `rtt · [0.8, 1.2]`. The TCP
//!   handshake costs one round trip (`Connected` arrives then, or the refusal of a dead
//!   broker). Then the client does what the core's Kafka exchange does: ApiVersions, and once
//!   that is answered, Metadata — one round trip each, plus queueing and broker time. A
//!   healthy plaintext answer on a new connection therefore takes three round trips plus two
//!   waits in the broker's queue.
//!   The ApiVersions answer is reported to the core as `Input::FirstFrame` — the signal the
//!   adaptive stagger uses to tell a hung broker (silent) from a busy one (answering).
//!   An attempt the core runs on a kept connection ([`stagger::ClusterEvent::Reuse`]) skips
//!   the handshake (and TLS and SASL), not ApiVersions, whose answer tells the core the
//!   broker is alive, as the adapters' exchange does: two round trips plus two waits.
//! * **Brokers**: a healthy broker serves its work first come, first served, from one queue:
//!   a Metadata request takes an exponentially distributed time of mean
//!   [`FleetConfig::service_time`] (an M/M/1 queue); an ApiVersions request takes
//!   [`FleetConfig::api_versions_time`], and every accepted connection
//!   [`FleetConfig::accept_time`] (accepting it and, later, closing it), whether or not its
//!   client still wants it. Both are fixed: their cost does not grow with the metadata. Work
//!   is served even if its client has meanwhile given up — Kafka reads a request off the
//!   socket and queues it before the client can take it back — so wasted attempts cost
//!   capacity, as on a real cluster. A **hung** broker accepts connections and never answers
//!   anything (not even ApiVersions or a TLS handshake); a **dead** one refuses connections.
//!   Each kind of request may also carry a [`Latency`]: time after its work before the
//!   answer leaves, which does not hold the queue (a real broker's hand-offs between
//!   threads). With [`FleetConfig::network_threads`], a broker runs each connection's
//!   accept, TLS handshake and SASL exchange, and reads its requests, on one of that many
//!   queues of its own, beside the queue of requests, as Kafka's network threads do.
//! * **A shared machine** (for a lab, not a fleet): with [`FleetConfig::shared_cores`], the
//!   brokers' threads and the clients' threads doing their own work ([`ClientWork`]) take
//!   turns on that many cores, in slices, the thread that has run least first
//!   (`engine/machine.rs`), as on one machine running brokers and clients. There a broker's
//!   network threads work in poll iterations, as Kafka's selector loop does, and its
//!   process's work beside the request path (the JIT compiler, the collector:
//!   [`BrokerBackground`]) takes its turns too. `fleet_fit`'s machine fit models the lab of
//!   `fleet_real` this way.
//! * **Spares**: a client whose loser owed only its Metadata answer when the race ended lets
//!   that answer come and offers the connection to its core
//!   ([`Cluster::keep_spare`](stagger::Cluster::keep_spare)), as the session does; a
//!   bootstrap's first attempt that connected and was outrun finishes its exchange and is
//!   offered as the client's first choice
//!   ([`Cluster::keep_first_choice`](stagger::Cluster::keep_first_choice)).
//! * **Security** ([`Security`]): on a TLS listener a new connection's handshake costs one
//!   round trip and [`Security::tls_time`] of broker work before ApiVersions, and the core
//!   hears the broker alive (`Input::FirstFrame`) when the handshake completes, as the
//!   tokio adapter reports it (a stopped broker's kernel accepts TCP, but only the broker
//!   process completes TLS). SASL adds [`Security::sasl_round_trips`] and
//!   [`Security::sasl_time`] of broker work between ApiVersions and Metadata.
//!
//! The prices are what `lab/src/bin/fleet_real` measured on real Kafka 4.4; how far the
//! model is from that cluster is `docs/performance/fleet-vs-real.md`.
//! * **Requests** counted for load are Metadata requests, the expensive ones: an attempt the
//!   core cancels before its ApiVersions answer never sends one.
//! * **Clients**: each is a long-lived core [`Cluster`](stagger::Cluster) given three seed
//!   brokers; it learns the other brokers from metadata. Before the measurement, a calm
//!   warm-up lets each client refresh [`FleetConfig::warmup_refreshes`] times (one every
//!   [`FleetConfig::warmup_spacing`] on average), so it holds metadata, a kept connection to
//!   the broker that last answered, a full response-time window for the adaptive stagger,
//!   and whatever hedge tokens its policy left it. Then the scenario starts and every client
//!   refreshes once, at a random time in the scenario's request window.
//!
//! See [`FleetScenario`] for the four scenarios and [`Strategy`] for what is compared.

mod engine;
mod math;
mod render;
mod stats;

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;
use serde::{Deserialize, Serialize};

use stagger::{ClusterConfig, RefreshConfig};

pub use engine::WarmFleet;
pub use render::{render_markdown, render_svg};
pub use stats::{check_targets, Percentiles, Target};

/// Knobs of the simulated fleet and cluster. `Default` is the documented setting.
///
/// Why these defaults: 10,000 clients on 30 brokers is the "large cluster" of the seed
/// discussion's load worry; a 1 ms round trip is a datacenter network; 1 ms of broker time
/// per metadata request (1,000 answers per second per broker) is a broker serving a
/// metadata response of a few thousand partitions — enough that a failover storm is felt, as
/// the issue asks ("bursts of requests raise everyone's latency").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FleetConfig {
    /// Number of clients (default 10,000).
    pub clients: u32,
    /// Number of brokers (default 30).
    pub brokers: u32,
    /// Seed of every random draw of the simulation (default 1). Client `i`'s core seed is
    /// derived from it, so clients do not jitter in lockstep.
    pub seed: u64,
    /// Mean network round trip (default 1 ms); each connection draws `rtt · [0.8, 1.2]`.
    pub rtt: Duration,
    /// Mean broker time per metadata request, exponentially distributed (default 1 ms).
    pub service_time: Duration,
    /// Broker time per ApiVersions request (default 50 µs, measured saturated on real Kafka
    /// 4.4 by `fleet_real`). Its answer has a fixed size, so unlike Metadata's it does not
    /// grow with the cluster.
    pub api_versions_time: Duration,
    /// Broker time per accepted connection, beside its requests: the accept and, later, the
    /// close (default 150 µs, measured saturated on real Kafka 4.4 by `fleet_real`, on the
    /// machine whose ApiVersions cost the default above). Charged when the TCP handshake
    /// completes at a live broker, even if the client gives the attempt up afterwards.
    pub accept_time: Duration,
    /// What the listener adds to a new connection (default: plaintext, nothing).
    pub security: Security,
    /// Whether the failover storm's clients say why they refresh (default true), as a real
    /// client knows: its kept connection to the dead broker was lost, or its requests for
    /// that broker's partitions answer NOT_LEADER. False: every client asks plainly
    /// (`RefreshCause::Requested`), as an application that does not pass the cause on.
    pub storm_causes: bool,
    /// Cores all brokers, and the clients' own work ([`FleetConfig::client_work`]), share
    /// (0, the default: every broker runs on cores of its own). A broker's work then waits
    /// for its own thread and then for that thread's turn on a core, in slices, the thread
    /// that has run least first, as on one machine running every broker and client.
    pub shared_cores: u32,
    /// Network threads per broker (default 0: one queue for all of a broker's work). Kafka
    /// pins each connection to one of its listener's network threads, which accepts it, runs
    /// its TLS handshake and SASL exchange, answers a SASL listener's pre-authentication
    /// ApiVersions, and reads every request from it before a request thread does the work.
    /// With `n` (at most [`FleetConfig::MAX_NETWORK_THREADS`]), each broker has `n` such
    /// queues beside its request queue: a request on a kept connection waits for the
    /// handshakes queued on its connection's thread, not for all of them. The queues still
    /// share a core when [`FleetConfig::shared_cores`] is set.
    #[serde(skip_serializing_if = "is_zero")]
    pub network_threads: u32,
    /// What the clients' own process spends handling a refresh's messages (default none).
    /// With [`FleetConfig::shared_cores`] it takes turns on the cores the brokers use, as a
    /// lab running clients and brokers on one machine does ([`ClientWork`]); without, it
    /// only delays the client.
    #[serde(skip_serializing_if = "ClientWork::is_zero")]
    pub client_work: ClientWork,
    /// What each broker's process spends beside its request path because of the work on it
    /// (default none): the JVM compiling the code the work ran, collecting its garbage
    /// ([`BrokerBackground`]). With [`FleetConfig::shared_cores`] it takes turns on the
    /// cores on a thread of its own; no answer waits for it. Ignored without shared cores.
    #[serde(skip_serializing_if = "BrokerBackground::is_zero")]
    pub broker_background: BrokerBackground,
    /// Count a broker's Metadata requests (the requests per broker and the peak) when it has
    /// read them, handed from its network thread to its request threads, instead of when
    /// they reach it (default false): as a broker's own request log counts them, which is
    /// how `fleet_real` counts over SASL_SSL, where a forwarder cannot read the requests.
    /// The same without network threads.
    #[serde(skip_serializing_if = "core::ops::Not::not")]
    pub count_reads: bool,
    /// Broker time per request that does not hold the broker's queue (default none): the
    /// hand-offs between a real broker's network and request threads ([`Latency`]).
    pub latency: Latency,
    /// Hiccups of the machine the clients and brokers run on (default none), delaying a
    /// Metadata answer without holding any queue ([`HostDelay`]).
    pub host_delay: HostDelay,
    /// How many times slower the other brokers and the network are while some brokers are
    /// hung (the hung scenarios' incident; default 1, no change): what a refresh on a kept
    /// connection pays (round trip, ApiVersions and Metadata work and latency, the clients'
    /// and forwarders' work per message, pauses) is
    /// multiplied by it, a new connection's costs are not. On a real KRaft cluster the
    /// stopped node is a controller too, and the refreshes that never touched it took
    /// 1.25–1.4× their healthy time (`docs/performance/storm.md`); `fleet_fit` fits it from
    /// `fleet_real`'s one-hung runs, whose such refreshes ran on kept connections.
    pub hung_slowdown: f64,
    /// Calm refreshes per client before the scenario (default 64, the adaptive window).
    /// Every strategy that starts one attempt at a time uses all of them, so strategies meet
    /// the incident at the same refresh; `all-at-once` uses at most 2 (see
    /// [`FleetConfig::warmup_for`]).
    pub warmup_refreshes: u32,
    /// Mean time between a client's warm-up refreshes (default 5 s).
    pub warmup_spacing: Duration,
    /// Share of clients given one spare connection after the warm-up, to a broker the core
    /// would take one to ([`stagger::Cluster::keep_spare`]); default 0. A state taken from
    /// a real run: there, at a cold start over SASL_SSL, clients' first choices were outrun
    /// and kept beside the winner's connection, which this model's warm-up does not
    /// reproduce (`docs/performance/fleet-vs-real.md` counts both).
    pub warm_spares: f64,
    /// Share of the clients whose lead is a broker the scenario then fails that hold a
    /// spare when it does (default `None`: [`FleetConfig::warm_spares`], as everyone else).
    /// In a real storm the spares sat with the clients that lost their lead: they had
    /// bootstrapped from the broker restarted before the warm-up, whose slow cold start
    /// their other seeds outran. Only a top-up: a share below `warm_spares` takes none away.
    pub warm_spares_failing: Option<f64>,
    /// Shares of the clients whose kept connection leads on each broker when the scenario
    /// starts, for the brokers in the scenario's order: those it fails first, then the
    /// others (default empty: wherever the warm-up left them). A real cold start over
    /// SASL_SSL herds leads onto the broker whose TLS handshakes finished first (up to 247 of
    /// 300 on one of three), and a storm's peak follows the herd; a fit gives the real
    /// fleet's shares here. Shares need not sum to one; they are normalised.
    pub warm_leads: Vec<f64>,
    /// Quiet time between the warm-up and the scenario, so queues drain (default 30 s).
    pub settle: Duration,
    /// Window over which clients refresh in the healthy and hung scenarios (default 10 s).
    pub request_window: Duration,
    /// Window within which every client refreshes in the failover storm (default 10 ms).
    pub storm_window: Duration,
    /// Window over which peak broker load is counted (default 100 ms).
    pub peak_window: Duration,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            clients: 10_000,
            brokers: 30,
            seed: 1,
            rtt: Duration::from_millis(1),
            service_time: Duration::from_millis(1),
            api_versions_time: Duration::from_micros(50),
            accept_time: Duration::from_micros(150),
            security: Security::PLAINTEXT,
            storm_causes: true,
            shared_cores: 0,
            network_threads: 0,
            client_work: ClientWork::default(),
            broker_background: BrokerBackground::default(),
            count_reads: false,
            latency: Latency::default(),
            host_delay: HostDelay::default(),
            hung_slowdown: 1.0,
            warmup_refreshes: stagger::Estimator::WINDOW as u32,
            warmup_spacing: Duration::from_secs(5),
            warm_spares: 0.0,
            warm_spares_failing: None,
            warm_leads: Vec::new(),
            settle: Duration::from_secs(30),
            request_window: Duration::from_secs(10),
            storm_window: Duration::from_millis(10),
            peak_window: Duration::from_millis(100),
        }
    }
}

/// Broker time of each kind of request that does not hold the broker's queue: an answer
/// leaves this long after its work is done, while the next request's work already runs.
///
/// Why apart from the work: a real broker hands each request from a network thread to a
/// request thread and back. At rest a request then takes its work plus this latency; under
/// saturation a broker still answers one request per work, so the two regimes `fleet_real`
/// measures (`docs/performance/fleet-vs-real.md`) are one price each, not two fits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Latency {
    /// Beside [`FleetConfig::service_time`].
    pub metadata: Duration,
    /// Beside [`FleetConfig::api_versions_time`].
    pub api_versions: Duration,
    /// Beside [`Security::tls_time`].
    pub tls: Duration,
    /// Beside [`Security::sasl_time`].
    pub sasl: Duration,
}

/// CPU the client's process spends on each step of a refresh.
///
/// Why it is modelled: a fleet's clients run on machines of their own, where this work only
/// delays each client a little. In a lab whose clients and brokers share the cores (as
/// `fleet_real`'s on one 2-core machine), a storm's 300 refreshes at once make the clients'
/// work a queue of its own in front of the brokers', and leaving it out made the model's
/// storms faster than the real ones (`docs/performance/fleet-vs-real.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClientWork {
    /// Per message the client handles: the application's request, a completed connection,
    /// each answer (TLS, ApiVersions, SASL, Metadata) or refusal.
    pub per_message: Duration,
    /// Beside its message, per TLS handshake the client completes: its key exchange and
    /// its check of the broker's certificate.
    pub tls: Duration,
    /// Threads the clients' process runs this work on, with shared cores (0 or 1: one),
    /// each one message at a time; work goes to the thread with least waiting, as tokio's
    /// workers steal each other's tasks.
    pub threads: u32,
    /// Per request a forwarder between the clients and the brokers relays, with its answer
    /// (a TLS handshake and a SASL exchange count as one each): a lab's counting forwarders,
    /// on one thread of their own. Zero without forwarders.
    pub relay: Duration,
    /// Once per client, in its first SASL exchange: deriving the SCRAM keys from the
    /// password (PBKDF2), which a client then keeps for every later connection.
    pub key_derivation: Duration,
}

impl ClientWork {
    /// No client work: the model as it is without a shared machine.
    pub fn is_zero(&self) -> bool {
        self.per_message.is_zero() && self.tls.is_zero() && self.relay.is_zero() && self.key_derivation.is_zero()
    }
}

/// A broker process's CPU beside its request path, per piece of work on that path: on the
/// lab's brokers (a JVM each), the JIT compiler threads, the collector and the rest spent
/// nearly as much per SASL_SSL connection as the request path did, in the same loops
/// (`fleet_real`'s `broker_threads_cpu_us`; `docs/performance/storm.md`).
///
/// Why apart from the prices: a request does not wait for this work, but on shared cores
/// it takes turns with the threads requests do wait for. Charged as the request path's own
/// price, it made a storm's TLS handshakes queue behind work they never wait for; left
/// out, the cores looked idler than they were.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BrokerBackground {
    /// Per accepted connection.
    pub accept: Duration,
    /// Per TLS handshake, with its SASL exchange where there is one.
    pub tls: Duration,
    /// Per request answered (Metadata or ApiVersions).
    pub request: Duration,
}

impl BrokerBackground {
    /// No background work: the model as it is without it.
    pub fn is_zero(&self) -> bool {
        self.accept.is_zero() && self.tls.is_zero() && self.request.is_zero()
    }
}

/// A share of Metadata answers delayed by a pause of the machine, exponentially distributed:
/// what a calm real cluster shows beside its brokers' work (a JVM safepoint, a thread not
/// scheduled on a busy core), which sets the tail of a calm refresh's time.
///
/// Why apart from [`Latency`]: it strikes a few answers hard rather than every answer a
/// little, so it moves p99 and leaves p50 where the broker's work puts it. `fleet_fit`
/// measures it from the real calm runs (`docs/performance/fleet-vs-real.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostDelay {
    /// Share of answers delayed (0 to 1).
    pub share: f64,
    /// Mean delay of those answers.
    pub mean: Duration,
}

/// What a listener adds to a new connection before its Metadata request.
///
/// Why its own type: over SASL_SSL, which is how most production clusters are reached, a
/// new connection costs a TLS handshake and a SASL exchange before the first Metadata
/// request, and a policy that opens extra connections pays that on every one. A plaintext
/// listener is [`Security::PLAINTEXT`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Security {
    /// Broker time of a TLS handshake; `None` on a listener without TLS. A TLS 1.3 full
    /// handshake is one round trip after TCP's before the client may send.
    pub tls_time: Option<Duration>,
    /// Round trips of the SASL exchange between ApiVersions and Metadata (0: no SASL; SCRAM:
    /// 3, a SaslHandshake and two SaslAuthenticate).
    pub sasl_round_trips: u32,
    /// Broker time of the whole SASL exchange.
    pub sasl_time: Duration,
}

impl Security {
    /// No TLS, no SASL.
    pub const PLAINTEXT: Security = Security { tls_time: None, sasl_round_trips: 0, sasl_time: Duration::ZERO };

    /// TLS and SASL SCRAM (three SASL round trips), with their broker times.
    pub fn sasl_ssl_scram(tls_time: Duration, sasl_time: Duration) -> Security {
        Security { tls_time: Some(tls_time), sasl_round_trips: 3, sasl_time }
    }

    /// The name tables print.
    pub fn name(&self) -> &'static str {
        match (self.tls_time.is_some(), self.sasl_round_trips > 0) {
            (false, false) => "PLAINTEXT",
            (true, false) => "SSL",
            (false, true) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl FleetConfig {
    /// The most [`FleetConfig::network_threads`] a broker has (more are taken as this many).
    pub const MAX_NETWORK_THREADS: u32 = 8;

    /// The same fleet with `clients` clients (tests use a few hundred).
    pub fn with_clients(mut self, clients: u32) -> Self {
        self.clients = clients;
        self
    }

    /// Warm-up refreshes for `strategy`: the full count for a strategy that starts one
    /// attempt at a time, at most 2 for one that starts several at once (an all-at-once
    /// warm-up is 30 requests per refresh).
    ///
    /// Why the full count for a fixed stagger too, which learns nothing from it: each
    /// refresh draws its choices (the order of the brokers it knows, which survivor a
    /// reconnecting client tries) from the client's seed and the refresh's number. With the
    /// same warm-up, every strategy meets the incident at the same refresh and draws the
    /// same choices (common random numbers), so two strategies doing the same work show the
    /// same numbers. With 2 warm-ups for `sequential` and 64 for the default, their storms
    /// differed by up to 10 % at 300 clients and 1 % at 10,000 for the same work
    /// (`docs/performance/storm.md`, "The storm turn by turn").
    pub fn warmup_for(&self, strategy: &Strategy) -> u32 {
        match strategy {
            Strategy::Oracle => 0,
            Strategy::Core { cluster, .. } => warmup_refreshes_for(cluster, self.warmup_refreshes),
        }
    }
}

/// The rule of [`FleetConfig::warmup_for`] for one client's `cluster` config and the full
/// count `warmup`: `warmup` (at least 1) when it starts one attempt at a time, at most 2 when
/// it starts several at once. The real-cluster harness warms its fleets by it too, so the
/// model and the real fleets meet an incident after the same refreshes.
pub fn warmup_refreshes_for(cluster: &ClusterConfig, warmup: u32) -> u32 {
    if cluster.refresh.fanout.initial > 1 {
        warmup.clamp(1, 2)
    } else {
        warmup.max(1)
    }
}

/// What happens to the cluster when the measurement starts.
///
/// Why these five: they are the issue's — the calm baseline (does hedging add load when
/// nothing is wrong?), one and many silent brokers (the case Sarama pays a timeout for), and
/// the thundering herd after a failover (does hedging make an overload worse?), and a fleet
/// bootstrapping at once from one seed list (does every client ask the same seed first?).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FleetScenario {
    /// Every broker healthy; clients refresh at random times over the request window.
    Healthy,
    /// One broker hangs (accepts, never answers); clients refresh over the request window.
    OneHung,
    /// A third of the brokers hang; clients refresh over the request window.
    ThirdHung,
    /// One broker dies (its kept connections close, new ones are refused) and every client
    /// refreshes within the storm window, saying why as a real client would know: those
    /// whose kept connection was to the dead broker `ConnectionLost` (naming it), the others
    /// `StaleMetadata` (NOT_LEADER for its partitions).
    FailoverStorm,
    /// A deployment rollout: a fleet that knows nothing yet (no warm-up, every client given
    /// the same three seeds) bootstraps within the storm window. Clients that all try the
    /// first listed seed first pile onto it; the busiest broker's peak says whether they do.
    ColdStart,
}

impl FleetScenario {
    /// All five, in report order.
    pub const ALL: [FleetScenario; 5] = [
        FleetScenario::Healthy,
        FleetScenario::OneHung,
        FleetScenario::ThirdHung,
        FleetScenario::FailoverStorm,
        FleetScenario::ColdStart,
    ];

    /// Short machine name (`healthy`, `one_hung`, `third_hung`, `failover_storm`).
    pub fn name(self) -> &'static str {
        match self {
            FleetScenario::Healthy => "healthy",
            FleetScenario::OneHung => "one_hung",
            FleetScenario::ThirdHung => "third_hung",
            FleetScenario::FailoverStorm => "failover_storm",
            FleetScenario::ColdStart => "cold_start",
        }
    }

    /// Human title for tables and plots.
    pub fn title(self) -> &'static str {
        match self {
            FleetScenario::Healthy => "healthy",
            FleetScenario::OneHung => "one broker hung",
            FleetScenario::ThirdHung => "a third of brokers hung",
            FleetScenario::FailoverStorm => "failover storm",
            FleetScenario::ColdStart => "cold start (same seeds, no warm-up)",
        }
    }

    /// Whether some brokers are hung (the scenarios the latency targets are about).
    pub fn is_hung(self) -> bool {
        matches!(self, FleetScenario::OneHung | FleetScenario::ThirdHung)
    }
}

/// How the clients of one run get their metadata.
///
/// Why an enum with an oracle beside the core: the presets and tuned variants are the real
/// state machine; the oracle is not implementable (it reads the simulator's mind) and exists
/// to say how far from the best possible each real policy is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
// A handful of these exist per run; boxing the config would only make them clumsier to build.
#[allow(clippy::large_enum_variant)]
pub enum Strategy {
    /// Every client runs a core [`Cluster`](stagger::Cluster) with these settings.
    Core {
        /// Name in tables and plots.
        name: String,
        /// The cluster view's settings: the refresh policy (its seed is replaced per client),
        /// the hedge budget and the window quantile (the refresh interval is the fleet's).
        cluster: ClusterConfig,
    },
    /// Knows which brokers are healthy and sends one request to the one with the shortest
    /// queue when the request arrives; never hedges, never waits on a silent broker.
    Oracle,
}

impl Strategy {
    /// A core strategy named `name` running `refresh`, with the cluster view's defaults.
    pub fn core(name: &str, refresh: RefreshConfig) -> Self {
        Strategy::core_with(name, ClusterConfig { refresh, ..ClusterConfig::default() })
    }

    /// A core strategy named `name` whose cluster knobs (hedge budget, window quantile)
    /// differ from the defaults too.
    pub fn core_with(name: &str, cluster: ClusterConfig) -> Self {
        Strategy::Core { name: name.to_string(), cluster }
    }

    /// The name used in tables, plots and JSON.
    pub fn name(&self) -> &str {
        match self {
            Strategy::Core { name, .. } => name,
            Strategy::Oracle => "oracle",
        }
    }

    /// The comparison: `sequential`, `all-at-once`, `staggered` (fixed 500 ms),
    /// `adaptive` (the default) and the `oracle`.
    ///
    /// `all-at-once` runs with its hedge budget lifted: under a [`Cluster`](stagger::Cluster)
    /// the default budget would otherwise cut it down to one attempt plus whatever tokens
    /// are left, which is neither what the preset means nor a useful reference point for
    /// "ask every broker at once".
    ///
    /// Every core strategy runs as a long-lived client does: seeds shuffled by each
    /// client's seed ([`ClusterConfig::default`]; Sarama, librdkafka and the Java client
    /// shuffle too). `adaptive-listed-order` is the default with the seeds tried in the order
    /// listed, to show what the shuffle buys at a cold start.
    pub fn standard() -> Vec<Strategy> {
        let mut broadcast = long_lived(RefreshConfig::all_at_once());
        broadcast.hedge_budget.ratio = 1000.0;
        broadcast.hedge_budget.burst = u32::MAX;
        let mut listed = ClusterConfig::default();
        listed.refresh.shuffle_seeds = false;
        alloc::vec![
            Strategy::core_with("sequential", long_lived(RefreshConfig::sequential())),
            Strategy::core_with("all-at-once", broadcast),
            Strategy::core_with("staggered-500ms", long_lived(RefreshConfig::staggered())),
            Strategy::core_with("adaptive", ClusterConfig::default()),
            Strategy::core_with("adaptive-listed-order", listed),
            Strategy::Oracle,
        ]
    }
}

/// A long-lived client's settings around `refresh`: the cluster view's defaults
/// ([`ClusterConfig::default`]).
pub fn long_lived(refresh: RefreshConfig) -> ClusterConfig {
    ClusterConfig { refresh, ..ClusterConfig::default() }
}

/// The outcome of one scenario under one strategy: the numbers of the report's table.
///
/// Why these numbers: time to metadata is what an application waits; attempts per refresh
/// is the amplification a policy adds; requests per refresh is what brokers actually had to
/// read (refused and early-cancelled attempts never reach one); the peak per window is the
/// number that takes a cluster down.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Which scenario.
    pub scenario: FleetScenario,
    /// Which strategy (its name).
    pub strategy: String,
    /// Refreshes measured (one per client).
    pub refreshes: u32,
    /// Refreshes that gave up (counted as infinitely slow in the percentiles).
    pub failed: u32,
    /// Time to metadata: from the application's request to `Refreshed`.
    pub time_to_metadata: Percentiles,
    /// `Connect` commands of the measured refreshes.
    pub attempts: u64,
    /// Attempts per refresh (amplification; 1.0 means never more than one).
    pub attempts_per_refresh: f64,
    /// Hedged attempts (started while another was in flight), the core's own count.
    pub hedges: u64,
    /// New connections that reached a broker: the TCP handshake completed while the attempt
    /// was still wanted, so the broker accepted it (each cost
    /// [`FleetConfig::accept_time`]) and read its first request.
    pub connections: u64,
    /// Attempts that ran on a connection kept from an earlier refresh
    /// ([`stagger::ClusterEvent::Reuse`]; every oracle request, which is all-knowing and
    /// connected to every broker): no handshake, TLS or SASL; ApiVersions and Metadata (the
    /// oracle, which knows the broker is healthy, sends Metadata alone).
    pub reused: u64,
    /// TLS handshakes brokers worked on (0 on a listener without TLS).
    #[serde(default)]
    pub tls_handshakes: u64,
    /// ApiVersions requests brokers received, on new and kept connections.
    #[serde(default)]
    pub api_versions: u64,
    /// Metadata requests brokers received (an attempt sends one once ApiVersions is
    /// answered, or at once on a kept connection, if it is still wanted), or with
    /// [`FleetConfig::count_reads`] those they read; what the peak counts.
    pub requests: u64,
    /// Metadata requests per refresh.
    pub requests_per_refresh: f64,
    /// Attempts refused by a dead broker (never reached one).
    pub refused: u64,
    /// Attempts the core cancelled before their handshake completed (never reached one).
    pub cancelled_before_handshake: u64,
    /// The most metadata requests any one broker received within any window of
    /// [`FleetConfig::peak_window`] during the measurement.
    pub peak_requests: u32,
    /// The broker that saw that peak.
    pub peak_broker: u32,
    /// The most work (µs) one broker did within any window of [`FleetConfig::peak_window`]
    /// during the measurement: accepts, TLS, SASL, ApiVersions and Metadata, each priced as
    /// [`FleetConfig`] says. Why beside `peak_requests`: a Metadata request on a kept
    /// connection and one behind a new connection's handshakes count alike there, and the
    /// real brokers' CPU tells them apart (`docs/performance/storm.md`, "Placed alike, warmed
    /// alike").
    #[serde(default)]
    pub peak_busy_us: u64,
    /// Metadata requests each broker received during the measurement (sums to `requests`).
    pub requests_per_broker: Vec<u64>,
    /// The `Connect` count the core itself reported in its `Refreshed` stats (cross-check of
    /// `attempts`; equal when no refresh failed).
    pub core_started: u64,
    /// Spare connections the clients held beside their lead when the incident came (those
    /// of a broker the scenario fails included): the state the scenario started from.
    #[serde(default)]
    pub spares_before: u64,
    /// Points of the time-to-metadata CDF, `(milliseconds, fraction done)`, for plots.
    pub cdf: Vec<(f64, f64)>,
    /// Every measured time to metadata in microseconds, sorted; failures are `u64::MAX`.
    /// Not serialised (10,000 numbers per row); tests and custom reports read it.
    #[serde(skip)]
    pub times_us: Vec<u64>,
}

/// Everything one fleet run produced, ready for JSON, Markdown and SVG.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetReport {
    /// The fleet and cluster it ran.
    pub config: FleetConfig,
    /// One result per scenario × strategy, scenario-major in [`FleetScenario::ALL`] order.
    pub results: Vec<ScenarioResult>,
    /// The targets, checked against `results` (the strategy named `adaptive`).
    pub targets: Vec<Target>,
}

impl FleetReport {
    /// Assembles a report and checks the targets for the strategy named `adaptive`.
    pub fn new(config: FleetConfig, results: Vec<ScenarioResult>) -> Self {
        let targets = check_targets(&results, "adaptive");
        FleetReport { config, results, targets }
    }

    /// The result of `scenario` under the strategy named `strategy`, if it ran.
    pub fn result(&self, scenario: FleetScenario, strategy: &str) -> Option<&ScenarioResult> {
        self.results.iter().find(|r| r.scenario == scenario && r.strategy == strategy)
    }
}

/// Warms a fleet up under `strategy` and runs one scenario (see [`WarmFleet`] to reuse one
/// warm-up for several scenarios).
pub fn run_fleet(config: &FleetConfig, scenario: FleetScenario, strategy: &Strategy) -> ScenarioResult {
    WarmFleet::new(config, strategy).run(scenario)
}

/// Every scenario under every strategy, one warm-up per strategy, on one thread.
///
/// The `fleet` example runs the same jobs on several threads; the results are identical
/// because every run depends only on the config, the strategy and the scenario.
pub fn run_matrix(config: &FleetConfig, strategies: &[Strategy]) -> FleetReport {
    let mut per_strategy: Vec<Vec<ScenarioResult>> = Vec::new();
    for strategy in strategies {
        let warm = WarmFleet::new(config, strategy);
        per_strategy.push(FleetScenario::ALL.iter().map(|&s| warm.run(s)).collect());
    }
    FleetReport::new(config.clone(), scenario_major(per_strategy))
}

/// Reorders per-strategy result lists (each in [`FleetScenario::ALL`] order) scenario-major.
pub fn scenario_major(per_strategy: Vec<Vec<ScenarioResult>>) -> Vec<ScenarioResult> {
    let mut out = Vec::new();
    for scenario in FleetScenario::ALL {
        for results in &per_strategy {
            out.extend(results.iter().filter(|r| r.scenario == scenario).cloned());
        }
    }
    out
}
