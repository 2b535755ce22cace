//! Refresh policy: every knob, its default, and where the default comes from.
//!
//! See DESIGN.md's "Policy knobs" table. All durations are `core::time::Duration`. A config
//! is plain data (serde) so traces and the web demo can carry it; [`RefreshConfig::validate`]
//! names the first bad field instead of letting a bad value panic later.
//!
//! [`knobs()`] lists every knob — its dotted path in the serde JSON, its kind, a one-line
//! doc — from the one table below ([`KNOBS`]); [`RefreshConfig::set`] and
//! [`ClusterConfig::set`] set one from text (`250ms`, `linear:2`, `fixed:100ms`). The CLI,
//! the TypeScript types and the web demo take their lists of knobs from it, so adding a knob
//! is a field, its default, its validation and one row of that table.

use core::time::Duration;
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

mod knobs;
pub use knobs::{parse_duration, Knob, KnobChoice, KnobKind, KnobScope, KnobValue};
use knobs::{Access, Slot};

/// How long to wait for an answer before starting the next attempt.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stagger {
    /// A fixed delay, e.g. the seed discussion's "try another broker every 500 ms".
    Fixed(Duration),
    /// Learn from the connection itself (the default); see [`Adaptive`].
    Adaptive(Adaptive),
}

/// Adaptive stagger: hedge against *silence*, not against slowness.
///
/// An attempt goes through three phases, and each has its own evidence:
///
/// 1. **Connecting.** Nothing is known about this broker yet. Wait `cold` (RFC 8305's
///    250 ms Connection Attempt Delay) or, in a long-lived [`crate::Cluster`], its
///    [`ClusterConfig::window_quantile`] of recently observed response times: a handshake
///    slower than a whole answer usually is, is suspect.
/// 2. **Connected, silent.** The handshake took `h`, which measures this path's round trip.
///    The broker's first answer (ApiVersions for Kafka) needs one more round trip and almost
///    no broker work, so a broker still silent `clamp(multiple · h, floor, ceiling)` after
///    its handshake is probably hung: that is when the next attempt starts (Happy Eyeballs
///    v3's idea, measured from the handshake rather than the start).
/// 3. **Answering.** The broker answered something ([`crate::Input::FirstFrame`]): it is
///    alive and working on our request; what remains is queueing and broker work. Another
///    broker would most likely queue us just the same — on a loaded cluster a hedge only
///    adds load — so the next attempt waits `patience` times what an answer normally takes
///    (the cluster window's quantile, or this attempt's time to its first answer), from its
///    start.
///
/// A reused connection (`kept`) has no handshake to learn from; the cluster's recent
/// handshake times stand in for `h`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Adaptive {
    /// Delay while nothing is known about the attempt (default 250 ms, RFC 8305).
    pub cold: Duration,
    /// A connected broker silent for `multiple` × its handshake time is suspected (default 2:
    /// its first answer needs one round trip and almost no broker work; the fleet
    /// simulation's tuning is in `docs/performance/tuning.md`).
    pub multiple: u32,
    /// Lower clamp on every wait (default 2 ms): loopback handshakes take microseconds, and
    /// a broker's first answer is never that fast.
    pub floor: Duration,
    /// Upper clamp (default 2 s): a slow handshake must not stall the fan-out for long.
    pub ceiling: Duration,
    /// An answering broker is hedged only after `patience` × what an answer normally takes
    /// (default 16): its slowness is queueing, and hedging into queues is what turns a
    /// failover into a storm.
    pub patience: u32,
}

impl Default for Adaptive {
    fn default() -> Self {
        Adaptive {
            cold: Duration::from_millis(250),
            multiple: 2,
            floor: Duration::from_millis(2),
            ceiling: Duration::from_secs(2),
            patience: 16,
        }
    }
}

impl Adaptive {
    fn clamp(&self, d: Duration) -> Duration {
        d.max(self.floor).min(self.ceiling.max(self.floor))
    }

    /// Phase 1: the wait from the start of an attempt whose handshake has not completed,
    /// given the recent response-time quantile (if a window exists).
    pub fn before_connect(&self, recent: Option<Duration>) -> Duration {
        match recent {
            Some(r) => self.clamp(r),
            None => self.cold.max(self.floor),
        }
    }

    /// Phase 2: the wait, from the end of its handshake, for the first answer of an attempt
    /// whose handshake took `handshake`.
    pub fn after_handshake(&self, handshake: Duration) -> Duration {
        self.clamp(handshake.saturating_mul(self.multiple))
    }

    /// Phase 3: the wait, from its start, for an attempt whose broker is answering, given
    /// what an answer normally takes (`typical`).
    pub fn while_answering(&self, typical: Duration) -> Duration {
        self.clamp(typical.saturating_mul(self.patience))
    }
}

/// How many attempts start at each stagger tick.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Growth {
    /// `n` more at every tick (`Linear(1)` is the gentlest fan-out).
    Linear(u32),
    /// Tick k starts `initial · factor^k` attempts: reaches everyone fast on big clusters.
    Exponential(f64),
}

/// The fan-out policy: how attempts are started over time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Fanout {
    /// Attempts started at once when the refresh begins (default 1).
    pub initial: u32,
    /// Delay before the next attempt when none has answered (default adaptive).
    pub stagger: Stagger,
    /// How many attempts start at each stagger tick (default `Linear(2)`: a silent broker
    /// is evidence of a partial outage, and two fresh brokers per tick get past a run of
    /// hung ones in half the ticks; the throttle still bounds what is in flight).
    pub growth: Growth,
    /// Throttle: at most this many attempts in flight (default 3). Bounds the load one
    /// client can put on a cluster during a failover.
    pub max_in_flight: u32,
    /// Fraction of each stagger delay that is randomised, in `[0, 1]` (default 0.2): the
    /// delay becomes `d · (1 − jitter · u)`, `u` uniform in `[0, 1)`, so clients that lost
    /// the same broker at the same moment do not hedge in lockstep.
    pub jitter: f64,
    /// The four rules that shape the fan-out beyond its timing; each is on by default and
    /// each can be switched off to measure what it buys (`docs/performance/tuning.md`).
    pub tuning: Tuning,
}

/// Rules of the fan-out that are on by default and rarely worth changing: switches kept
/// apart from [`Fanout`]'s timing so that the main struct shows what people tune.
///
/// `#[non_exhaustive]`: a new rule can be added without breaking anyone; build one with
/// `Tuning::default()` and set fields (or [`RefreshConfig::set`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Tuning {
    /// A fast failure (e.g. refused) starts the next attempt at once (default true), as in
    /// Happy Eyeballs: waiting out a stagger delay after a definite "no" is pure latency.
    pub next_on_failure: bool,
    /// When the throttle is full at a stagger tick, cancel the newest silent attempt whose own
    /// stagger delay has run out (so it is suspected; failing that, the newest silent one)
    /// and start the next broker in its place (default true).
    /// Without this, `max_in_flight` hung brokers at the head of the list stall the refresh
    /// for a whole attempt timeout; with it, load stays bounded by the throttle and the
    /// refresh keeps moving.
    pub replace_when_full: bool,
    /// When one attempt's broker starts answering, cancel every attempt whose broker has
    /// said nothing yet (default true). The answering broker is alive and almost certainly
    /// finishes first; the silent ones are hung or queued behind others, and left running
    /// each would send its own metadata request once its broker caught up — during a
    /// failover storm, that is exactly the extra load that keeps the storm going.
    pub cancel_silent_on_answer: bool,
    /// On a fast network, a tick that starts several attempts starts them one by one,
    /// `delay / n` apart (the delay that ran out, shared among the tick's `n` attempts, but
    /// at least the adaptive floor), and drops the rest as soon as a broker answers
    /// (default true). There the first fresh broker answers before its partner is due, so
    /// getting past a silent broker costs one connection, as in a one-at-a-time client. A
    /// network is fast when two handshakes of the attempt just suspected fit in that share;
    /// on a slower one the partner could not be saved and waiting would only delay it, so
    /// the tick starts all at once. The next tick counts from the tick's first attempt
    /// either way.
    pub spread_ticks: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning { next_on_failure: true, replace_when_full: true, cancel_silent_on_answer: true, spread_ticks: true }
    }
}

impl Default for Fanout {
    fn default() -> Self {
        Fanout {
            initial: 1,
            stagger: Stagger::Adaptive(Adaptive::default()),
            growth: Growth::Linear(2),
            max_in_flight: 3,
            jitter: 0.2,
            tuning: Tuning::default(),
        }
    }
}

/// Retry passes when every broker failed: exponential backoff with full jitter.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Backoff {
    /// Extra passes over the brokers after the first (default 3, like Sarama's
    /// `Metadata.Retry.Max`).
    pub retries: u32,
    /// Backoff before the first retry (default 250 ms, Sarama's `Metadata.Retry.Backoff`).
    pub initial: Duration,
    /// Growth of the backoff per retry (default 2).
    pub multiplier: f64,
    /// Upper bound of the backoff (default 5 s).
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { retries: 3, initial: Duration::from_millis(250), multiplier: 2.0, cap: Duration::from_secs(5) }
    }
}

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
/// budget across refreshes, the window of recent response times.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterConfig {
    /// The policy each refresh runs with.
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
    /// Which quantile of the recent response-time window (the last
    /// [`Estimator::WINDOW`](crate::Estimator::WINDOW) winning answers, and fresh handshakes) warm refreshes
    /// use as "what an answer normally takes", with the adaptive stagger: the wait before a
    /// handshake completes, and the base of the patience for an answering broker (default
    /// 0.99: later than this cluster almost ever is; `docs/performance/tuning.md` compares
    /// p90 and the median).
    pub window_quantile: f64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            refresh: RefreshConfig::default(),
            refresh_interval: Duration::from_secs(300),
            rebootstrap: true,
            hedge_budget: HedgeBudget::default(),
            window_quantile: 0.99,
        }
    }
}

impl ClusterConfig {
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
        Ok(())
    }
}

/// Everything that shapes one refresh. `Default` is the adaptive policy of DESIGN.md.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RefreshConfig {
    /// Fan-out timing, growth and throttle.
    pub fanout: Fanout,
    /// One attempt: connect + ApiVersions + Metadata (default 10 s, a typical client
    /// request timeout; shorter ones misfire on loaded clusters).
    pub attempt_timeout: Duration,
    /// The whole refresh, enforced even on attempts in flight (default 60 s).
    pub deadline: Duration,
    /// Retry passes and their backoff.
    pub retry: Backoff,
    /// Seed of the in-core PRNG: same seed and inputs ⇒ same commands.
    pub seed: u64,
}

impl Default for RefreshConfig {
    fn default() -> Self {
        RefreshConfig::adaptive()
    }
}

impl RefreshConfig {
    /// The default: adaptive stagger, one attempt first and two more per stagger tick
    /// (`Linear(2)`), throttle 3.
    pub fn adaptive() -> Self {
        RefreshConfig {
            fanout: Fanout::default(),
            attempt_timeout: Duration::from_secs(10),
            deadline: Duration::from_secs(60),
            retry: Backoff::default(),
            seed: 0,
        }
    }

    /// Sarama today: one broker at a time, the next only after the previous failed.
    pub fn sequential() -> Self {
        let mut c = RefreshConfig::adaptive();
        c.fanout.max_in_flight = 1;
        c.fanout.stagger = Stagger::Fixed(c.attempt_timeout);
        c.fanout.jitter = 0.0;
        c.fanout.tuning.replace_when_full = false;
        c
    }

    /// Ask every broker immediately (fast, but `clients × brokers` load at every failover).
    ///
    /// Under a [`crate::Cluster`] the hedge budget still applies: attempts beyond the first
    /// spend tokens, so a long-lived client cannot turn every refresh into a broadcast.
    pub fn all_at_once() -> Self {
        let mut c = RefreshConfig::adaptive();
        c.fanout.initial = u32::MAX;
        c.fanout.max_in_flight = u32::MAX;
        c.fanout.stagger = Stagger::Fixed(Duration::ZERO);
        c.fanout.jitter = 0.0;
        c
    }

    /// The seed discussion's proposal: another broker every 500 ms, fixed.
    pub fn staggered() -> Self {
        let mut c = RefreshConfig::adaptive();
        c.fanout.stagger = Stagger::Fixed(Duration::from_millis(500));
        c.fanout.growth = Growth::Linear(1);
        c
    }

    /// Looks a preset up by name (`adaptive`, `sequential`, `all-at-once`, `staggered`).
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "adaptive" | "default" => Some(Self::adaptive()),
            "sequential" => Some(Self::sequential()),
            "all-at-once" | "all_at_once" => Some(Self::all_at_once()),
            "staggered" => Some(Self::staggered()),
            _ => None,
        }
    }

    /// Names of the presets, for help texts and UIs.
    pub const PRESETS: [&'static str; 4] = ["adaptive", "sequential", "all-at-once", "staggered"];

    /// Returns the same config with another PRNG seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let f = &self.fanout;
        if f.initial == 0 {
            return Err(ConfigError::new("fanout.initial", "must be at least 1"));
        }
        if f.max_in_flight == 0 {
            return Err(ConfigError::new("fanout.max_in_flight", "must be at least 1"));
        }
        if f.initial > f.max_in_flight {
            return Err(ConfigError::new(
                "fanout.initial",
                alloc::format!("({}) must not exceed fanout.max_in_flight ({})", f.initial, f.max_in_flight),
            ));
        }
        if !(0.0..=1.0).contains(&f.jitter) {
            return Err(ConfigError::new("fanout.jitter", alloc::format!("({}) must be within [0, 1]", f.jitter)));
        }
        match f.growth {
            Growth::Linear(0) => return Err(ConfigError::new("fanout.growth", "Linear(n) needs n ≥ 1")),
            Growth::Exponential(x) if !(1.0..=1e6).contains(&x) => {
                return Err(ConfigError::new(
                    "fanout.growth",
                    alloc::format!("Exponential({x}) needs a factor in [1, 1e6]"),
                ))
            }
            _ => {}
        }
        if self.attempt_timeout.is_zero() {
            return Err(ConfigError::new("attempt_timeout", "must be positive"));
        }
        if self.deadline.is_zero() {
            return Err(ConfigError::new("deadline", "must be positive"));
        }
        match f.stagger {
            Stagger::Fixed(d) if d > self.deadline => {
                return Err(ConfigError::new("fanout.stagger", "must not exceed the deadline"));
            }
            Stagger::Adaptive(a) => {
                if a.cold > self.deadline {
                    return Err(ConfigError::new("fanout.stagger.adaptive.cold", "must not exceed the deadline"));
                }
                if a.multiple == 0 {
                    return Err(ConfigError::new("fanout.stagger.adaptive.multiple", "must be at least 1"));
                }
                if a.patience == 0 {
                    return Err(ConfigError::new("fanout.stagger.adaptive.patience", "must be at least 1"));
                }
                if a.floor > a.ceiling {
                    return Err(ConfigError::new(
                        "fanout.stagger.adaptive.floor",
                        "must not exceed fanout.stagger.adaptive.ceiling",
                    ));
                }
            }
            _ => {}
        }
        let r = &self.retry;
        if !(1.0..=1e6).contains(&r.multiplier) {
            return Err(ConfigError::new(
                "retry.multiplier",
                alloc::format!("({}) must be within [1, 1e6]", r.multiplier),
            ));
        }
        if r.initial > r.cap {
            return Err(ConfigError::new("retry.initial", "must not exceed retry.cap"));
        }
        if r.retries > 1000 {
            return Err(ConfigError::new("retry.retries", "must be at most 1000"));
        }
        Ok(())
    }
}

/// The schema: every knob of [`RefreshConfig`] and [`ClusterConfig`], in the order UIs show
/// them. One row per leaf of the serde JSON; `config::knobs`' tests fail if a field has no
/// row, a row names no field, or `set` and serde disagree.
const KNOBS: &[Knob] = &[
    Knob::refresh("fanout.initial", KnobKind::U32, "attempts started at once when the refresh begins", |c| {
        Some(Slot::U32(&mut c.fanout.initial))
    }),
    Knob::refresh(
        "fanout.stagger",
        KnobKind::Choice {
            choices: &[
                KnobChoice { name: "adaptive", param: None },
                KnobChoice { name: "fixed", param: Some(KnobKind::Duration) },
            ],
        },
        "delay before the next attempt: adaptive (learns from the handshake) or fixed:DURATION",
        |c| Some(Slot::Stagger(&mut c.fanout.stagger)),
    ),
    Knob::refresh("fanout.stagger.adaptive.cold", KnobKind::Duration, "wait while nothing is known (RFC 8305)", |c| {
        adaptive(c).map(|a| Slot::Duration(&mut a.cold))
    }),
    Knob::refresh(
        "fanout.stagger.adaptive.multiple",
        KnobKind::U32,
        "suspect a connected, silent broker this many handshake times after its handshake",
        |c| adaptive(c).map(|a| Slot::U32(&mut a.multiple)),
    ),
    Knob::refresh("fanout.stagger.adaptive.floor", KnobKind::Duration, "lower clamp of every adaptive wait", |c| {
        adaptive(c).map(|a| Slot::Duration(&mut a.floor))
    }),
    Knob::refresh("fanout.stagger.adaptive.ceiling", KnobKind::Duration, "upper clamp of every adaptive wait", |c| {
        adaptive(c).map(|a| Slot::Duration(&mut a.ceiling))
    }),
    Knob::refresh(
        "fanout.stagger.adaptive.patience",
        KnobKind::U32,
        "hedge an answering broker only after this many times what an answer normally takes",
        |c| adaptive(c).map(|a| Slot::U32(&mut a.patience)),
    ),
    Knob::refresh(
        "fanout.growth",
        KnobKind::Choice {
            choices: &[
                KnobChoice { name: "linear", param: Some(KnobKind::U32) },
                KnobChoice { name: "exponential", param: Some(KnobKind::F64) },
            ],
        },
        "attempts per stagger tick: linear:N more, or exponential:F (tick k starts initial·F^k)",
        |c| Some(Slot::Growth(&mut c.fanout.growth)),
    ),
    Knob::refresh("fanout.max_in_flight", KnobKind::U32, "throttle: at most this many attempts in flight", |c| {
        Some(Slot::U32(&mut c.fanout.max_in_flight))
    }),
    Knob::refresh("fanout.jitter", KnobKind::F64, "fraction of each stagger delay that is randomised, 0–1", |c| {
        Some(Slot::F64(&mut c.fanout.jitter))
    }),
    Knob::refresh(
        "fanout.tuning.next_on_failure",
        KnobKind::Bool,
        "a fast failure (refused) starts the next attempt at once",
        |c| Some(Slot::Bool(&mut c.fanout.tuning.next_on_failure)),
    ),
    Knob::refresh(
        "fanout.tuning.replace_when_full",
        KnobKind::Bool,
        "at a tick with the throttle full, cancel the newest silent attempt for the next broker",
        |c| Some(Slot::Bool(&mut c.fanout.tuning.replace_when_full)),
    ),
    Knob::refresh(
        "fanout.tuning.cancel_silent_on_answer",
        KnobKind::Bool,
        "when one broker starts answering, cancel every attempt whose broker has said nothing",
        |c| Some(Slot::Bool(&mut c.fanout.tuning.cancel_silent_on_answer)),
    ),
    Knob::refresh(
        "fanout.tuning.spread_ticks",
        KnobKind::Bool,
        "on a fast network, start a tick's n attempts delay/n apart and drop the rest once one answers",
        |c| Some(Slot::Bool(&mut c.fanout.tuning.spread_ticks)),
    ),
    Knob::refresh("attempt_timeout", KnobKind::Duration, "one attempt: connect + ApiVersions + Metadata", |c| {
        Some(Slot::Duration(&mut c.attempt_timeout))
    }),
    Knob::refresh("deadline", KnobKind::Duration, "the whole refresh, enforced on attempts in flight", |c| {
        Some(Slot::Duration(&mut c.deadline))
    }),
    Knob::refresh("retry.retries", KnobKind::U32, "extra passes over the brokers after every broker failed", |c| {
        Some(Slot::U32(&mut c.retry.retries))
    }),
    Knob::refresh("retry.initial", KnobKind::Duration, "backoff before the first retry", |c| {
        Some(Slot::Duration(&mut c.retry.initial))
    }),
    Knob::refresh("retry.multiplier", KnobKind::F64, "growth of the backoff per retry", |c| {
        Some(Slot::F64(&mut c.retry.multiplier))
    }),
    Knob::refresh("retry.cap", KnobKind::Duration, "upper bound of the backoff", |c| {
        Some(Slot::Duration(&mut c.retry.cap))
    }),
    Knob::refresh("seed", KnobKind::U64, "seed of the core's PRNG: same seed and inputs, same commands", |c| {
        Some(Slot::U64(&mut c.seed))
    }),
    Knob::cluster("refresh_interval", KnobKind::Duration, "refresh this often even if nobody asks", |c| {
        Some(Slot::Duration(&mut c.refresh_interval))
    }),
    Knob::cluster(
        "rebootstrap",
        KnobKind::Bool,
        "start again from the seeds when every discovered broker failed",
        |c| Some(Slot::Bool(&mut c.rebootstrap)),
    ),
    Knob::cluster("hedge_budget.ratio", KnobKind::F64, "hedge tokens earned per refresh", |c| {
        Some(Slot::F64(&mut c.hedge_budget.ratio))
    }),
    Knob::cluster("hedge_budget.burst", KnobKind::U32, "hedge bucket size, and its content at start", |c| {
        Some(Slot::U32(&mut c.hedge_budget.burst))
    }),
    Knob::cluster(
        "window_quantile",
        KnobKind::F64,
        "which quantile of the recent response-time window warm refreshes wait for",
        |c| Some(Slot::F64(&mut c.window_quantile)),
    ),
];

/// Every knob of [`RefreshConfig`] and [`ClusterConfig`] (see [`Knob`]): what a CLI, a
/// type definition or a UI lists instead of keeping its own copy.
pub fn knobs() -> &'static [Knob] {
    KNOBS
}

/// The adaptive parameters, if the stagger is adaptive (their knobs exist only then).
fn adaptive(c: &mut RefreshConfig) -> Option<&mut Adaptive> {
    match &mut c.fanout.stagger {
        Stagger::Adaptive(a) => Some(a),
        Stagger::Fixed(_) => None,
    }
}

impl RefreshConfig {
    /// Sets the knob at `path` (as listed by [`knobs()`], scope [`KnobScope::Refresh`]) from
    /// text: durations as `250ms`, `1.5s`, `10s`; `max` for `u32::MAX`; growth as `linear:2`
    /// or `exponential:2`; stagger as `adaptive` or `fixed:100ms`. The error names the knob
    /// (or says the path is none). The value is not validated against the others: call
    /// [`RefreshConfig::validate`] once every knob is set.
    pub fn set(&mut self, path: &str, value: &str) -> Result<(), ConfigError> {
        let knob = knobs::find(path, KnobScope::Refresh)?;
        let slot = match knob.access {
            Access::Refresh(slot) => slot(self),
            Access::Cluster(_) => None,
        };
        knob.write(slot, value)
    }

    /// The current value of the knob at `path`, or `None` if there is no such refresh knob
    /// or it does not apply (an adaptive parameter under a fixed stagger).
    pub fn get(&self, path: &str) -> Option<KnobValue> {
        let knob = knobs::find(path, KnobScope::Refresh).ok()?;
        let mut copy = *self;
        match knob.access {
            Access::Refresh(slot) => slot(&mut copy).map(|s| s.value()),
            Access::Cluster(_) => None,
        }
    }
}

impl ClusterConfig {
    /// Sets any knob of [`knobs()`]: a cluster knob by its path (`hedge_budget.burst`), a
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_distinct() {
        for name in RefreshConfig::PRESETS {
            let c = RefreshConfig::preset(name).unwrap();
            c.validate().unwrap();
        }
        assert_eq!(RefreshConfig::sequential().fanout.max_in_flight, 1);
        assert_eq!(RefreshConfig::staggered().fanout.stagger, Stagger::Fixed(Duration::from_millis(500)));
        assert!(matches!(RefreshConfig::default().fanout.stagger, Stagger::Adaptive(_)));
        assert!(RefreshConfig::preset("bogus").is_none());
    }

    #[test]
    fn validation_names_the_field() {
        type Mutation = fn(&mut RefreshConfig);
        let cases: [(Mutation, &str); 9] = [
            (|c| c.fanout.initial = 0, "fanout.initial"),
            (|c| c.fanout.max_in_flight = 0, "fanout.max_in_flight"),
            (|c| c.fanout.initial = 5, "fanout.initial"),
            (|c| c.fanout.jitter = 1.5, "fanout.jitter"),
            (|c| c.fanout.jitter = f64::NAN, "fanout.jitter"),
            (|c| c.fanout.growth = Growth::Exponential(0.5), "fanout.growth"),
            (|c| c.fanout.stagger = Stagger::Fixed(Duration::from_secs(61)), "fanout.stagger"),
            (|c| c.attempt_timeout = Duration::ZERO, "attempt_timeout"),
            (|c| c.retry.multiplier = f64::INFINITY, "retry.multiplier"),
        ];
        for (mutate, field) in cases {
            let mut c = RefreshConfig::default();
            mutate(&mut c);
            let err = c.validate().unwrap_err();
            assert_eq!(err.field, field, "{err}");
            assert!(alloc::format!("{err}").contains(field));
        }
    }

    #[test]
    fn adaptive_clamps_the_handshake_multiple() {
        let a = Adaptive::default();
        assert_eq!(a.after_handshake(Duration::from_micros(100)), Duration::from_millis(2), "floor");
        assert_eq!(a.after_handshake(Duration::from_millis(20)), Duration::from_millis(40));
        assert_eq!(a.after_handshake(Duration::from_secs(5)), Duration::from_secs(2), "ceiling");
        assert_eq!(a.before_connect(None), Duration::from_millis(250), "cold");
        assert_eq!(a.before_connect(Some(Duration::from_millis(8))), Duration::from_millis(8));
        assert_eq!(a.while_answering(Duration::from_millis(8)), Duration::from_millis(128));
        assert_eq!(a.while_answering(Duration::from_secs(1)), Duration::from_secs(2), "ceiling");
    }
}
