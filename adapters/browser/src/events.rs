//! What `onEvent` receives: every input the adapter feeds the core, every timeout, every
//! command the core emits, as it happens.
//!
//! The `command`, `input` and `timeout` events have exactly the shape of the core's
//! [`TraceEvent`]s (`type`, `at` in µs, then `command`/`input`/`timer`) plus `at_ms` and, on
//! `Connect`, the bridge's `url`. So a page can draw them live and also assemble them, with
//! the `start` event's `config` and `book`, into a [`stagger::Trace`] that the core
//! replays to the very same commands.
//!
//! [`TraceEvent`]: stagger::TraceEvent

use serde::Serialize;
use stagger::{AttemptId, BrokerBook, BrokerIndex, Command, Input, Instant, RefreshConfig, TimerKind};

/// One event, serialised with a `type` tag (`start`, `command`, `input`, `timeout`, `abort`).
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WebEvent<'a> {
    /// The refresh began: its policy and its brokers (lanes, for a visualiser).
    Start {
        /// Always 0: times count from the refresh's start.
        at: Instant,
        /// Milliseconds since the refresh started (fractional).
        at_ms: f64,
        /// The policy in force.
        config: &'a RefreshConfig,
        /// The book the core was built from (for assembling a replayable trace).
        book: &'a BrokerBook,
        /// Each broker's index, `host:port` and URL.
        brokers: Vec<BrokerLane<'a>>,
    },
    /// The core emitted a command (after the call stamped `at`).
    Command {
        /// Microseconds since the start.
        at: Instant,
        /// Milliseconds since the start.
        at_ms: f64,
        /// The command, as the core serialises it.
        command: &'a Command,
        /// For `connect`: the WebSocket URL the attempt goes to.
        #[serde(skip_serializing_if = "Option::is_none")]
        url: Option<&'a str>,
    },
    /// The adapter fed the core an input (a socket opened, its broker first answered, the
    /// metadata arrived, or the attempt failed).
    Input {
        /// Microseconds since the start.
        at: Instant,
        /// Milliseconds since the start.
        at_ms: f64,
        /// The input, as the core serialises it.
        input: &'a Input,
    },
    /// A timer fired and the adapter called `handle_timeout`.
    Timeout {
        /// Microseconds since the start.
        at: Instant,
        /// Milliseconds since the start.
        at_ms: f64,
        /// The timer that was due (`stagger`, `attempt_timeout`, `backoff`, `deadline`).
        timer: Option<TimerKind>,
    },
    /// The caller's `AbortSignal` fired: every socket was closed, the core dropped.
    Abort {
        /// Microseconds since the start.
        at: Instant,
        /// Milliseconds since the start.
        at_ms: f64,
        /// Attempts whose sockets were open (or opening) and got closed.
        closed: Vec<AttemptId>,
    },
}

/// A broker as the `start` event lists it.
#[derive(Clone, Debug, Serialize)]
pub struct BrokerLane<'a> {
    /// Its index in the book (what commands and errors name).
    pub index: BrokerIndex,
    /// `host:port` of its bridge.
    pub address: &'a str,
    /// Its WebSocket URL.
    pub url: &'a str,
}

/// Milliseconds (fractional) of an instant counted in µs from the refresh's start.
pub fn millis(at: Instant) -> f64 {
    at.as_micros() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use stagger::TraceEvent;
    use stagger::{AttemptError, CancelReason, ErrorKind};

    /// The event's JSON without the browser-only extras must equal the trace's JSON.
    fn assert_trace_shape(event: &WebEvent<'_>, trace: TraceEvent) {
        let mut ours = serde_json::to_value(event).unwrap();
        let object = ours.as_object_mut().unwrap();
        assert!(object.remove("at_ms").is_some());
        object.remove("url");
        assert_eq!(ours, serde_json::to_value(&trace).unwrap());
        // And it reads back as a trace event, extras and all.
        let back: TraceEvent = serde_json::from_value(serde_json::to_value(event).unwrap()).unwrap();
        assert_eq!(back, trace);
    }

    #[test]
    fn command_input_and_timeout_events_are_trace_events() {
        let at = Instant::from_micros(12_345);
        // Epoch 2, attempt 1: JavaScript gets both halves as numbers, not one 64-bit integer.
        let attempt = AttemptId((2 << 32) | 1);
        let connect = Command::Connect { attempt, broker: BrokerIndex(2) };
        let event = WebEvent::Command { at, at_ms: millis(at), command: &connect, url: Some("ws://h:1") };
        assert_trace_shape(&event, TraceEvent::Command { at, command: connect.clone() });
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["at_ms"], json!(12.345));
        assert_eq!(json["url"], json!("ws://h:1"));
        assert_eq!(json["command"], json!({ "connect": { "attempt": { "epoch": 2, "number": 1 }, "broker": 2 } }));

        let cancel = Command::Cancel { attempt, reason: CancelReason::Lost };
        let event = WebEvent::Command { at, at_ms: millis(at), command: &cancel, url: None };
        assert_trace_shape(&event, TraceEvent::Command { at, command: cancel.clone() });

        let first_frame = Input::FirstFrame { attempt };
        let event = WebEvent::Input { at, at_ms: millis(at), input: &first_frame };
        assert_trace_shape(&event, TraceEvent::Input { at, input: first_frame.clone() });
        assert_eq!(
            serde_json::to_value(&event).unwrap()["input"],
            json!({ "first_frame": { "attempt": { "epoch": 2, "number": 1 } } })
        );

        let overtaken = Command::Cancel { attempt, reason: CancelReason::Overtaken };
        let event = WebEvent::Command { at, at_ms: millis(at), command: &overtaken, url: None };
        assert_trace_shape(&event, TraceEvent::Command { at, command: overtaken.clone() });
        assert_eq!(serde_json::to_value(&event).unwrap()["command"]["cancel"]["reason"], json!("overtaken"));

        let failed = Input::Failed { attempt, error: AttemptError::new(ErrorKind::Refused) };
        let event = WebEvent::Input { at, at_ms: millis(at), input: &failed };
        assert_trace_shape(&event, TraceEvent::Input { at, input: failed.clone() });

        let event = WebEvent::Timeout { at, at_ms: millis(at), timer: Some(TimerKind::Stagger) };
        assert_trace_shape(&event, TraceEvent::Timeout { at, timer: Some(TimerKind::Stagger) });
    }

    #[test]
    fn start_and_abort_events_say_what_a_visualiser_needs() {
        let config = RefreshConfig::default();
        let book = BrokerBook::new(["h:1"]).unwrap();
        let event = WebEvent::Start {
            at: Instant::ZERO,
            at_ms: 0.0,
            config: &config,
            book: &book,
            brokers: vec![BrokerLane { index: BrokerIndex(0), address: "h:1", url: "ws://h:1" }],
        };
        let json: Value = serde_json::to_value(&event).unwrap();
        assert_eq!(json["type"], "start");
        assert_eq!(json["brokers"][0], json!({ "index": 0, "address": "h:1", "url": "ws://h:1" }));
        assert_eq!(json["config"], serde_json::to_value(config).unwrap());
        let abort = WebEvent::Abort { at: Instant::from_millis(5), at_ms: 5.0, closed: vec![AttemptId(0)] };
        assert_eq!(
            serde_json::to_value(&abort).unwrap(),
            json!({ "type": "abort", "at": 5000, "at_ms": 5.0, "closed": [{ "epoch": 0, "number": 0 }] })
        );
    }
}
