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

mod cluster;
mod fanout;
mod knobs;
mod table;

pub use cluster::{ClusterConfig, HedgeBudget};
pub use fanout::{Adaptive, Fanout, Growth, Stagger, Tuning};
pub use knobs::{parse_duration, Knob, KnobChoice, KnobKind, KnobScope, KnobValue};
pub use table::knobs;

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
    /// Seed of the in-core PRNG: same seed and inputs ⇒ same commands. The live adapters
    /// (tokio, blocking, browser) replace the default, 0, with a random draw per refresh or
    /// client (`SessionConfig::seed_unless_set`), so programs started together do not all
    /// shuffle and jitter alike; any other value is kept, and a trace records the seed a
    /// refresh ran with. The Go and Python bindings draw their own.
    pub seed: u64,
    /// Try the seed brokers in an order shuffled by `seed` instead of the order written
    /// (default `true`, as librdkafka, the Java client, franz-go and Sarama do). A fleet started
    /// together then spreads over the seeds instead of all asking the first, and a faulty
    /// first seed costs one refresh in as many as there are seeds, not every one; the
    /// worst case is the same in either order (`docs/performance/seed-order.md`). `false`
    /// keeps the order written: an operator's nearest broker first, or `stagger demo`'s
    /// worst case.
    pub shuffle_seeds: bool,
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
            shuffle_seeds: true,
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
        assert_eq!(a.after_handshake(Duration::from_micros(100)), Duration::from_millis(10), "floor");
        assert_eq!(a.after_handshake(Duration::from_millis(20)), Duration::from_millis(40));
        assert_eq!(a.after_handshake(Duration::from_secs(5)), Duration::from_secs(2), "ceiling");
        assert_eq!(a.before_connect(None), Duration::from_millis(40), "cold");
        assert_eq!(a.before_connect(Some(Duration::from_millis(8))), Duration::from_millis(10), "floor");
        assert_eq!(a.before_connect(Some(Duration::from_millis(15))), Duration::from_millis(15));
        assert_eq!(a.while_answering(Duration::from_millis(8)), Duration::from_millis(128));
        assert_eq!(a.while_answering(Duration::from_secs(1)), Duration::from_secs(2), "ceiling");
    }

    #[test]
    fn a_kept_connection_is_suspected_no_sooner_than_twice_the_floor() {
        let a = Adaptive::default();
        assert_eq!(a.kept_floor(), Duration::from_millis(20));
        let tight = Adaptive { floor: Duration::from_millis(10), multiple: 3, ..a };
        assert_eq!(tight.kept_floor(), Duration::from_millis(30));
        let low_ceiling = Adaptive { ceiling: Duration::from_millis(15), ..a };
        assert_eq!(low_ceiling.kept_floor(), Duration::from_millis(15), "never past the ceiling");
    }

    #[test]
    fn a_connected_broker_is_judged_by_the_broker_pace_not_the_tcp_handshake() {
        let a = Adaptive::default();
        let ms = Duration::from_millis;
        let loopback = Duration::from_micros(100);
        // (handshake, broker pace seen, TLS follows) -> wait after the handshake
        let table = [
            (loopback, None, false, ms(24)),         // nothing seen yet: 2 × silent
            (loopback, None, true, ms(40)),          // nothing seen, a TLS handshake next: 2 × silent_tls
            (loopback, Some(ms(3)), false, ms(10)),  // a fast cluster: 2 × 3 ms, up to the floor
            (loopback, Some(ms(3)), true, ms(10)),   // a window seen over TLS wins over the prior
            (loopback, Some(ms(30)), false, ms(60)), // a queued one: 2 × its pace
            (ms(40), Some(ms(3)), false, ms(80)),    // a slow path: 2 × the round trip
            (ms(40), None, false, ms(80)),
            (ms(40), None, true, ms(80)),
            (loopback, Some(ms(5000)), false, ms(2000)), // the ceiling
        ];
        for (handshake, pace, tls, want) in table {
            assert_eq!(a.while_connected(handshake, pace, tls), want, "{handshake:?} {pace:?} {tls}");
        }
    }

    #[test]
    fn a_silent_wait_doubles_per_supersede_up_to_the_pace_and_stretches_with_queueing() {
        let a = Adaptive::default();
        let ms = Duration::from_millis;
        // (delay, supersedes, queueing) -> wait
        let table = [
            (ms(2), 0, Duration::ZERO, ms(2)),
            (ms(2), 3, Duration::ZERO, ms(16)),
            (ms(2), 6, Duration::ZERO, ms(100)),
            (ms(2), 40, Duration::ZERO, ms(100)),
            (ms(250), 5, Duration::ZERO, ms(250)),
            (ms(2), 0, ms(30), ms(60)),
            (ms(2), 6, ms(300), ms(600)),
        ];
        for (delay, supersedes, queueing, want) in table {
            assert_eq!(a.while_silent(delay, supersedes, queueing), want, "{delay:?} {supersedes} {queueing:?}");
        }
    }
}
