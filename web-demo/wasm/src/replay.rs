//! Replay of a recorded trace through the core, and the report-shaped view the page draws.
//!
//! Two things happen to a trace. [`Trace::replay`] — the core's own check — says whether a
//! fresh [`Refresh`] fed the recorded inputs emits exactly the recorded commands. Then the
//! trace is played back step by step through another fresh [`Refresh`]: every recorded
//! input and timeout goes in at its recorded time, and what the core answers *now* becomes
//! the lanes and spans on screen. When the replay matches, that is the recorded refresh;
//! when it diverges, the page shows what today's core does with yesterday's inputs, and
//! where the two part.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use stagger::ErrorKind;
use stagger::{AttemptError, AttemptId, BrokerIndex, CancelReason, Command, Input, Instant, Refresh};
use stagger::{Trace, TraceEvent, TRACE_VERSION};
use stagger_sim::{Lane, Outcome, Report, SimError, SimEvent, Span, SpanOutcome};

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
    let event_text: Vec<String> = report.events.iter().map(|e| describe::sim_event(e, &addresses)).collect();
    answer["finished"] = json!(finished);
    answer["summary"] = json!(report.summary());
    answer["give_up"] = match &report.outcome {
        Outcome::GiveUp { error, .. } => json!(error.to_string()),
        _ => Value::Null,
    };
    answer["event_text"] = json!(event_text);
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
                view.input(now, input);
                refresh.handle_input(*at, input.clone());
            }
            TraceEvent::Timeout { at, timer } => {
                now = now.max(relative(*at));
                view.events.push(SimEvent::Timer { at: now, kind: *timer });
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
    events: Vec<SimEvent>,
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

    fn span_mut(&mut self, attempt: AttemptId) -> Option<&mut Span> {
        let &(lane, i) = self.spans.get(&attempt)?;
        self.lanes.get_mut(lane)?.spans.get_mut(i)
    }

    fn broker_of(&self, attempt: AttemptId) -> BrokerIndex {
        self.spans.get(&attempt).map_or(BrokerIndex(u32::MAX), |&(lane, _)| self.lanes[lane].broker)
    }

    /// A recorded input, as the adapter reported it (inputs for attempts the core had already
    /// ended are drawn in the log but leave the spans alone, as the core ignores them).
    fn input(&mut self, at: Instant, input: &Input) {
        let attempt = input.attempt();
        let broker = self.broker_of(attempt);
        let live = self.span_mut(attempt).is_some_and(|s| s.end.is_none());
        match input {
            Input::Connected { .. } => {
                self.events.push(SimEvent::Connected { at, attempt, broker });
                if let Some(span) = self.span_mut(attempt).filter(|_| live) {
                    span.connected_at.get_or_insert(at);
                }
            }
            Input::FirstFrame { .. } => {
                self.events.push(SimEvent::Answered { at, attempt, broker });
                if let Some(span) = self.span_mut(attempt).filter(|_| live) {
                    span.first_frame_at.get_or_insert(at);
                }
            }
            Input::Response { metadata, .. } => {
                self.events.push(SimEvent::Response { at, attempt, broker });
                if let Some(error) = metadata.rejection() {
                    self.rejections.insert(attempt, error);
                }
            }
            Input::Resolved { addresses, .. } => {
                if let Some(span) = self.span_mut(attempt).filter(|_| live) {
                    span.end = Some(at);
                    span.outcome = SpanOutcome::Resolved { addresses: addresses.len() as u32 };
                }
            }
            Input::Failed { error, .. } => {
                self.events.push(SimEvent::Failed { at, attempt, broker, error: error.clone() });
                if let Some(span) = self.span_mut(attempt).filter(|_| live) {
                    span.end = Some(at);
                    span.outcome = SpanOutcome::Failed { reason: error.to_string(), kind: error.kind };
                }
            }
        }
    }

    /// Carries out (on screen) every command the core has queued.
    fn drain(&mut self, refresh: &mut Refresh, at: Instant) -> Option<Outcome> {
        let mut outcome = None;
        while let Some(command) = refresh.poll_command() {
            match command {
                // A lookup is an attempt on its name's lane, like a connection.
                Command::Connect { attempt, broker } | Command::Resolve { attempt, broker } => {
                    self.events.push(SimEvent::Connect { at, attempt, broker });
                    let info = refresh.attempt(attempt).copied();
                    if let Some(lane) = self.lanes.iter().position(|l| l.broker == broker) {
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
                }
                Command::Cancel { attempt, reason } => {
                    let broker = self.broker_of(attempt);
                    self.events.push(SimEvent::Cancel { at, attempt, broker, reason });
                    let rejection = self.rejections.remove(&attempt);
                    if let Some(span) = self.span_mut(attempt).filter(|s| s.end.is_none()) {
                        span.end = Some(at);
                        span.outcome = match reason {
                            // As the simulator draws them: the core counts these as failures.
                            CancelReason::TimedOut => {
                                let kind = if span.connected_at.is_some() {
                                    ErrorKind::ResponseTimeout
                                } else {
                                    ErrorKind::ConnectTimeout
                                };
                                SpanOutcome::Failed { reason: kind.to_string(), kind }
                            }
                            CancelReason::Rejected => {
                                let error = rejection.unwrap_or_else(|| AttemptError::new(ErrorKind::Protocol));
                                SpanOutcome::Failed { reason: error.to_string(), kind: error.kind }
                            }
                            reason => SpanOutcome::Cancelled { reason },
                        };
                    }
                }
                Command::Done { attempt, broker, .. } => {
                    self.events.push(SimEvent::Done { at, attempt, broker });
                    if let Some(span) = self.span_mut(attempt) {
                        span.end = Some(at);
                        span.outcome = SpanOutcome::Won;
                    }
                    outcome = Some(Outcome::Done {
                        winner: broker,
                        attempt,
                        time_to_metadata: at.saturating_since(Instant::ZERO),
                    });
                }
                Command::GiveUp(error) => {
                    self.events.push(SimEvent::GiveUp { at, reason: error.reason });
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
