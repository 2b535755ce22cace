//! Replay of a recorded trace through the core, and the report-shaped view the page draws.
//!
//! Two things happen to a trace. [`Trace::replay`] — the core's own check — says whether a
//! fresh [`Refresh`] fed the recorded inputs emits exactly the recorded commands. Then the
//! trace is played back step by step through another fresh [`Refresh`]: every recorded
//! input and timeout goes in at its recorded time, and what the core answers *now* becomes
//! the lanes and spans on screen, and the core's events (the ones a live view reads). When the replay matches, that is the recorded refresh;
//! when it diverges, the page shows what today's core does with yesterday's inputs, and
//! where the two part.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use stagger::report::{Event, EventKind};
use stagger::{AttemptError, AttemptId, BrokerIndex, Command, Input, Instant, Refresh};
use stagger::{Trace, TraceEvent, TRACE_VERSION};
use stagger_sim::{cancel_ending, Lane, Outcome, Report, SimError, Span, SpanOutcome};

use crate::describe;

/// Replays `trace_json`; see [`crate::replay`] for the answer's shape.
pub fn replay_trace(trace_json: &str) -> Value {
    let trace: Trace = match serde_json::from_str(trace_json) {
        Ok(t) => t,
        Err(e) => {
            // A trace of another format version is a stagger trace all the same: the core's
            // error says which version it is and which one this page reads.
            let what = match serde_json::from_str::<Version>(trace_json) {
                Ok(Version { version }) if version != TRACE_VERSION => "this stagger trace cannot be replayed here",
                _ => "this file is not a stagger trace (as written by `stagger metadata --trace FILE`)",
            };
            return json!({ "verdict": "invalid", "error": format!("{what}: {e}") });
        }
    };
    let addresses: Vec<String> = trace.book.iter().map(|(_, e)| e.address.to_string()).collect();
    let names = describe::lane_names(&addresses);
    let origin = trace.started_at;
    let relative = |at: Instant| Instant::from_micros(at.as_micros().saturating_sub(origin.as_micros()));
    let mut answer = json!({
        "recorder": trace.recorder,
        "version": trace.version,
        "started_at": trace.started_at,
        "recorded_events": trace.events.len(),
        "config": trace.config,
        "recent_response_time": trace.recent_response_time,
    });
    match trace.replay() {
        Err(e) => {
            answer["verdict"] = json!("invalid");
            answer["error"] = json!(format!("the core refuses this trace's config or brokers: {e}"));
            return answer;
        }
        Ok(Ok(commands)) => {
            answer["verdict"] = json!("match");
            answer["commands"] = json!(commands.len());
        }
        Ok(Err(d)) => {
            let at = trace.events.get(d.event_index).or(trace.events.last()).map(|e| relative(event_at(e)));
            answer["verdict"] = json!("diverges");
            answer["divergence"] = json!({
                "event_index": d.event_index,
                "at": at,
                "recorded": d.recorded.as_ref().map(|c| describe::command(c, &names)),
                "replayed": d.replayed.as_ref().map(|c| describe::command(c, &names)),
                "recorded_json": d.recorded,
                "replayed_json": d.replayed,
                "message": d.to_string(),
            });
        }
    }
    let (report, finished) = play_back(&trace);
    answer["finished"] = json!(finished);
    answer["summary"] = json!(report.summary());
    answer["give_up"] = match &report.outcome {
        Outcome::GiveUp { error, .. } => json!(error.to_string()),
        _ => Value::Null,
    };
    answer["report"] = json!(report);
    answer
}

/// Just a trace's format version, to say so when the trace itself does not load.
#[derive(serde::Deserialize)]
struct Version {
    version: u32,
}

fn event_at(e: &TraceEvent) -> Instant {
    match e {
        TraceEvent::Input { at, .. } | TraceEvent::Timeout { at, .. } | TraceEvent::Command { at, .. } => *at,
    }
}

/// Feeds the trace's inputs and timeouts to a fresh core and records what it does, as a
/// [`Report`] with times relative to the trace's start. The flag says whether the core
/// reached `Done` or `GiveUp` (a trace cut short does not).
fn play_back(trace: &Trace) -> (Report, bool) {
    let origin = trace.started_at;
    let relative = |at: Instant| Instant::from_micros(at.as_micros().saturating_sub(origin.as_micros()));
    let mut view = View::new(trace);
    let Ok(mut refresh) = trace.start() else {
        return (view.finish(None, Instant::ZERO, Default::default()), false);
    };
    let mut outcome = view.drain(&mut refresh, Instant::ZERO);
    let mut now = Instant::ZERO;
    for event in &trace.events {
        if outcome.is_some() {
            break;
        }
        match event {
            TraceEvent::Input { at, input } => {
                now = now.max(relative(*at));
                if refresh.handle_input(*at, input.clone()).is_applied() {
                    view.input(now, input);
                }
            }
            TraceEvent::Timeout { at, timer } => {
                now = now.max(relative(*at));
                // A call with no timer due does nothing, and says nothing.
                if let Some(timer) = *timer {
                    view.record(now, EventKind::Timer { timer });
                }
                refresh.handle_timeout(*at);
            }
            TraceEvent::Command { .. } => continue,
        }
        outcome = view.drain(&mut refresh, now);
    }
    let finished = outcome.is_some();
    let stats = refresh.stats();
    (view.finish(outcome, now, stats), finished)
}

/// Lanes, spans and events being rebuilt from a replay.
struct View {
    lanes: Vec<Lane>,
    /// Attempt → (lane, span index).
    spans: BTreeMap<AttemptId, (usize, usize)>,
    /// Why an attempt's answer was rejected, until the core's `Cancel(Rejected)` arrives.
    rejections: BTreeMap<AttemptId, AttemptError>,
    events: Vec<Event>,
}

impl View {
    fn new(trace: &Trace) -> Self {
        let lanes = trace
            .book
            .iter()
            .map(|(broker, e)| Lane { broker, address: e.address.to_string(), behavior: None, spans: Vec::new() })
            .collect();
        View { lanes, spans: BTreeMap::new(), rejections: BTreeMap::new(), events: Vec::new() }
    }

    /// Logs `kind` as happening at `at` (since the trace's start).
    fn record(&mut self, at: Instant, kind: EventKind) {
        self.events.push(Event { elapsed: at.saturating_since(Instant::ZERO), kind });
    }

    fn span_mut(&mut self, attempt: AttemptId) -> Option<&mut Span> {
        let &(lane, i) = self.spans.get(&attempt)?;
        self.lanes.get_mut(lane)?.spans.get_mut(i)
    }

    /// The address of the broker an attempt went to (empty if the attempt is unknown).
    fn address_of(&self, attempt: AttemptId) -> String {
        self.spans.get(&attempt).map_or_else(String::new, |&(lane, _)| self.lanes[lane].address.clone())
    }

    /// The lane of `broker`: the trace's book's, or one added for an address the refresh
    /// learnt by resolving a name.
    fn lane(&mut self, refresh: &Refresh, broker: BrokerIndex) -> Option<usize> {
        if let Some(lane) = self.lanes.iter().position(|l| l.broker == broker) {
            return Some(lane);
        }
        let (first, learned) = refresh.learned();
        let entry = learned.get(broker.0.checked_sub(first.0)? as usize)?;
        let address = entry.address.to_string();
        self.lanes.push(Lane { broker, address, behavior: None, spans: Vec::new() });
        Some(self.lanes.len() - 1)
    }

    /// A recorded input the core applied, as a live view shows it (an answer says nothing:
    /// the core's `Won`, or its rejection, follows).
    fn input(&mut self, at: Instant, input: &Input) {
        let attempt = input.attempt();
        let broker = self.address_of(attempt);
        let kind = match input {
            Input::Connected { .. } => {
                if let Some(span) = self.span_mut(attempt) {
                    span.connected_at.get_or_insert(at);
                }
                EventKind::Connected { attempt, broker }
            }
            Input::FirstFrame { .. } => {
                if let Some(span) = self.span_mut(attempt) {
                    span.first_frame_at.get_or_insert(at);
                }
                EventKind::Answered { attempt, broker }
            }
            // The credential check moves the core's timers, not the timeline's spans.
            Input::Authenticating { .. } | Input::Authenticated { .. } => return,
            Input::Response { metadata, .. } => {
                if let Some(error) = metadata.rejection() {
                    self.rejections.insert(attempt, error);
                }
                return;
            }
            Input::Resolved { addresses, .. } => {
                if let Some(span) = self.span_mut(attempt) {
                    span.end = Some(at);
                    span.outcome = SpanOutcome::Resolved { addresses: addresses.len() as u32 };
                }
                EventKind::Resolved { attempt, broker, addresses: addresses.clone() }
            }
            Input::Failed { error, .. } => {
                if let Some(span) = self.span_mut(attempt) {
                    span.end = Some(at);
                    span.outcome = SpanOutcome::Failed { reason: error.to_string(), kind: error.kind };
                }
                EventKind::Failed { attempt, broker, error: error.clone() }
            }
        };
        self.record(at, kind);
    }

    /// Carries out (on screen) every command the core has queued.
    fn drain(&mut self, refresh: &mut Refresh, at: Instant) -> Option<Outcome> {
        let mut outcome = None;
        while let Some(command) = refresh.poll_command() {
            match command {
                // A lookup is an attempt on its name's lane, like a connection.
                Command::Connect { attempt, broker } | Command::Resolve { attempt, broker } => {
                    let info = refresh.attempt(attempt).copied();
                    if let Some(lane) = self.lane(refresh, broker) {
                        self.spans.insert(attempt, (lane, self.lanes[lane].spans.len()));
                        self.lanes[lane].spans.push(Span {
                            attempt,
                            start: at,
                            connected_at: None,
                            first_frame_at: None,
                            end: None,
                            outcome: SpanOutcome::InFlight,
                            pass: info.map_or(0, |i| i.pass),
                            hedge: info.is_some_and(|i| i.hedge),
                            partner: info.is_some_and(|i| i.partner),
                        });
                    }
                    let broker = self.address_of(attempt);
                    self.record(at, EventKind::Started { attempt, broker });
                }
                Command::Cancel { attempt, reason } => {
                    let broker = self.address_of(attempt);
                    let rejection = self.rejections.remove(&attempt);
                    let connected = self.span_mut(attempt).is_some_and(|s| s.connected_at.is_some());
                    let timed_out = AttemptError::timed_out(refresh.resolves(attempt), connected);
                    let (ending, kind) = cancel_ending(attempt, broker, reason, timed_out, rejection);
                    if let Some(span) = self.span_mut(attempt).filter(|s| s.end.is_none()) {
                        span.end = Some(at);
                        span.outcome = ending;
                    }
                    self.record(at, kind);
                }
                Command::Done { attempt, broker, .. } => {
                    if let Some(span) = self.span_mut(attempt) {
                        span.end = Some(at);
                        span.outcome = SpanOutcome::Won;
                    }
                    let address = self.address_of(attempt);
                    self.record(at, EventKind::Won { attempt, broker: address });
                    outcome = Some(Outcome::Done {
                        winner: broker,
                        attempt,
                        time_to_metadata: at.saturating_since(Instant::ZERO),
                    });
                }
                Command::GiveUp(error) => {
                    self.record(at, EventKind::GaveUp { reason: error.reason });
                    outcome = Some(Outcome::GiveUp { error, at });
                }
            }
        }
        outcome
    }

    fn finish(self, outcome: Option<Outcome>, ended_at: Instant, stats: stagger::RefreshStats) -> Report {
        // A trace that stops before `Done`/`GiveUp` (an adapter cut short) is shown as
        // stalled where it stops; the page words it as "the trace ends here".
        let outcome = outcome.unwrap_or(Outcome::Aborted { error: SimError::Stalled { at: ended_at }, at: ended_at });
        let mut report = Report {
            outcome,
            attempts_started: 0,
            attempts_cancelled: 0,
            attempts_failed: 0,
            requests_reached: 0,
            hedges: stats.hedges,
            passes: stats.passes,
            stats,
            ended_at,
            dropped_events: 0,
            lanes: self.lanes,
            events: self.events,
            trace: None,
        };
        let (mut started, mut reached, mut cancelled, mut failed) = (0, 0, 0, 0);
        for (_, span) in report.spans() {
            started += 1;
            reached += span.connected_at.is_some() as u32;
            cancelled += matches!(span.outcome, SpanOutcome::Cancelled { .. }) as u32;
            failed += matches!(span.outcome, SpanOutcome::Failed { .. }) as u32;
        }
        report.attempts_started = started;
        report.requests_reached = reached;
        report.attempts_cancelled = cancelled;
        report.attempts_failed = failed;
        report
    }
}
