//! The one table of knobs ([`knobs()`](crate::knobs)) and setting a refresh knob by path.

use super::knobs::{self, Access, Slot};
use super::*;
use crate::error::ConfigError;

/// The schema: every knob of [`RefreshConfig`] and [`ClusterConfig`], in the order UIs show
/// them. One row per leaf of the serde JSON; `config::knobs`' tests fail if a field has no
/// row, a row names no field, or `set` and serde disagree. A `static`, not a `const`: one
/// copy of its texts in a binary rather than one per use.
pub(super) static KNOBS: &[Knob] = &[
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
    Knob::refresh(
        "fanout.stagger.adaptive.cold",
        KnobKind::Duration,
        "wait while nothing is known about an attempt (before its handshake)",
        |c| adaptive(c).map(|a| Slot::Duration(&mut a.cold)),
    ),
    Knob::refresh(
        "fanout.stagger.adaptive.multiple",
        KnobKind::U32,
        "suspect a connected, silent broker this many broker paces (or handshakes, if longer) after its handshake",
        |c| adaptive(c).map(|a| Slot::U32(&mut a.multiple)),
    ),
    Knob::refresh(
        "fanout.stagger.adaptive.silent",
        KnobKind::Duration,
        "broker pace (handshake to first answer) assumed until a first answer is seen",
        |c| adaptive(c).map(|a| Slot::Duration(&mut a.silent)),
    ),
    Knob::refresh(
        "fanout.stagger.adaptive.silent_tls",
        KnobKind::Duration,
        "broker pace assumed until a first answer is seen, when that answer ends a TLS handshake",
        |c| adaptive(c).map(|a| Slot::Duration(&mut a.silent_tls)),
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
        "fanout.stagger.adaptive.pace",
        KnobKind::Duration,
        "longest a silent wait grows by superseding silent brokers (a fresh tick at least this often)",
        |c| adaptive(c).map(|a| Slot::Duration(&mut a.pace)),
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
        "fanout.tuning.cancel_outrun",
        KnobKind::Bool,
        "when an attempt connects, cancel older ones still connecting well past its handshake",
        |c| Some(Slot::Bool(&mut c.fanout.tuning.cancel_outrun)),
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
    Knob::refresh(
        "shuffle_seeds",
        KnobKind::Bool,
        "try the seeds in an order shuffled by the seed, not as listed",
        |c| Some(Slot::Bool(&mut c.shuffle_seeds)),
    ),
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
    Knob::cluster(
        "spare_connections",
        KnobKind::U32,
        "idle connections to other brokers kept beside the winner's, for cheap hedges",
        |c| Some(Slot::U32(&mut c.spare_connections)),
    ),
    Knob::cluster("gentle_until_calm", KnobKind::Bool, "refreshes run gently until one meets no queue", |c| {
        Some(Slot::Bool(&mut c.gentle_until_calm))
    }),
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
    /// Sets the knob at `path` (as listed by [`knobs()`](crate::knobs), scope [`KnobScope::Refresh`]) from
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
