//! Generated inputs: valid configs and refresh scenarios (steps decoded from raw integers),
//! the inputs a step builds, and arbitrary, possibly invalid config mutations.

use std::time::Duration;

use proptest::prelude::*;
use stagger::{
    Adaptive, AttemptError, AttemptId, Backoff, BrokerMetadata, ClusterConfig, ErrorKind, Fanout, Growth, HedgeBudget,
    Input, Instant, Metadata, RefreshConfig, Stagger, Tuning,
};

pub fn us(micros: u64) -> Duration {
    Duration::from_micros(micros)
}

pub fn at(micros: u64) -> Instant {
    Instant::from_micros(micros)
}

fn arb_stagger() -> impl Strategy<Value = Stagger> {
    prop_oneof![
        3 => (0u64..=2_000_000).prop_map(|d| Stagger::Fixed(us(d))),
        1 => (0u64..=2_000).prop_map(|d| Stagger::Fixed(us(d * 1000))),
        1 => Just(Stagger::Fixed(Duration::ZERO)),
        2 => Just(Stagger::Adaptive(Adaptive::default())),
        2 => (0u64..=1_000_000, 1u32..=16, 0u64..=100_000, 0u64..=3_000_000).prop_map(
            |(cold, multiple, floor, extra)| Stagger::Adaptive(Adaptive {
                cold: us(cold),
                multiple,
                floor: us(floor),
                ceiling: us(floor + extra),
                ..Adaptive::default()
            })
        ),
    ]
}

fn arb_growth() -> impl Strategy<Value = Growth> {
    prop_oneof![(1u32..=3).prop_map(Growth::Linear), (1.0f64..3.0).prop_map(Growth::Exponential)]
}

fn arb_jitter() -> impl Strategy<Value = f64> {
    prop_oneof![3 => 0.0f64..=1.0, 1 => Just(0.0), 1 => Just(1.0)]
}

/// Arbitrary valid knobs, in the ranges of the brief.
fn arb_knobs() -> impl Strategy<Value = RefreshConfig> {
    (
        (1u32..=4, prop_oneof![5 => 1u32..=6, 1 => Just(u32::MAX)]),
        arb_stagger(),
        arb_growth(),
        arb_jitter(),
        (any::<bool>(), any::<bool>()),
        prop_oneof![3 => 1_000u64..=20_000_000, 1 => 1_000u64..=50_000],
        prop_oneof![3 => 1_000u64..=120_000_000, 1 => 1_000u64..=3_000_000],
        (0u32..=4, 0u64..=500_000, 1.0f64..=3.0, 0u64..=5_000_000),
        any::<u64>(),
    )
        .prop_map(
            |(
                (initial, max_in_flight),
                stagger,
                growth,
                jitter,
                (next_on_failure, replace_when_full),
                attempt_timeout,
                deadline,
                (retries, backoff, multiplier, extra),
                seed,
            )| {
                let deadline = us(deadline);
                // Validation refuses a stagger longer than the deadline: clamp it.
                let stagger = match stagger {
                    Stagger::Fixed(d) => Stagger::Fixed(d.min(deadline)),
                    Stagger::Adaptive(a) => Stagger::Adaptive(Adaptive { cold: a.cold.min(deadline), ..a }),
                };
                let mut tuning = Tuning::default();
                tuning.next_on_failure = next_on_failure;
                tuning.replace_when_full = replace_when_full;
                tuning.cancel_silent_on_answer = seed & 1 == 0;
                tuning.spread_ticks = seed & 2 == 0;
                RefreshConfig {
                    fanout: Fanout {
                        initial: initial.min(max_in_flight),
                        stagger,
                        growth,
                        max_in_flight,
                        jitter,
                        tuning,
                    },
                    attempt_timeout: us(attempt_timeout),
                    deadline,
                    retry: Backoff { retries, initial: us(backoff), multiplier, cap: us(backoff + extra) },
                    seed,
                    shuffle_seeds: seed & 4 == 0,
                }
            },
        )
}

/// A preset (with a random seed) or arbitrary valid knobs.
pub fn arb_config() -> impl Strategy<Value = RefreshConfig> {
    prop_oneof![
        1 => (prop::sample::select(RefreshConfig::PRESETS.to_vec()), any::<u64>())
            .prop_map(|(name, seed)| RefreshConfig::preset(name).unwrap().with_seed(seed)),
        4 => arb_knobs(),
    ]
}

/// The default hedge budget, or an arbitrary valid one (`ratio` above `burst` included).
pub fn arb_hedge_budget() -> impl Strategy<Value = HedgeBudget> {
    prop_oneof![
        1 => Just(HedgeBudget::default()),
        4 => (prop_oneof![0.0f64..=1.0, Just(0.1), 1.0f64..=3.0], 0u32..=12)
            .prop_map(|(ratio, burst)| HedgeBudget { ratio, burst }),
    ]
}

/// The window quantile of a cluster view: the default, or anywhere in `[0, 1]`.
pub fn arb_window_quantile() -> impl Strategy<Value = f64> {
    prop_oneof![1 => Just(0.99), 1 => 0.0f64..=1.0]
}

/// Start of the refresh: anywhere, including right below the end of time (saturation).
pub fn arb_start() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => 0u64..=1_000_000_000_000,
        1 => Just(0u64),
        1 => (u64::MAX - 200_000_000)..=u64::MAX,
    ]
}

/// Which attempt an input names.
#[derive(Clone, Debug)]
pub enum Target {
    /// One of the most recently issued attempts (`k`-th from the latest).
    Recent(u8),
    /// An attempt that already ended (failed, cancelled or won).
    Finished(u8),
    /// Any id at all.
    Unknown(u64),
    /// An id of this refresh's epoch that was never issued.
    NotYetIssued(u8),
    /// An issued number, but from another epoch.
    OtherEpoch(u8),
}

/// What a metadata answer looks like.
#[derive(Clone, Debug)]
pub enum Answer {
    /// A usable answer listing `n` brokers.
    Valid(u8),
    /// No brokers listed: cannot win.
    NoBrokers,
    /// A top-level error code (never 0): cannot win.
    TopLevelError(i16),
}

/// What the adapter reports.
#[derive(Clone, Debug)]
pub enum InputKind {
    /// Whether a TLS handshake follows.
    Connected(bool),
    Answered,
    /// The broker checking the credentials (`false`: `Authenticating`) or accepting them
    /// (`true`: `Authenticated`).
    Credentials(bool),
    Response(Answer),
    /// The error, and whether it carries a detail text.
    Failed(ErrorKind, bool),
}

/// One step of a driver: advance the clock by `dt` µs, then do `action`.
#[derive(Clone, Debug)]
pub struct Step {
    pub dt: i64,
    pub action: Action,
}

#[derive(Clone, Debug)]
pub enum Action {
    /// `handle_timeout(now)`.
    Timeout,
    /// `handle_timeout(poll_timeout())` exactly (the clock jumps there).
    PollTimeout,
    /// `handle_input(now, …)`.
    Input(InputKind, Target),
}

// Steps are generated as raw integers and decoded by the pure functions below: nested
// `prop_oneof!` trees for 200 steps cost ~15 ms per case in debug builds, raw integers ~0.5 ms.
// Every raw part shrinks toward 0, which decodes to the simplest choice (no time passes,
// `handle_timeout`, the latest attempt, a valid answer, a refused connection).

const NON_FATAL: [ErrorKind; 11] = [
    ErrorKind::Refused,
    ErrorKind::Dns,
    ErrorKind::ConnectTimeout,
    ErrorKind::ResponseTimeout,
    ErrorKind::Closed,
    ErrorKind::Protocol,
    ErrorKind::FrameTooLarge,
    ErrorKind::BrokerError(-1),
    ErrorKind::NoBrokers,
    ErrorKind::Tls,
    ErrorKind::Io,
];

const FATAL: [ErrorKind; 6] = [
    ErrorKind::Authentication,
    ErrorKind::Authorization,
    ErrorKind::BrokerError(31),
    ErrorKind::BrokerError(33),
    ErrorKind::BrokerError(34),
    ErrorKind::BrokerError(58),
];

/// Time step: mostly forward by up to 3 s, sometimes by a few ms, sometimes backwards.
pub fn decode_dt(d: u32) -> i64 {
    let v = (d / 10) as i64;
    match d % 10 {
        0 => 0,
        1..=6 => v % 3_000_001,
        7 | 8 => v % 5_001,
        _ => -(v % 1_000_000) - 1,
    }
}

pub fn decode_target(x: u64) -> Target {
    let k = (x >> 8) as u8;
    match x % 13 {
        0..=7 => Target::Recent(k % 4),
        8 | 9 => Target::Finished(k),
        10 => Target::Unknown(x >> 4),
        11 => Target::NotYetIssued(k),
        _ => Target::OtherEpoch(k),
    }
}

/// Mostly ordinary failures, a Kafka error code now and then, authentication and
/// authorisation failures rarely (1 in 31).
fn decode_error(x: u64) -> ErrorKind {
    let code = (x >> 48) as u16 as i16;
    match (x >> 40) % 31 {
        30 => FATAL[code.unsigned_abs() as usize % FATAL.len()],
        29 if !ErrorKind::BrokerError(code).is_fatal() => ErrorKind::BrokerError(code),
        k => NON_FATAL[k as usize % NON_FATAL.len()],
    }
}

fn decode_answer(x: u64) -> Answer {
    let code = (x >> 48) as u16 as i16;
    match (x >> 40) % 8 {
        6 => Answer::NoBrokers,
        7 => Answer::TopLevelError(match code % 6 {
            0 => 129,
            1 => -1,
            2 => 7,
            3 => 31,
            _ if code == 0 => 5,
            _ => code,
        }),
        k => Answer::Valid(1 + (k % 3) as u8),
    }
}

pub fn decode_input_kind(selector: u8, x: u64) -> InputKind {
    match selector % 8 {
        0..=2 => InputKind::Response(decode_answer(x)),
        3..=5 => InputKind::Failed(decode_error(x), (x >> 39) & 1 == 1),
        6 => InputKind::Connected((x >> 7) & 1 == 1),
        _ => match (x >> 13) % 4 {
            0 => InputKind::Credentials(false),
            1 => InputKind::Credentials(true),
            _ => InputKind::Answered,
        },
    }
}

fn decode_step((a, d, x): (u8, u32, u64)) -> Step {
    let action = match a % 14 {
        0..=2 => Action::Timeout,
        3..=5 => Action::PollTimeout,
        _ => Action::Input(decode_input_kind(a / 14, x), decode_target(x)),
    };
    Step { dt: decode_dt(d), action }
}

pub fn arb_step() -> impl Strategy<Value = Step> {
    (any::<u8>(), any::<u32>(), any::<u64>()).prop_map(decode_step)
}

pub fn non_fatal_kind() -> impl Strategy<Value = ErrorKind> {
    prop_oneof![
        prop::sample::select(NON_FATAL.to_vec()),
        any::<i16>().prop_map(|c| ErrorKind::BrokerError(if ErrorKind::BrokerError(c).is_fatal() { 8 } else { c })),
    ]
}

pub fn fatal_kind() -> impl Strategy<Value = ErrorKind> {
    prop::sample::select(FATAL.to_vec())
}

/// A refresh run: config, `brokers` seed brokers, start time, a warm response-time
/// estimate (for `Refresh::with_estimate`), steps.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub config: RefreshConfig,
    pub brokers: usize,
    pub start: u64,
    pub recent: Option<Duration>,
    pub steps: Vec<Step>,
}

fn arb_recent() -> impl Strategy<Value = Option<Duration>> {
    prop_oneof![4 => Just(None), 1 => (0u64..=3_000_000).prop_map(|d| Some(us(d)))]
}

pub fn arb_scenario() -> impl Strategy<Value = Scenario> {
    (arb_config(), 1usize..=12, arb_start(), arb_recent(), prop::collection::vec(arb_step(), 0..200))
        .prop_map(|(config, brokers, start, recent, steps)| Scenario { config, brokers, start, recent, steps })
}

pub fn metadata(answer: &Answer) -> Metadata {
    let brokers = |n: u8| {
        (0..n as i32)
            .map(|i| BrokerMetadata {
                node_id: i,
                // Even ones coincide with seed names, odd ones are newly discovered.
                host: if i % 2 == 0 { format!("broker-{i}") } else { format!("node-{i}") },
                port: 9092,
                rack: None,
            })
            .collect()
    };
    match *answer {
        Answer::Valid(n) => Metadata {
            cluster_id: Some("cluster".into()),
            controller_id: 0,
            error_code: 0,
            brokers: brokers(n.max(1)),
            topics: Vec::new(),
        },
        Answer::NoBrokers => Metadata { controller_id: -1, ..Metadata::default() },
        Answer::TopLevelError(code) => Metadata { error_code: code, brokers: brokers(2), ..Metadata::default() },
    }
}

pub fn make_input(kind: &InputKind, attempt: AttemptId) -> Input {
    match kind {
        InputKind::Connected(tls) => Input::Connected { attempt, tls: *tls },
        InputKind::Answered => Input::FirstFrame { attempt },
        InputKind::Credentials(false) => Input::Authenticating { attempt },
        InputKind::Credentials(true) => Input::Authenticated { attempt },
        InputKind::Response(answer) => Input::Response { attempt, metadata: metadata(answer) },
        InputKind::Failed(kind, detail) => Input::Failed {
            attempt,
            error: if *detail { AttemptError::with_detail(*kind, "adapter says so") } else { AttemptError::new(*kind) },
        },
    }
}

pub fn resolve(target: &Target, epoch: u32, issued: &[AttemptId], ended: &[AttemptId]) -> AttemptId {
    let id = |epoch: u32, number: u64| AttemptId(((epoch as u64) << 32) | (number & 0xffff_ffff));
    match *target {
        Target::Recent(k) if !issued.is_empty() => issued[issued.len() - 1 - (k as usize % issued.len())],
        Target::Finished(k) if !ended.is_empty() => ended[k as usize % ended.len()],
        Target::Recent(k) | Target::Finished(k) => id(epoch, k as u64),
        Target::Unknown(x) => AttemptId(x),
        Target::NotYetIssued(k) => id(epoch, issued.len() as u64 + k as u64),
        Target::OtherEpoch(k) => {
            let number = if issued.is_empty() { 0 } else { issued[k as usize % issued.len()].number() as u64 };
            id(epoch.wrapping_add(1 + k as u32 % 3), number)
        }
    }
}

// ============================================================================================
// Arbitrary, possibly invalid configs
// ============================================================================================

fn wild_u32() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), 1u32..=8, any::<u32>(), Just(u32::MAX)]
}

fn wild_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        0.0f64..=1.0,
        -2.0f64..=4.0,
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(1.0),
        Just(1e6),
        Just(1e300),
        any::<f64>(),
    ]
}

fn wild_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (1u64..=200_000_000).prop_map(us),
        any::<u64>().prop_map(us),
        Just(Duration::MAX),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

/// One field set to an arbitrary (often invalid) value.
#[derive(Clone, Debug)]
pub enum Mutation {
    Initial(u32),
    MaxInFlight(u32),
    Jitter(f64),
    Linear(u32),
    Exponential(f64),
    Fixed(Duration),
    Adaptive(Duration, u32, Duration, Duration),
    AttemptTimeout(Duration),
    Deadline(Duration),
    Retries(u32),
    BackoffInitial(Duration),
    Multiplier(f64),
    Cap(Duration),
    Ratio(f64),
    Burst(u32),
    WindowQuantile(f64),
}

pub fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        wild_u32().prop_map(Mutation::Initial),
        wild_u32().prop_map(Mutation::MaxInFlight),
        wild_f64().prop_map(Mutation::Jitter),
        wild_u32().prop_map(Mutation::Linear),
        wild_f64().prop_map(Mutation::Exponential),
        wild_duration().prop_map(Mutation::Fixed),
        (wild_duration(), wild_u32(), wild_duration(), wild_duration())
            .prop_map(|(c, m, f, x)| Mutation::Adaptive(c, m, f, x)),
        wild_duration().prop_map(Mutation::AttemptTimeout),
        wild_duration().prop_map(Mutation::Deadline),
        wild_u32().prop_map(Mutation::Retries),
        wild_duration().prop_map(Mutation::BackoffInitial),
        wild_f64().prop_map(Mutation::Multiplier),
        wild_duration().prop_map(Mutation::Cap),
        wild_f64().prop_map(Mutation::Ratio),
        wild_u32().prop_map(Mutation::Burst),
        wild_f64().prop_map(Mutation::WindowQuantile),
    ]
}

pub fn mutate(cluster: &mut ClusterConfig, m: &Mutation) {
    let c = &mut cluster.refresh;
    match *m {
        Mutation::Initial(x) => c.fanout.initial = x,
        Mutation::MaxInFlight(x) => c.fanout.max_in_flight = x,
        Mutation::Jitter(x) => c.fanout.jitter = x,
        Mutation::Linear(x) => c.fanout.growth = Growth::Linear(x),
        Mutation::Exponential(x) => c.fanout.growth = Growth::Exponential(x),
        Mutation::Fixed(d) => c.fanout.stagger = Stagger::Fixed(d),
        Mutation::Adaptive(cold, multiple, floor, ceiling) => {
            c.fanout.stagger = Stagger::Adaptive(Adaptive { cold, multiple, floor, ceiling, ..Adaptive::default() })
        }
        Mutation::AttemptTimeout(d) => c.attempt_timeout = d,
        Mutation::Deadline(d) => c.deadline = d,
        Mutation::Retries(x) => c.retry.retries = x,
        Mutation::BackoffInitial(d) => c.retry.initial = d,
        Mutation::Multiplier(x) => c.retry.multiplier = x,
        Mutation::Cap(d) => c.retry.cap = d,
        Mutation::Ratio(x) => cluster.hedge_budget.ratio = x,
        Mutation::Burst(x) => cluster.hedge_budget.burst = x,
        Mutation::WindowQuantile(x) => cluster.window_quantile = x,
    }
}
