//! What only a long-lived [`crate::Cluster`] reads: its refresh interval, rebootstrap, hedge
//! budget, the response-time window's quantile and the spare connections, and setting any knob by path.

use core::time::Duration;
use serde::{Deserialize, Serialize};

use super::knobs::{self, Access};
use super::{KnobScope, KnobValue, RefreshConfig};
use crate::error::ConfigError;

/// Token bucket that caps hedged attempts (those started while another is still in flight),
/// as gRPC's retry throttling does: each refresh earns `ratio` tokens, each hedge spends one.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HedgeBudget {
    /// Tokens earned per refresh (default 0.1: hedges add at most ~10 % load in steady state).
    pub ratio: f64,
    /// Bucket size, and its content at start (default 10): enough for a failover burst.
    pub burst: u32,
}

impl Default for HedgeBudget {
    fn default() -> Self {
        HedgeBudget { ratio: 0.1, burst: 10 }
    }
}

/// Settings of a long-lived cluster view ([`crate::Cluster`]): the policy each refresh runs
/// with, and what only a view that outlives one refresh can use — a schedule, a hedge
/// budget across refreshes, the response-time window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterConfig {
    /// The policy each refresh runs with ([`RefreshConfig::default`]: seeds shuffled by the
    /// refresh's seed, so a fleet that starts at once spreads over them;
    /// `docs/performance/fleet.md`, cold start). What keeps a fleet's cold start from
    /// hedging into its own queued handshakes is [`ClusterConfig::gentle_until_calm`].
    pub refresh: RefreshConfig,
    /// Refresh this often even if nobody asks (default 5 min, Kafka's `metadata.max.age.ms`).
    pub refresh_interval: Duration,
    /// Forget discovered brokers and start again from the seeds when a refresh fails and
    /// every discovered broker it tried failed (KIP-899), or when a broker answered
    /// REBOOTSTRAP_REQUIRED (KIP-1102, and Kafka 4.4's cluster check, KIP-1242). Default
    /// true; see [`crate::ClusterEvent::Rebootstrapped`] for the rule.
    pub rebootstrap: bool,
    /// Caps hedged attempts across refreshes (a lone [`crate::Refresh`] is unbudgeted).
    pub hedge_budget: HedgeBudget,
    /// Which quantile of the response-time window (the last
    /// [`Estimator::WINDOW`](crate::Estimator::WINDOW) winning answers, and fresh handshakes) warm refreshes
    /// use as the recent response time, "what an answer normally takes", with the adaptive stagger: the wait before a
    /// handshake completes, and the base of the patience for an answering broker (default
    /// 0.99: later than this cluster almost ever is; `docs/performance/tuning.md` compares
    /// p90 and the median).
    pub window_quantile: f64,
    /// Idle connections to other brokers kept beside the winner's (default 1, at most
    /// [`ClusterConfig::MAX_SPARE_CONNECTIONS`]): a loser whose exchange had reached its
    /// Metadata request is drained and kept, so a later refresh's hedge runs on an
    /// authenticated connection (no TCP, TLS or SASL handshake, no new connection for the
    /// broker to accept) before it opens a new one. At a cold start, the client's first
    /// choice, connected but outrun while its handshake queued, finishes its exchange and is
    /// kept too, leading the next refresh (so clients stay where they chose instead of
    /// herding onto the broker that answered first). 0 keeps the winner's only.
    pub spare_connections: u32,
    /// Run refreshes gently (brokers suspected at the adaptive stagger's `pace` while
    /// connecting and its `ceiling` once connected, one added per tick, as for a
    /// storm-likely [`crate::RefreshCause`]) until one ends with every first answer within
    /// the fast policy's wait and the view knows a kept connection's pace: the bootstrap,
    /// the refresh after a TLS bootstrap, and each refresh after one that met a queue
    /// (default true). A [`crate::RefreshCause::RequestTimedOut`] is always fast.
    ///
    /// Why: long-lived clients start together (a rollout, replicas restarting), and a
    /// broker working through the fleet's TLS handshakes looks silent, as a stopped one
    /// does, for far longer than 40 ms. A fast refresh then hedges into brokers just as
    /// queued, each hedge one more TLS handshake and SASL exchange for them
    /// (`docs/performance/storm.md`, "Gentle until calm"). A TLS bootstrap's fresh winner
    /// shows only the end of its handshake, so the refresh after it stays gentle too: run
    /// fast, a second after a fleet's cold start, it hedged a queued kept connection onto
    /// two new TLS connections in one client of ten ("Placed alike, warmed alike"). The
    /// price is a bootstrap past a stopped seed, and over TLS the refresh after it past a
    /// home that stopped meanwhile: the `ceiling` (2 s) instead of about 50 ms, once.
    pub gentle_until_calm: bool,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            refresh: RefreshConfig::default(),
            refresh_interval: Duration::from_secs(300),
            rebootstrap: true,
            hedge_budget: HedgeBudget::default(),
            window_quantile: 0.99,
            spare_connections: 1,
            gentle_until_calm: true,
        }
    }
}

impl ClusterConfig {
    /// The most idle spare connections a view keeps ([`ClusterConfig::spare_connections`]).
    pub const MAX_SPARE_CONNECTIONS: u32 = 3;

    /// Checks every field; the error names the first bad one. The refresh policy's own
    /// fields are named as in [`RefreshConfig`] (`fanout.jitter`), so one refresh and a
    /// cluster view report the same mistake in the same words.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.refresh.validate()?;
        if self.refresh_interval.is_zero() {
            return Err(ConfigError::new("refresh_interval", "must be positive"));
        }
        let h = &self.hedge_budget;
        if !(0.0..=1000.0).contains(&h.ratio) {
            return Err(ConfigError::new(
                "hedge_budget.ratio",
                alloc::format!("({}) must be within [0, 1000]", h.ratio),
            ));
        }
        if !(0.0..=1.0).contains(&self.window_quantile) {
            return Err(ConfigError::new("window_quantile", "must be within [0, 1]"));
        }
        if self.spare_connections > Self::MAX_SPARE_CONNECTIONS {
            return Err(ConfigError::new(
                "spare_connections",
                alloc::format!("({}) must be at most {}", self.spare_connections, Self::MAX_SPARE_CONNECTIONS),
            ));
        }
        Ok(())
    }
}

impl ClusterConfig {
    /// Sets any knob of [`knobs()`](crate::knobs): a cluster knob by its path (`hedge_budget.burst`), a
    /// refresh knob by its path in [`RefreshConfig`] or in this struct's JSON
    /// (`fanout.jitter` or `refresh.fanout.jitter`). Values as for [`RefreshConfig::set`].
    pub fn set(&mut self, path: &str, value: &str) -> Result<(), ConfigError> {
        let knob = knobs::find(path.strip_prefix("refresh.").unwrap_or(path), KnobScope::Cluster)?;
        let slot = match knob.access {
            Access::Refresh(slot) => slot(&mut self.refresh),
            Access::Cluster(slot) => slot(self),
        };
        knob.write(slot, value)
    }

    /// The current value of any knob (paths as for [`ClusterConfig::set`]).
    pub fn get(&self, path: &str) -> Option<KnobValue> {
        let knob = knobs::find(path.strip_prefix("refresh.").unwrap_or(path), KnobScope::Cluster).ok()?;
        let mut copy = *self;
        let slot = match knob.access {
            Access::Refresh(slot) => slot(&mut copy.refresh),
            Access::Cluster(slot) => slot(&mut copy),
        };
        slot.map(|s| s.value())
    }
}
