//! The simulated brokers' side of the wire: what each `Connect` turns into, when, and which
//! pending answers a `Cancel` drops. Shared by the [`Refresh`](stagger::Refresh) and
//! [`Cluster`](stagger::Cluster) drivers so both see identical broker behaviour.

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;

use super::refresh_sim::{cancel_ending, Lane, Span, SpanOutcome};
use super::{BrokerBehavior, Scenario};
use stagger::report::{Event, EventKind};
use stagger::{
    AttemptError, AttemptId, BrokerBook, BrokerIndex, CancelReason, ErrorKind, Input, Instant, Metadata, Rng,
};

/// What a broker will report about an attempt, once its time comes.
#[derive(Clone, Debug)]
enum Pending {
    Connected,
    Answered,
    Response,
    Failed(AttemptError),
}

#[derive(Clone, Debug)]
struct Scheduled {
    attempt: AttemptId,
    what: Pending,
}

/// A broker's word the core was just told (by [`World::pop_input`]): what its span and the
/// event log show once the core applied it ([`World::delivered`]), as a live view shows only
/// what the policy applied.
pub(super) struct Delivery {
    at: Instant,
    attempt: AttemptId,
    what: Pending,
}

/// Pending broker events keyed by (time, insertion sequence): a deterministic total order,
/// so two events at the same instant are always delivered in the order they were scheduled.
#[derive(Clone, Debug, Default)]
struct EventQueue {
    events: BTreeMap<(Instant, u64), Scheduled>,
    seq: u64,
}

impl EventQueue {
    fn push(&mut self, at: Instant, event: Scheduled) {
        self.events.insert((at, self.seq), event);
        self.seq += 1;
    }

    fn peek_time(&self) -> Option<Instant> {
        self.events.keys().next().map(|&(at, _)| at)
    }

    fn pop(&mut self) -> Option<(Instant, Scheduled)> {
        self.events.pop_first().map(|((at, _), e)| (at, e))
    }

    /// Drops every pending event of `attempt`; returns how many.
    fn cancel(&mut self, attempt: AttemptId) -> u32 {
        let before = self.events.len();
        self.events.retain(|_, e| e.attempt != attempt);
        (before - self.events.len()) as u32
    }
}

/// The simulated cluster while a driver runs it: pending events, spans, the event log (the
/// core's [`Event`]s, timed from the simulation's start, when the first refresh starts).
pub(super) struct World<'a> {
    scenario: &'a Scenario,
    metadata: Metadata,
    queue: EventQueue,
    /// Attempts so far in start order, with their broker, its address and their spans.
    spans: Vec<(BrokerIndex, String, Span)>,
    /// Attempt id → position in `spans`.
    index: BTreeMap<AttemptId, usize>,
    /// Attempts started per simulated broker: picks each attempt's random stream.
    per_broker: BTreeMap<BrokerIndex, u64>,
    pub(super) events: Vec<Event>,
    pub(super) dropped: u32,
}

impl<'a> World<'a> {
    pub(super) fn new(scenario: &'a Scenario) -> Self {
        World {
            scenario,
            metadata: scenario.metadata(),
            queue: EventQueue::default(),
            spans: Vec::new(),
            index: BTreeMap::new(),
            per_broker: BTreeMap::new(),
            events: Vec::new(),
            dropped: 0,
        }
    }

    /// Logs `kind` as happening at `at`.
    pub(super) fn record(&mut self, at: Instant, kind: EventKind) {
        self.events.push(Event { elapsed: at.saturating_since(Instant::ZERO), kind });
    }

    /// When the next broker event is due.
    pub(super) fn next_event_at(&self) -> Option<Instant> {
        self.queue.peek_time()
    }

    /// A `Connect` (or, `reused`, a `Reuse`) came out of the core: open a span and schedule
    /// what the broker does. A reused connection has no handshake; its ApiVersions answer,
    /// the broker's first, comes one round trip after the attempt starts, as the adapters'
    /// resumed exchange asks it.
    pub(super) fn connect(
        &mut self,
        now: Instant,
        attempt: AttemptId,
        broker: BrokerIndex,
        address: &str,
        reused: bool,
    ) {
        self.record(now, EventKind::Started { attempt, broker: address.to_string() });
        self.index.insert(attempt, self.spans.len());
        self.spans.push((
            broker,
            address.to_string(),
            Span {
                attempt,
                start: now,
                connected_at: None,
                first_frame_at: None,
                end: None,
                outcome: SpanOutcome::InFlight,
                pass: 0,
                hedge: false,
                partner: false,
            },
        ));
        let nth = self.per_broker.entry(broker).or_insert(0);
        // One random stream per (seed, broker, nth attempt on it): broker 2's first answer
        // takes as long under every preset, so presets compare on equal terms.
        let mut rng = Rng::new(
            self.scenario.seed
                ^ (broker.0 as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ (*nth + 1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F),
        );
        *nth += 1;
        let scenario = self.scenario;
        let Some(sim) = scenario.broker_for_address(address).map(|i| &scenario.brokers[i]) else {
            let error = AttemptError::with_detail(ErrorKind::Dns, "simulated: no such broker");
            self.queue.push(now, Scheduled { attempt, what: Pending::Failed(error) });
            return;
        };
        let handshake = if reused { Duration::ZERO } else { sim.handshake };
        let connected = now.saturating_add(handshake);
        let mut push = |at: Instant, what: Pending| self.queue.push(at, Scheduled { attempt, what });
        // A live broker's first answer (ApiVersions) comes one round trip after the
        // handshake (which took one round trip too, or none on a kept connection), and
        // never after its last word.
        let round_trip = sim.handshake;
        let answer_then = |push: &mut dyn FnMut(Instant, Pending), last: Instant| {
            push(connected.saturating_add(round_trip).min(last), Pending::Answered);
        };
        let closed = || AttemptError::with_detail(ErrorKind::Closed, "simulated: broker closed the connection");
        let refused = || AttemptError::with_detail(ErrorKind::Refused, "simulated: broker refuses connections");
        match &sim.behavior {
            BrokerBehavior::Healthy { rtt } => {
                push(connected, Pending::Connected);
                answer_then(&mut push, connected.saturating_add(*rtt));
                push(connected.saturating_add(*rtt), Pending::Response);
            }
            BrokerBehavior::Slow { min, max } => {
                let (lo, hi) = if min <= max { (*min, *max) } else { (*max, *min) };
                let delay = lo + stagger::scale_duration(hi - lo, rng.unit());
                push(connected, Pending::Connected);
                answer_then(&mut push, connected.saturating_add(delay));
                push(connected.saturating_add(delay), Pending::Response);
            }
            BrokerBehavior::Hung => push(connected, Pending::Connected),
            BrokerBehavior::Refused => push(connected, Pending::Failed(refused())),
            BrokerBehavior::Flaky { p, rtt } => {
                push(connected, Pending::Connected);
                // NaN compares false: a NaN probability never fails.
                let what = if rng.unit() < *p { Pending::Failed(closed()) } else { Pending::Response };
                if matches!(what, Pending::Response) {
                    answer_then(&mut push, connected.saturating_add(*rtt));
                }
                push(connected.saturating_add(*rtt), what);
            }
            BrokerBehavior::DiesAt { at, rtt } => {
                let dies = Instant::ZERO.saturating_add(*at);
                if now >= dies {
                    push(connected, Pending::Failed(refused()));
                } else if connected >= dies {
                    push(dies, Pending::Failed(closed()));
                } else {
                    push(connected, Pending::Connected);
                    let answer = connected.saturating_add(*rtt);
                    if connected.saturating_add(round_trip) < dies {
                        answer_then(&mut push, answer);
                    }
                    if answer < dies {
                        push(answer, Pending::Response);
                    } else {
                        push(dies, Pending::Failed(closed()));
                    }
                }
            }
        }
    }

    /// A `Cancel` came out of the core: drop the attempt's pending events and close its span.
    /// A timed-out or rejected attempt failed, in the core's count and in the log, with the
    /// error a live view gives it.
    pub(super) fn cancel(&mut self, now: Instant, attempt: AttemptId, reason: CancelReason) {
        self.dropped += self.queue.cancel(attempt);
        let broker = self.address_of(attempt);
        let connected = self.span_mut(attempt).is_some_and(|s| s.connected_at.is_some());
        // The simulator's brokers are addresses: no attempt resolves a name.
        let timed_out = AttemptError::timed_out(false, connected);
        let (outcome, kind) = cancel_ending(attempt, broker, reason, timed_out, self.metadata.rejection());
        self.record(now, kind);
        if let Some(span) = self.span_mut(attempt).filter(|s| s.end.is_none()) {
            span.end = Some(now);
            span.outcome = outcome;
        }
    }

    /// The core declared `attempt` the winner.
    pub(super) fn won(&mut self, now: Instant, attempt: AttemptId) {
        let broker = self.address_of(attempt);
        self.record(now, EventKind::Won { attempt, broker });
        if let Some(span) = self.span_mut(attempt) {
            span.end = Some(now);
            span.outcome = SpanOutcome::Won;
        }
    }

    /// Takes the next due broker event: when, the core's [`Input`] for it, and what to show
    /// once the core applied it ([`World::delivered`]).
    pub(super) fn pop_input(&mut self) -> Option<(Instant, Input, Delivery)> {
        let (at, Scheduled { attempt, what }) = self.queue.pop()?;
        let input = match &what {
            Pending::Connected => Input::Connected { attempt, tls: false },
            Pending::Answered => Input::FirstFrame { attempt },
            Pending::Response => Input::Response { attempt, metadata: self.metadata.clone() },
            Pending::Failed(error) => Input::Failed { attempt, error: error.clone() },
        };
        Some((at, input, Delivery { at, attempt, what }))
    }

    /// The core applied `delivery`'s input: its span moves on and the log says so (an answer
    /// says nothing: the core's `Won`, or its rejection, follows).
    pub(super) fn delivered(&mut self, delivery: Delivery) {
        let Delivery { at, attempt, what } = delivery;
        let broker = self.address_of(attempt);
        let kind = match what {
            Pending::Connected => {
                if let Some(span) = self.span_mut(attempt) {
                    span.connected_at = Some(at);
                }
                EventKind::Connected { attempt, broker }
            }
            Pending::Answered => {
                if let Some(span) = self.span_mut(attempt) {
                    span.first_frame_at = Some(at);
                }
                EventKind::Answered { attempt, broker }
            }
            Pending::Response => return,
            Pending::Failed(error) => {
                if let Some(span) = self.span_mut(attempt) {
                    span.end = Some(at);
                    span.outcome = SpanOutcome::Failed { reason: error.to_string(), kind: error.kind };
                }
                EventKind::Failed { attempt, broker, error }
            }
        };
        self.record(at, kind);
    }

    /// Copies what the core knows about an attempt (pass, hedge, partner) into its span.
    pub(super) fn annotate(&mut self, attempt: AttemptId, info: &stagger::AttemptInfo) {
        if let Some(span) = self.span_mut(attempt) {
            span.pass = info.pass;
            span.hedge = info.hedge;
            span.partner = info.partner;
        }
    }

    /// Every span so far, in start order.
    pub(super) fn spans(&self) -> impl Iterator<Item = &Span> {
        self.spans.iter().map(|(_, _, s)| s)
    }

    /// The address of the broker an attempt went to (empty if the attempt is unknown).
    fn address_of(&self, attempt: AttemptId) -> String {
        self.index.get(&attempt).map_or_else(String::new, |&i| self.spans[i].1.clone())
    }

    fn span_mut(&mut self, attempt: AttemptId) -> Option<&mut Span> {
        let i = *self.index.get(&attempt)?;
        Some(&mut self.spans[i].2)
    }

    /// One lane per broker of `book`, each with its spans in start order.
    pub(super) fn lanes(&self, book: &BrokerBook) -> Vec<Lane> {
        book.iter()
            .map(|(broker, entry)| Lane {
                broker,
                address: String::from(&*entry.address),
                behavior: self.scenario.broker_for_address(&entry.address).map(|i| self.scenario.brokers[i].clone()),
                spans: self.spans.iter().filter(|(b, _, _)| *b == broker).map(|(_, _, s)| s.clone()).collect(),
            })
            .collect()
    }
}
