//! The fan-out knobs: the stagger delay, growth, throttle, jitter and the tuning switches.

use core::time::Duration;
use serde::{Deserialize, Serialize};

/// How long to wait for an answer before starting the next attempt.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stagger {
    /// A fixed delay, e.g. the seed discussion's "try another broker every 500 ms".
    Fixed(Duration),
    /// Learn from the connection itself (the default); see [`Adaptive`].
    Adaptive(Adaptive),
}

/// Adaptive stagger: hedge against *silence*, not against slowness — and judge silence by the
/// broker's own pace, never by the kernel's.
///
/// An attempt goes through three phases, and each has its own evidence:
///
/// 1. **Connecting.** Nothing is known about this broker yet. Wait `cold` (40 ms) or, in a
///    long-lived [`crate::Cluster`], its recent response time (the
///    [`ClusterConfig::window_quantile`](crate::ClusterConfig::window_quantile) of its
///    response-time window): a handshake slower than a whole answer usually is, is suspect.
///    Being bold here is cheap: a connect that has not completed cost the cluster one SYN,
///    and the first attempt to connect cancels the older ones still connecting
///    ([`Tuning::cancel_outrun`]), so the bold connects never turn into extra requests.
/// 2. **Connected, silent.** The TCP handshake is done, but it was the peer's *kernel* that
///    answered it: a stopped broker's kernel completes handshakes just as fast. What says the
///    broker is hung is a first answer later than this cluster's brokers give one. So the
///    next attempt starts `multiple` × the broker pace after the handshake: the pace is the
///    [`ClusterConfig::window_quantile`](crate::ClusterConfig::window_quantile) of the first
///    answers a long-lived [`crate::Cluster`] has seen on fresh connections, or a prior
///    while none has been seen (a one-shot refresh): `silent`, or `silent_tls` when a TLS
///    handshake follows the TCP one ([`crate::Input::Connected`]'s `tls`), since then the
///    first answer is the end of that handshake, the broker's costliest work for a client.
///    On a slow path the round trip itself counts: never sooner than `multiple` × the
///    handshake.
/// 3. **Answering.** The broker showed its process runs: the end of a TLS handshake, or its
///    first Kafka frame ([`crate::Input::FirstFrame`]). It is alive and working on our
///    request; what remains is queueing and broker work. Another broker would most likely
///    queue us just the same — on a loaded cluster a hedge only adds load — so the next
///    attempt waits `patience` times what an answer normally takes (the recent response
///    time, or this attempt's time to its first answer), from its start. While a broker is
///    checking the credentials ([`crate::Input::Authenticating`]) it waits at least
///    `ceiling`: Kafka authenticates on its network threads and answers a wrong credential
///    only after a deliberate delay, so a slow verdict is most likely a refusal every other
///    broker would give too, each at the cost of a TLS handshake and a failed
///    authentication.
///
/// A reused connection (`kept`) has no handshake to learn from; the cluster's recent
/// handshake times stand in for its handshake.
///
/// Two pieces of evidence stretch the waits while every broker in flight is silent:
///
/// * **Silent brokers superseded** (a full throttle, or no hedge budget left): each doubles
///   the next delay, since a throttle full of silent brokers may be an overload as much as
///   an outage — but never beyond `pace`, so past any run of hung brokers the fan-out keeps
///   trying fresh ones (two per tick) at least every `pace`.
/// * **A late answer**: a broker whose first answer came only after it had been suspected
///   (later than phase 2's wait) was queueing, not hung — the evidence of an overload. For
///   the rest of the refresh no silent broker is suspected before `multiple` times that
///   wait, and patience counts from it too.
///
/// **Why the refresh runs** ([`crate::RefreshCause`]) moves the silent waits too: a cause every
/// client sees at once (a refused or reset connection, stale metadata: a failover) makes the
/// refresh gentle — a broker still connecting is suspected only after `pace`, one that
/// accepted the connection (silent or answering) only at `ceiling`, and each tick starts one
/// broker — because then the brokers left are queued behind a storm of refreshes, and a
/// hedge would only add a connection, a TLS handshake where there is one, and an ApiVersions
/// to every queue (measured on real Kafka: `docs/performance/storm.md`).
///
/// The defaults of `silent`, `multiple` and `floor` come from first answers measured on real
/// Kafka: `docs/performance/gentleness.md`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Adaptive {
    /// Delay while nothing is known about the attempt (default 40 ms: a blackholed broker
    /// first costs about what it costs librdkafka, ~50 ms, without opening more
    /// connections; RFC 8305 allows down to 10 ms, and its 250 ms is for paths where every
    /// extra connect is a cost, which here it is not: see [`Tuning::cancel_outrun`]). It is
    /// also the longest a kept connection stays unsuspected while silent in a refresh that is
    /// not gentle: its first answer is one request on an authenticated connection, however
    /// slow a burst of handshakes made the windows.
    pub cold: Duration,
    /// A connected broker silent for `multiple` × the broker pace (or × its handshake time,
    /// on a path slower than that) is suspected (default 2: twice what this cluster's first
    /// answers take, so ordinary broker jitter never looks like a hang).
    pub multiple: u32,
    /// The broker pace while no first answer has been seen (default 12 ms, so a connected
    /// broker is suspected 24 ms after its handshake: above every first answer of a healthy
    /// Kafka 4.4 broker measured in `docs/performance/gentleness.md`, and well inside
    /// librdkafka's ~50 ms per broker past a hung one).
    pub silent: Duration,
    /// The broker pace while no first answer has been seen, on a connection whose first
    /// answer ends a TLS handshake (default 20 ms, so such a broker is suspected 32–40 ms
    /// after its TCP handshake, jittered: above the TLS handshakes of healthy Kafka 4.4
    /// brokers measured over SASL_SSL in `docs/performance/gentleness.md`, where `silent`'s
    /// 24 ms made a second TLS handshake and SCRAM exchange in some healthy refreshes).
    pub silent_tls: Duration,
    /// Lower clamp on every wait (default 10 ms, RFC 8305's minimum Connection Attempt
    /// Delay): no wait is shorter, whatever the pace windows hold.
    pub floor: Duration,
    /// Upper clamp (default 2 s): a slow handshake must not stall the fan-out for long. It is
    /// also how long a gentle refresh waits on a broker that accepted the connection before
    /// adding another: past a broker stopped during a failover, that is what such a refresh
    /// pays, against the whole attempt timeout for `sequential`. And it is how long any
    /// refresh waits on a broker checking its credentials before trying another.
    pub ceiling: Duration,
    /// An answering broker is hedged only after `patience` × what an answer normally takes
    /// (default 16): its slowness is queueing, and hedging into queues is what turns a
    /// failover into a storm.
    pub patience: u32,
    /// The longest a silent-phase delay grows by superseding silent brokers (default
    /// 100 ms: with two brokers per tick, a fresh broker at least every ~50 ms past any run
    /// of hung ones — librdkafka's pace — while a failover storm's clients still slow down;
    /// measured in `docs/performance/hung-first.md` and `fleet.md`). A delay that starts
    /// longer than `pace` is never shortened by it. It is also how long a gentle refresh
    /// waits for a connect.
    pub pace: Duration,
}

impl Default for Adaptive {
    fn default() -> Self {
        Adaptive {
            cold: Duration::from_millis(40),
            multiple: 2,
            silent: Duration::from_millis(12),
            silent_tls: Duration::from_millis(20),
            floor: Duration::from_millis(10),
            ceiling: Duration::from_secs(2),
            patience: 16,
            pace: Duration::from_millis(100),
        }
    }
}

impl Adaptive {
    fn clamp(&self, d: Duration) -> Duration {
        d.max(self.floor).min(self.ceiling.max(self.floor))
    }

    /// Phase 1: the wait from the start of an attempt whose handshake has not completed,
    /// given the recent response time (if a response-time window has one).
    pub fn before_connect(&self, recent_response_time: Option<Duration>) -> Duration {
        match recent_response_time {
            Some(r) => self.clamp(r),
            None => self.cold.max(self.floor),
        }
    }

    /// `multiple` round trips of a handshake that took `handshake`: how long a connect may
    /// lag behind one that completed before it counts as lost ([`Tuning::cancel_outrun`]).
    pub fn after_handshake(&self, handshake: Duration) -> Duration {
        self.clamp(handshake.saturating_mul(self.multiple))
    }

    /// The broker pace assumed while no first answer has been seen: `silent_tls` when the
    /// first answer ends a TLS handshake, `silent` otherwise.
    pub fn prior(&self, tls: bool) -> Duration {
        if tls {
            self.silent_tls
        } else {
            self.silent
        }
    }

    /// Phase 2: the wait, from the end of its handshake, for the first answer of an attempt
    /// whose handshake took `handshake`, given the broker pace (a quantile of the first
    /// answers seen on fresh connections; the [`Adaptive::prior`] when none was) and
    /// whether a TLS handshake follows (`tls`).
    pub fn while_connected(&self, handshake: Duration, broker_pace: Option<Duration>, tls: bool) -> Duration {
        let pace = broker_pace.unwrap_or(self.prior(tls));
        self.clamp(pace.max(handshake).saturating_mul(self.multiple))
    }

    /// The soonest a silent kept connection is suspected: `multiple × floor` (20 ms by
    /// default), whatever pace its Metadata answers showed. Waiting on a kept connection
    /// costs the broker nothing, while a hedge costs it a new connection (over SASL_SSL a
    /// TLS handshake and a SCRAM exchange). In 6,000 healthy refreshes on kept connections
    /// to Kafka 4.4, 4 Metadata answers took 10.3–13.7 ms (host pauses) and none 20 ms
    /// (`docs/performance/storm.md`, "A kept connection's floor").
    pub fn kept_floor(&self) -> Duration {
        self.clamp(self.floor.saturating_mul(self.multiple))
    }

    /// Phase 3: the wait, from its start, for an attempt whose broker is answering, given
    /// what an answer normally takes (`typical`).
    pub fn while_answering(&self, typical: Duration) -> Duration {
        self.clamp(typical.saturating_mul(self.patience))
    }

    /// A silent-phase wait `delay` after `supersedes` silent brokers were superseded and
    /// with the longest late answer seen so far (`queueing`, zero when none): doubled per
    /// supersede up to `pace` (never below `delay`), and at least `multiple × queueing`.
    pub fn while_silent(&self, delay: Duration, supersedes: u32, queueing: Duration) -> Duration {
        let doubled = delay.saturating_mul(1u32 << supersedes.min(20));
        doubled.min(self.pace.max(delay)).max(queueing.saturating_mul(self.multiple))
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
/// `replace_when_full` is a policy switch (`RefreshConfig::sequential()` turns it off). The
/// others exist to measure what each rule earns (`lab/`'s `rule_costs`,
/// `docs/performance/rule-costs.md`): they are hidden from this documentation and stay
/// settable (`fanout.tuning.<name>`) for that.
///
/// `#[non_exhaustive]`: a new rule can be added without breaking anyone; build one with
/// `Tuning::default()` and set fields (or [`RefreshConfig::set`](crate::RefreshConfig::set)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Tuning {
    /// A fast failure (e.g. refused) starts the next attempt at once (default true), as in
    /// Happy Eyeballs: waiting out a stagger delay after a definite "no" is pure latency.
    #[doc(hidden)]
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
    #[doc(hidden)]
    pub cancel_silent_on_answer: bool,
    /// On a fast network, a tick that starts several attempts starts them one by one,
    /// `delay / n` apart (the delay that ran out, shared among the tick's `n` attempts, but
    /// at least the adaptive floor), and drops the rest as soon as a broker answers
    /// (default true). There the first fresh broker answers before its partner is due, so
    /// getting past a silent broker costs one connection, as in a one-at-a-time client. A
    /// network is fast when two handshakes of the attempt just suspected fit in that share;
    /// on a slower one the partner could not be saved and waiting would only delay it, so
    /// the tick starts all at once — unless its first attempt went out on a kept
    /// connection, which answers in a kept connection's time whatever the network: then the
    /// rest wait their share for it. The next tick counts from the tick's first attempt
    /// either way.
    #[doc(hidden)]
    pub spread_ticks: bool,
    /// When an attempt connects, cancel every older attempt still connecting after more
    /// than the adaptive stagger's `multiple` of this handshake (default true): its SYN is
    /// lost or its host gone (a blackhole), and the broker that connected is the one to ask.
    /// This is what lets the cold delay be short: a bold connect past a stuck one leaves
    /// one conversation, not two.
    #[doc(hidden)]
    pub cancel_outrun: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            next_on_failure: true,
            replace_when_full: true,
            cancel_silent_on_answer: true,
            spread_ticks: true,
            cancel_outrun: true,
        }
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
