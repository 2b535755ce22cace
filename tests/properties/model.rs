//! The reference model: simulated brokers, the real machine run against them, and an
//! independent, deliberately plain model of the policy for a restricted configuration, which
//! must predict the machine's exact timed command sequence (property 10).

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use stagger::test_util::numbered_seeds;
use stagger::{
    AttemptError, AttemptId, Backoff, BrokerBook, CancelReason, Command, ErrorKind, Fanout, GiveUpReason, Growth,
    Input, Refresh, RefreshConfig, Stagger, Tuning,
};

use crate::cases;
use crate::driver::drain;
use crate::strategies::{at, fatal_kind, metadata, non_fatal_kind, us, Answer};

/// How one simulated broker treats an attempt (delays in µs after the attempt starts).
#[derive(Clone, Debug)]
enum Behaviour {
    /// Answers with valid metadata.
    Answer(u64),
    /// Answers with metadata that cannot win: no brokers (`true`) or a top-level error.
    Reject(u64, bool),
    /// The adapter reports a failure.
    Fail(u64, ErrorKind),
    /// Never answers.
    Hang,
}

impl Behaviour {
    fn delay(&self) -> Option<u64> {
        match *self {
            Behaviour::Answer(d) | Behaviour::Reject(d, _) | Behaviour::Fail(d, _) => Some(d),
            Behaviour::Hang => None,
        }
    }

    fn input(&self, attempt: AttemptId) -> Option<Input> {
        Some(match self {
            Behaviour::Answer(_) => Input::Response { attempt, metadata: metadata(&Answer::Valid(2)) },
            Behaviour::Reject(_, true) => Input::Response { attempt, metadata: metadata(&Answer::NoBrokers) },
            Behaviour::Reject(_, false) => Input::Response { attempt, metadata: metadata(&Answer::TopLevelError(7)) },
            Behaviour::Fail(_, kind) => Input::Failed { attempt, error: AttemptError::new(*kind) },
            Behaviour::Hang => return None,
        })
    }
}

/// The restricted configuration the model covers: Fixed stagger, jitter 0, Linear(1),
/// next_on_failure, either replace_when_full, zero backoff (so no randomness is drawn that matters), seed brokers only.
#[derive(Clone, Debug)]
struct ModelCase {
    stagger: u64,
    initial: u32,
    max_in_flight: u32,
    attempt_timeout: u64,
    deadline: u64,
    retries: u32,
    replace_when_full: bool,
    seed: u64,
    start: u64,
    /// Per broker, the behaviour of its 1st, 2nd, … attempt (cycled).
    brokers: Vec<Vec<Behaviour>>,
}

impl ModelCase {
    fn config(&self) -> RefreshConfig {
        let mut tuning = Tuning::default();
        tuning.replace_when_full = self.replace_when_full;
        RefreshConfig {
            fanout: Fanout {
                initial: self.initial,
                stagger: Stagger::Fixed(us(self.stagger)),
                growth: Growth::Linear(1),
                max_in_flight: self.max_in_flight,
                jitter: 0.0,
                tuning,
            },
            attempt_timeout: us(self.attempt_timeout),
            deadline: us(self.deadline),
            retry: Backoff { retries: self.retries, initial: Duration::ZERO, multiplier: 2.0, cap: Duration::ZERO },
            seed: self.seed,
            // The model tries the brokers as listed.
            shuffle_seeds: false,
        }
    }

    fn behaviour(&self, broker: usize, k: usize) -> &Behaviour {
        let list = &self.brokers[broker];
        &list[k % list.len()]
    }
}

fn arb_delay() -> impl Strategy<Value = u64> {
    prop_oneof![3 => (0u64..=3_000).prop_map(|ms| ms * 1000), 1 => 0u64..=3_000_000, 1 => Just(0u64)]
}

fn arb_behaviour() -> impl Strategy<Value = Behaviour> {
    prop_oneof![
        5 => arb_delay().prop_map(Behaviour::Answer),
        2 => (arb_delay(), any::<bool>()).prop_map(|(d, e)| Behaviour::Reject(d, e)),
        6 => (arb_delay(), non_fatal_kind()).prop_map(|(d, k)| Behaviour::Fail(d, k)),
        5 => Just(Behaviour::Hang),
        1 => (arb_delay(), fatal_kind()).prop_map(|(d, k)| Behaviour::Fail(d, k)),
    ]
}

fn arb_model_case() -> impl Strategy<Value = ModelCase> {
    (
        prop_oneof![Just(0u64), (0u64..=2_000).prop_map(|ms| ms * 1000), 0u64..=2_000_000],
        1u32..=3,
        prop_oneof![4 => 1u32..=4, 1 => Just(u32::MAX)],
        prop_oneof![(1u64..=3_000).prop_map(|ms| ms * 1000), 1u64..=3_000_000],
        prop_oneof![(1u64..=20_000).prop_map(|ms| ms * 1000), 1u64..=20_000_000],
        (0u32..=3, any::<bool>()),
        any::<u64>(),
        0u64..=1_000_000_000,
        prop::collection::vec(prop::collection::vec(arb_behaviour(), 1..=3), 1..=6),
    )
        .prop_map(
            |(
                stagger,
                initial,
                max_in_flight,
                attempt_timeout,
                deadline,
                (retries, replace_when_full),
                seed,
                start,
                brokers,
            )| {
                ModelCase {
                    stagger: stagger.min(deadline),
                    initial: initial.min(max_in_flight),
                    max_in_flight,
                    attempt_timeout,
                    deadline,
                    retries,
                    replace_when_full,
                    seed,
                    start,
                    brokers,
                }
            },
        )
}

/// A command in comparable form (attempt numbers, broker numbers, error kinds).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Norm {
    Connect(u32, u32),
    Resolve(u32, u32),
    Cancel(u32, CancelReason),
    Done(u32, u32),
    /// Reason, last error, per broker (attempts, last error kind).
    GiveUp(GiveUpReason, Option<(u32, u32, ErrorKind)>, Vec<(u32, Option<ErrorKind>)>),
}

fn normalise(c: &Command) -> Norm {
    match c {
        Command::Connect { attempt, broker } => Norm::Connect(attempt.number(), broker.0),
        // The model's books hold no names to resolve.
        Command::Resolve { attempt, broker } => Norm::Resolve(attempt.number(), broker.0),
        Command::Cancel { attempt, reason } => Norm::Cancel(attempt.number(), *reason),
        Command::Done { attempt, broker, .. } => Norm::Done(attempt.number(), broker.0),
        Command::GiveUp(e) => Norm::GiveUp(
            e.reason,
            e.last_error.as_ref().map(|(a, b, err)| (a.number(), b.0, err.kind)),
            e.brokers.iter().map(|b| (b.attempts, b.last_error.as_ref().map(|e| e.kind))).collect(),
        ),
    }
}

/// The real machine against simulated brokers: deliver each broker's outcome at its time,
/// otherwise call `handle_timeout` at `poll_timeout()`. Inputs due at the same instant as a
/// timer are delivered with `handle_input`, which fires the timer first.
fn run_world(case: &ModelCase) -> Vec<(u64, Norm)> {
    let book = BrokerBook::new(numbered_seeds(case.brokers.len())).unwrap();
    let mut r = Refresh::new(&case.config(), &book, at(case.start)).expect("model configs are valid");
    let mut pending: BTreeMap<(u64, u64), Input> = BTreeMap::new();
    let mut tries = vec![0usize; case.brokers.len()];
    let mut out = Vec::new();
    let mut absorb = |now: u64, commands: Vec<Command>, pending: &mut BTreeMap<(u64, u64), Input>| {
        for c in commands {
            match &c {
                Command::Connect { attempt, broker } => {
                    let b = broker.0 as usize;
                    let behaviour = case.behaviour(b, tries[b]);
                    tries[b] += 1;
                    if let (Some(d), Some(input)) = (behaviour.delay(), behaviour.input(*attempt)) {
                        pending.insert((now.saturating_add(d), attempt.0), input);
                    }
                }
                Command::Cancel { attempt, .. } => pending.retain(|&(_, id), _| id != attempt.0),
                _ => {}
            }
            out.push((now, normalise(&c)));
        }
    };
    absorb(case.start, drain(&mut r), &mut pending);
    for _ in 0..100_000 {
        let Some(timeout) = r.poll_timeout() else { return out };
        match pending.keys().next().copied() {
            Some(key) if key.0 <= timeout.as_micros() => {
                let input = pending.remove(&key).unwrap();
                r.handle_input(at(key.0), input);
                absorb(key.0, drain(&mut r), &mut pending);
            }
            _ => {
                r.handle_timeout(timeout);
                absorb(timeout.as_micros(), drain(&mut r), &mut pending);
            }
        }
    }
    panic!("the machine did not finish within 100 000 steps");
}

/// An independent, deliberately plain model of the policy (restricted configuration):
///
/// * a pass starts `initial` attempts on the next brokers in seed order (throttled);
/// * while brokers remain, the next starts `stagger` after the latest start — if the
///   throttle is full, only with `replace_when_full`, which first cancels the newest attempt
///   (`Superseded`; a fixed stagger never doubles); a failure (reported, timed out, or an unusable answer) starts the next
///   at once;
/// * a valid answer wins: the others are cancelled (`Lost`, in start order), then `Done`;
/// * a fatal error cancels the others (`Fatal`) and gives up;
/// * when a pass has no attempt left and no broker left, retry at once (zero backoff) or,
///   after `retries` retries or when every attempt of the pass failed with `Tls`, give up
///   with `AllFailed`;
/// * at the deadline, cancel what is in flight (`Deadline`) and give up.
///
/// At equal times: deadline, then attempt timeouts, then the stagger, then the backoff,
/// then broker outcomes (lowest attempt first).
struct Model<'a> {
    case: &'a ModelCase,
    now: u64,
    deadline_at: u64,
    cursor: usize,
    pass: u32,
    /// Every attempt of this pass that ended failed with `Tls` (and one did).
    tls_only: Option<bool>,
    broker_of: Vec<usize>,
    /// (attempt, timeout at), in start order.
    in_flight: Vec<(u32, u64)>,
    latest_start: u64,
    stagger_at: Option<u64>,
    backoff_at: Option<u64>,
    /// (time, attempt) → what the broker does then.
    pending: BTreeMap<(u64, u32), Behaviour>,
    tries: Vec<usize>,
    per_broker: Vec<(u32, Option<ErrorKind>)>,
    last_error: Option<(u32, u32, ErrorKind)>,
    out: Vec<(u64, Norm)>,
    finished: bool,
}

impl<'a> Model<'a> {
    fn run(case: &'a ModelCase) -> Vec<(u64, Norm)> {
        let n = case.brokers.len();
        let mut m = Model {
            case,
            now: case.start,
            deadline_at: case.start.saturating_add(case.deadline),
            cursor: 0,
            pass: 0,
            tls_only: None,
            broker_of: Vec::new(),
            in_flight: Vec::new(),
            latest_start: case.start,
            stagger_at: None,
            backoff_at: None,
            pending: BTreeMap::new(),
            tries: vec![0; n],
            per_broker: vec![(0, None); n],
            last_error: None,
            out: Vec::new(),
            finished: false,
        };
        m.begin_pass();
        let mut steps = 0;
        while !m.finished {
            steps += 1;
            assert!(steps < 1_000_000, "model did not finish");
            let timers = [
                Some((m.deadline_at, 0u8)),
                m.in_flight.first().map(|&(_, t)| (t, 1)),
                m.stagger_at.map(|t| (t, 2)),
                m.backoff_at.map(|t| (t, 3)),
            ];
            let (t, timer) = timers.into_iter().flatten().min().expect("the deadline is always armed");
            match m.pending.keys().next().copied() {
                Some((ti, a)) if ti < t => {
                    m.now = m.now.max(ti);
                    let b = m.pending.remove(&(ti, a)).unwrap();
                    m.deliver(a, b);
                }
                _ => {
                    m.now = m.now.max(t);
                    match timer {
                        0 => m.on_deadline(),
                        1 => {
                            let a = m.in_flight[0].0;
                            m.fail(a, ErrorKind::ConnectTimeout, Some(CancelReason::TimedOut));
                        }
                        2 => {
                            m.stagger_at = None;
                            if m.throttle_full() && m.can_replace() {
                                // Every attempt is past its stagger delay and none answered (the
                                // model sends no `Answered`): the newest makes room.
                                let (oldest, _) = m.in_flight.pop().expect("the throttle is full");
                                m.pending.retain(|&(_, x), _| x != oldest);
                                m.tls_only = Some(false);
                                let b = m.broker_of[oldest as usize];
                                m.per_broker[b].1 = Some(ErrorKind::ConnectTimeout);
                                m.last_error = Some((oldest, b as u32, ErrorKind::ConnectTimeout));
                                m.emit(Norm::Cancel(oldest, CancelReason::Superseded));
                            }
                            m.launch();
                            m.arm();
                        }
                        _ => {
                            m.backoff_at = None;
                            m.pass += 1;
                            m.begin_pass();
                        }
                    }
                }
            }
        }
        m.out
    }

    fn emit(&mut self, n: Norm) {
        self.out.push((self.now, n));
    }

    fn begin_pass(&mut self) {
        self.cursor = 0;
        self.tls_only = None;
        for _ in 0..self.case.initial {
            if !self.launch() {
                break;
            }
        }
        self.arm();
    }

    fn launch(&mut self) -> bool {
        if self.cursor >= self.case.brokers.len() || self.in_flight.len() as u64 >= self.case.max_in_flight as u64 {
            return false;
        }
        let b = self.cursor;
        self.cursor += 1;
        let a = self.broker_of.len() as u32;
        self.broker_of.push(b);
        self.per_broker[b].0 += 1;
        self.in_flight.push((a, self.now.saturating_add(self.case.attempt_timeout)));
        self.latest_start = self.now;
        self.stagger_at = None;
        self.emit(Norm::Connect(a, b as u32));
        let behaviour = self.case.behaviour(b, self.tries[b]).clone();
        self.tries[b] += 1;
        if let Some(d) = behaviour.delay() {
            self.pending.insert((self.now.saturating_add(d), a), behaviour);
        }
        true
    }

    fn throttle_full(&self) -> bool {
        self.in_flight.len() as u64 >= self.case.max_in_flight as u64
    }

    fn can_replace(&self) -> bool {
        self.case.replace_when_full && self.cursor < self.case.brokers.len()
    }

    fn arm(&mut self) {
        let room = !self.throttle_full() || self.can_replace();
        self.stagger_at =
            (!self.finished && self.backoff_at.is_none() && self.cursor < self.case.brokers.len() && room)
                .then(|| self.latest_start.saturating_add(self.case.stagger));
    }

    fn deliver(&mut self, a: u32, b: Behaviour) {
        match b {
            Behaviour::Answer(_) => {
                self.in_flight.retain(|&(x, _)| x != a);
                for (other, _) in std::mem::take(&mut self.in_flight) {
                    self.emit(Norm::Cancel(other, CancelReason::Lost));
                }
                self.pending.clear();
                self.emit(Norm::Done(a, self.broker_of[a as usize] as u32));
                self.finished = true;
            }
            Behaviour::Reject(_, empty) => {
                let kind = if empty { ErrorKind::NoBrokers } else { ErrorKind::BrokerError(7) };
                self.fail(a, kind, Some(CancelReason::Rejected));
            }
            Behaviour::Fail(_, kind) => self.fail(a, kind, None),
            Behaviour::Hang => unreachable!("a hung broker has no outcome"),
        }
    }

    fn fail(&mut self, a: u32, kind: ErrorKind, cancel: Option<CancelReason>) {
        let b = self.broker_of[a as usize];
        self.per_broker[b].1 = Some(kind);
        self.last_error = Some((a, b as u32, kind));
        self.tls_only = Some(self.tls_only.unwrap_or(true) && kind == ErrorKind::Tls);
        self.in_flight.retain(|&(x, _)| x != a);
        self.pending.retain(|&(_, x), _| x != a);
        if let Some(reason) = cancel {
            self.emit(Norm::Cancel(a, reason));
        }
        if kind.is_fatal() {
            for (other, _) in std::mem::take(&mut self.in_flight) {
                self.emit(Norm::Cancel(other, CancelReason::Fatal));
            }
            self.give_up(GiveUpReason::Fatal);
            return;
        }
        self.launch();
        if self.in_flight.is_empty() && self.cursor >= self.case.brokers.len() {
            self.stagger_at = None;
            if self.pass >= self.case.retries || self.tls_only == Some(true) {
                self.give_up(GiveUpReason::AllFailed { passes: self.pass + 1 });
            } else {
                self.backoff_at = Some(self.now);
            }
        } else {
            self.arm();
        }
    }

    fn on_deadline(&mut self) {
        for (a, _) in std::mem::take(&mut self.in_flight) {
            let b = self.broker_of[a as usize];
            self.per_broker[b].1 = Some(ErrorKind::ConnectTimeout);
            self.last_error = Some((a, b as u32, ErrorKind::ConnectTimeout));
            self.emit(Norm::Cancel(a, CancelReason::Deadline));
        }
        self.give_up(GiveUpReason::DeadlineExceeded);
    }

    fn give_up(&mut self, reason: GiveUpReason) {
        self.emit(Norm::GiveUp(reason, self.last_error, self.per_broker.clone()));
        self.pending.clear();
        self.finished = true;
        self.stagger_at = None;
        self.backoff_at = None;
    }
}

proptest! {
    #![proptest_config(cases(2000))]

    /// 10. The real machine emits exactly the reference model's timed command sequence for
    /// the restricted configuration, whatever the brokers do.
    #[test]
    fn machine_matches_the_reference_model(case in arb_model_case()) {
        let want = Model::run(&case);
        let got = run_world(&case);
        prop_assert_eq!(got, want, "machine (left) differs from the reference model (right)");
    }
}
