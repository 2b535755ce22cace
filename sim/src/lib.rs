//! A seeded, virtual-time simulator: a pretend Kafka cluster whose brokers are healthy, slow,
//! hung, refused, flaky or dying, driving the real [`Refresh`](stagger::Refresh) and
//! [`Cluster`](stagger::Cluster) state machines.
//!
//! Why it exists: the core is sans-IO, so the exact code that runs against real brokers can
//! be run here against simulated ones, thousands of times a second, with no sockets, no
//! clock and no threads. That is what the scenario tests, the fleet simulation and the
//! in-browser visualiser build on. Everything here is `no_std` + `alloc`: time is an
//! [`Instant`] counted from zero, and every random draw comes from the
//! scenario's seed, so the same scenario and config give the same [`Report`], byte for byte.
//!
//! ```
//! use core::time::Duration;
//! use stagger_sim::{run_refresh, BrokerBehavior, Scenario};
//! use stagger::RefreshConfig;
//!
//! let scenario = Scenario::from_behaviors([
//!     BrokerBehavior::Hung,
//!     BrokerBehavior::Healthy { rtt: Duration::from_millis(2) },
//! ]);
//! let report = run_refresh(&RefreshConfig::adaptive(), &scenario);
//! assert_eq!(report.winner().map(|b| b.0), Some(1));
//! println!("{}", report.render_timeline());
//! ```
//!
//! Why a crate of its own: the core is the state machine and what an adapter needs; the
//! simulator is a laboratory built on the core's public API, as an adapter is. It stays
//! `no_std` + `alloc` (the web demo runs it in wasm); feature `fleet` (default) adds the
//! `fleet` laboratory behind `docs/performance/`.
#![no_std]
#![warn(missing_docs)]

extern crate alloc;

mod cluster_sim;
#[cfg(feature = "fleet")]
pub mod fleet;
mod refresh_sim;
mod render;
mod world;

#[cfg(test)]
mod tests;

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;
use serde::{Deserialize, Serialize};

use stagger::test_util::numbered_seeds;
use stagger::{BrokerMetadata, ConfigError, Instant, Metadata, PartitionMetadata, TopicMetadata};

pub use cluster_sim::{run_cluster, ClusterReport, RefreshOutcome, RefreshRecord, RequestRecord};
pub use refresh_sim::{cancel_ending, run_refresh, Lane, Outcome, Report, Span, SpanOutcome};

/// Upper bound on simulation steps (timer firings, delivered inputs, requests).
///
/// Why: a logic error in the core (a timer that never advances, an attempt that is started
/// forever) must surface as a [`SimError::StepLimit`] in the report, not hang a test or
/// freeze the browser tab running the visualiser.
pub const MAX_STEPS: u64 = 1_000_000;

/// The recorder name stamped into traces made by the simulator, so a replayed trace says
/// where it came from.
pub const RECORDER: &str = concat!("stagger-sim ", env!("CARGO_PKG_VERSION"));

/// How one simulated broker treats a connection attempt.
///
/// Why these six: they are the failure shapes a metadata refresh meets in practice — a
/// normal broker, a loaded one, the hung broker that costs Sarama a full timeout, a stopped
/// one, a flapping network, and a broker that goes away in the middle of a refresh.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BrokerBehavior {
    /// Accepts the connection after the handshake and answers `rtt` later.
    Healthy {
        /// Time from connected to the metadata answer.
        rtt: Duration,
    },
    /// Accepts the connection and answers after a time drawn uniformly from `[min, max]`.
    Slow {
        /// Fastest answer (after the handshake).
        min: Duration,
        /// Slowest answer (after the handshake).
        max: Duration,
    },
    /// Accepts the connection after the handshake, then never answers (a stuck broker).
    Hung,
    /// Refuses the connection after about one handshake time ([`ErrorKind::Refused`](stagger::ErrorKind)).
    Refused,
    /// Accepts the connection; with probability `p` closes it after `rtt`
    /// ([`ErrorKind::Closed`](stagger::ErrorKind)), otherwise answers after `rtt`.
    Flaky {
        /// Probability of failing, in `[0, 1]`.
        p: f64,
        /// Time from connected to the answer or the close.
        rtt: Duration,
    },
    /// Healthy with `rtt` until `at` after the simulation start, then gone: later attempts
    /// are refused, and an attempt in flight at `at` is closed then.
    DiesAt {
        /// When the broker dies, counted from the simulation start.
        at: Duration,
        /// Answer time while alive.
        rtt: Duration,
    },
}

impl BrokerBehavior {
    /// A short human label (`healthy 2ms`, `slow 20-40ms`, `hung`, …) for timelines.
    pub fn label(&self) -> String {
        match self {
            BrokerBehavior::Healthy { rtt } => alloc::format!("healthy {}", render::fmt_duration(*rtt)),
            BrokerBehavior::Slow { min, max } => {
                alloc::format!("slow {}-{}", render::fmt_duration(*min), render::fmt_duration(*max))
            }
            BrokerBehavior::Hung => "hung".to_string(),
            BrokerBehavior::Refused => "refused".to_string(),
            BrokerBehavior::Flaky { p, rtt } => {
                // Whole percent is plenty for a label; avoids float formatting differences.
                let pct = if p.is_nan() { 0 } else { (p.clamp(0.0, 1.0) * 100.0 + 0.5) as u32 };
                alloc::format!("flaky {pct}% {}", render::fmt_duration(*rtt))
            }
            BrokerBehavior::DiesAt { at, rtt } => {
                alloc::format!("dies@{} {}", render::fmt_duration(*at), render::fmt_duration(*rtt))
            }
        }
    }
}

/// One simulated broker: its behaviour and its transport handshake time.
///
/// Why a separate handshake: the adaptive stagger reacts to `Input::Connected`, so the
/// simulator has to report a connection coming up some time before the answer does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimBroker {
    /// How the broker treats attempts.
    pub behavior: BrokerBehavior,
    /// Time from `Connect` to `Connected` (or to the refusal); default 1 ms.
    #[serde(default = "default_handshake")]
    pub handshake: Duration,
}

fn default_handshake() -> Duration {
    SimBroker::DEFAULT_HANDSHAKE
}

impl SimBroker {
    /// The default handshake: 1 ms, a LAN round trip, well under the adaptive floor.
    pub const DEFAULT_HANDSHAKE: Duration = Duration::from_millis(1);

    /// A broker with `behavior` and the default handshake.
    pub fn new(behavior: BrokerBehavior) -> Self {
        SimBroker { behavior, handshake: Self::DEFAULT_HANDSHAKE }
    }

    /// The same broker with another handshake time (e.g. a far-away broker).
    pub fn with_handshake(mut self, handshake: Duration) -> Self {
        self.handshake = handshake;
        self
    }
}

impl From<BrokerBehavior> for SimBroker {
    fn from(behavior: BrokerBehavior) -> Self {
        SimBroker::new(behavior)
    }
}

/// A simulated cluster: its brokers, the seed of its randomness and what it answers.
///
/// Why plain serde data: the web demo edits a scenario in the page (click a broker to make it
/// hung) and ships it to the wasm simulator as JSON; tests write it inline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// The brokers; broker `i` is reachable at `broker-i:9092` (see [`Scenario::seeds`]).
    pub brokers: Vec<SimBroker>,
    /// Seed of the simulator's own randomness (slow answer times, flaky failures). The
    /// refresh's randomness comes from its config's seed instead.
    #[serde(default)]
    pub seed: u64,
    /// What healthy brokers answer; `None` means [`Scenario::standard_metadata`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Another name for [`Scenario`], for readers who think of it as "the simulated cluster".
pub type SimCluster = Scenario;

impl Scenario {
    /// A scenario over `brokers`, seed 0 and the standard metadata.
    pub fn new(brokers: Vec<SimBroker>) -> Self {
        Scenario { brokers, seed: 0, metadata: None }
    }

    /// A scenario whose brokers have the given behaviours and the default handshake.
    pub fn from_behaviors(behaviors: impl IntoIterator<Item = BrokerBehavior>) -> Self {
        Scenario::new(behaviors.into_iter().map(SimBroker::new).collect())
    }

    /// The same scenario with another simulator seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The seed broker addresses a client is given: `broker-0:9092`, `broker-1:9092`, ….
    /// In a fresh [`BrokerBook`](stagger::BrokerBook) built from them, `BrokerIndex(i)` is
    /// simulated broker `i`.
    pub fn seeds(&self) -> Vec<String> {
        numbered_seeds(self.brokers.len())
    }

    /// The metadata a healthy broker answers with.
    pub fn metadata(&self) -> Metadata {
        match &self.metadata {
            Some(m) => m.clone(),
            None => Self::standard_metadata(self.brokers.len()),
        }
    }

    /// Which simulated broker listens on `address` (`broker-i:9092`), if any.
    ///
    /// Why by address and not by index: a long-lived [`Cluster`](stagger::Cluster) adds the
    /// brokers metadata lists to its book, so only the address is stable across refreshes.
    pub fn broker_for_address(&self, address: &str) -> Option<usize> {
        let i: usize = address.strip_prefix("broker-")?.strip_suffix(":9092")?.parse().ok()?;
        // Reject `broker-01:9092` and friends: only the canonical spelling is a broker.
        (i < self.brokers.len() && alloc::format!("broker-{i}:9092") == address).then_some(i)
    }

    /// Metadata for an `n`-broker simulated cluster: every broker listed as node `i` at
    /// `broker-i:9092`, and two topics (`orders`, 3 partitions; `payments`, 2 partitions)
    /// with replicas spread over the brokers.
    ///
    /// Why these: the brokers must match the seeds so that
    /// a `Cluster`'s broker book finds
    /// the same entries, and a couple of topics make the answer look like a real one.
    pub fn standard_metadata(n: usize) -> Metadata {
        let brokers = (0..n)
            .map(|i| BrokerMetadata { node_id: i as i32, host: alloc::format!("broker-{i}"), port: 9092, rack: None })
            .collect();
        let topic = |name: &str, partitions: usize| TopicMetadata {
            name: name.to_string(),
            error_code: 0,
            is_internal: false,
            partitions: (0..partitions)
                .map(|p| {
                    let replicas: Vec<i32> = (0..n.min(3)).map(|r| ((p + r) % n.max(1)) as i32).collect();
                    PartitionMetadata {
                        id: p as i32,
                        error_code: 0,
                        leader: replicas.first().copied().unwrap_or(-1),
                        isr: replicas.clone(),
                        replicas,
                    }
                })
                .collect(),
        };
        Metadata {
            cluster_id: Some("stagger-sim".to_string()),
            controller_id: if n == 0 { -1 } else { 0 },
            error_code: 0,
            brokers,
            topics: alloc::vec![topic("orders", 3), topic("payments", 2)],
        }
    }
}

/// Why a simulation stopped before the refresh reached `Done` or `GiveUp`.
///
/// Why in the report and not a panic: the simulator runs inside tests, benchmarks and a
/// browser tab; a bad scenario or a core bug must show up as data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SimError {
    /// The config or the scenario was refused (e.g. a scenario with no brokers).
    InvalidConfig {
        /// The offending field.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// [`MAX_STEPS`] steps ran without the refresh finishing: a livelock in the core.
    StepLimit {
        /// Steps run.
        steps: u64,
    },
    /// The refresh is unfinished but has no timer and nothing is pending: it would wait
    /// forever (a core bug: an unfinished refresh always has its deadline timer).
    Stalled {
        /// When it stalled.
        at: Instant,
    },
}

impl From<ConfigError> for SimError {
    fn from(e: ConfigError) -> Self {
        SimError::InvalidConfig { field: e.field.to_string(), problem: e.problem }
    }
}

impl core::fmt::Display for SimError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SimError::InvalidConfig { field, problem } => write!(f, "invalid configuration: `{field}` {problem}"),
            SimError::StepLimit { steps } => write!(f, "simulation stopped after {steps} steps without finishing"),
            SimError::Stalled { at } => {
                write!(f, "refresh stalled at {}: no timer and nothing pending", render::fmt_instant(*at))
            }
        }
    }
}

/// The README's code samples, compiled by `cargo test --doc` so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
