//! The rich payloads as JSON: the latest metadata, the last refresh's report (every
//! attempt, the counters), a failed refresh's error with every broker's, and the ABI's own
//! errors. Shapes are documented in `docs/abi.md`; times are the host's clock in ns, like the
//! `now_ns` it passes in. No payload carries a credential: the session holds them in
//! `Secret`s, which have no serialisation at all.

use serde_json::{json, Value};
use stagger::report::AttemptReport;
use stagger::session::{AttemptNote, Session};
use stagger::{AttemptError, AttemptId, ErrorKind, Instant, RefreshError};

/// What the ABI remembers of the last refresh that ended, to report it beside the core's
/// record of its attempts (the session keeps the attempts, not how the refresh ended).
#[derive(Clone, Debug)]
pub enum Ended {
    /// `REFRESHED` was sent for this epoch, naming the broker that answered.
    Refreshed {
        /// The refresh's epoch.
        epoch: u32,
        /// The broker that answered (index in the book).
        broker: u32,
    },
    /// `REFRESH_FAILED` was sent for this epoch.
    Failed {
        /// The refresh's epoch.
        epoch: u32,
        /// Why.
        error: RefreshError,
    },
}

/// Host-clock ns of a session instant (the session counts µs of the host's clock).
pub fn ns(at: Instant) -> u64 {
    at.as_micros().saturating_mul(1000)
}

fn attempt_id(id: AttemptId) -> Value {
    json!({ "epoch": id.epoch(), "number": id.number() })
}

/// An attempt's error: its kind's name, the Kafka code for a broker error, the detail, and
/// the whole in words.
pub fn attempt_error(error: &AttemptError) -> Value {
    let code = match error.kind {
        ErrorKind::BrokerError(code) => Value::from(code),
        _ => Value::Null,
    };
    json!({ "kind": error.kind.name(), "code": code, "detail": error.detail, "message": error.to_string() })
}

/// A refresh's give-up: why, the last error (with its broker's address) and every broker's story.
pub fn refresh_error(error: &RefreshError) -> Value {
    let (reason, passes) = match error.reason {
        stagger::GiveUpReason::AllFailed { passes } => ("all_failed", Value::from(passes)),
        stagger::GiveUpReason::DeadlineExceeded => ("deadline_exceeded", Value::Null),
        stagger::GiveUpReason::Fatal => ("fatal", Value::Null),
        _ => ("other", Value::Null),
    };
    let last_error = match &error.last_error {
        Some((attempt, broker, e)) => {
            let mut v = attempt_error(e);
            v["attempt"] = attempt_id(*attempt);
            v["broker"] = Value::from(broker.0);
            v["address"] = error.last_broker_address().map_or(Value::Null, Value::from);
            v
        }
        None => Value::Null,
    };
    let brokers: Vec<Value> = error
        .brokers
        .iter()
        .map(|b| {
            json!({
                "broker": b.broker.0,
                "address": &*b.address,
                "attempts": b.attempts,
                "error": b.last_error.as_ref().map_or(Value::Null, attempt_error),
                "cancelled": b.cancelled.map(|c| c.name()),
                "story": b.to_string(),
            })
        })
        .collect();
    json!({
        "message": error.to_string(),
        "reason": reason,
        "passes": passes,
        "last_error": last_error,
        "brokers": brokers,
    })
}

/// The latest metadata (`null` before the first success), as the core's serde writes it.
pub fn metadata(session: &Session) -> Vec<u8> {
    // Serialising plain data into a Vec cannot fail.
    serde_json::to_vec(&session.metadata()).unwrap_or_else(|_| b"null".to_vec())
}

/// One refresh's record: every attempt (with what the session saw of it, once the refresh
/// has finished: `notes`) and, for a finished one, how it ended.
fn refresh(session: &Session, refresh: &stagger::Refresh, notes: &[AttemptNote], ended: Option<&Ended>) -> Value {
    let book = session.cluster().book();
    let epoch = refresh.epoch();
    // The attempts in the core's one report vocabulary: the rows of the CLI's `--json`.
    let attempts: Vec<Value> = refresh
        .attempts()
        .map(|(id, info)| {
            let note = notes.iter().find(|n| n.attempt == id);
            let report = AttemptReport::new(id, info, note, book.address(info.broker), refresh.started_at());
            serde_json::to_value(&report).unwrap_or(Value::Null)
        })
        .collect();
    let (outcome, winner, error) = match ended {
        Some(Ended::Refreshed { epoch: e, broker }) if *e == epoch => {
            let address = book.address(stagger::BrokerIndex(*broker));
            ("refreshed", json!({ "broker": broker, "address": address }), Value::Null)
        }
        Some(Ended::Failed { epoch: e, error }) if *e == epoch => ("failed", Value::Null, refresh_error(error)),
        _ if !refresh.is_finished() => ("running", Value::Null, Value::Null),
        _ => ("unknown", Value::Null, Value::Null),
    };
    json!({
        "epoch": epoch,
        "cause": refresh.cause().name(),
        "started_ns": ns(refresh.started_at()),
        "ended_ns": refresh.is_finished().then(|| refresh.attempts().filter_map(|(_, a)| a.ended_at).max().map(ns)).flatten(),
        "outcome": outcome,
        "winner": winner,
        "error": error,
        "stats": serde_json::to_value(refresh.stats()).unwrap_or(Value::Null),
        "attempts": attempts,
    })
}

/// The report: the session's counters, the refresh running (its attempts so far), and the
/// last finished refresh with every attempt and how it ended.
pub fn report(session: &Session, ended: Option<&Ended>) -> Value {
    json!({
        "stats": serde_json::to_value(session.stats()).unwrap_or(Value::Null),
        "running": session.cluster().current().map(|r| refresh(session, r, &[], None)),
        "last_refresh": session.last_refresh().map(|r| refresh(session, r, session.attempt_notes(), ended)),
        "open_connections": session.open_connections().map(|c| c.0).collect::<Vec<_>>(),
        "kept_connection": session.kept_connection().map(|c| c.0),
        "buffered_bytes": session.buffered_bytes(),
        "ignored_events": session.ignored_events(),
    })
}
