//! The rich payloads as JSON: the latest metadata, the last refresh's report (every
//! attempt, the counters), a failed refresh's error with every broker's, and the ABI's own
//! errors. Shapes are documented in `docs/abi.md`; times are the host's clock in ns, like the
//! `now_ns` it passes in. No payload carries a credential: the session holds them in
//! `Secret`s, which have no serialisation at all.

use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::Serialize;
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
/// has finished: `notes`) and, for a finished one, how it ended. Its fields serialise in the
/// order of their names.
#[derive(Clone, Copy)]
struct RefreshRecord<'a> {
    session: &'a Session,
    refresh: &'a stagger::Refresh,
    notes: &'a [AttemptNote],
    ended: Option<&'a Ended>,
}

impl Serialize for RefreshRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let RefreshRecord { session, refresh, ended, .. } = *self;
        let book = session.cluster().book();
        let epoch = refresh.epoch();
        let (outcome, winner, error) = match ended {
            Some(Ended::Refreshed { epoch: e, broker }) if *e == epoch => (
                "refreshed",
                Some(Winner { address: book.address(stagger::BrokerIndex(*broker)), broker: *broker }),
                None,
            ),
            Some(Ended::Failed { epoch: e, error }) if *e == epoch => ("failed", None, Some(refresh_error(error))),
            _ if !refresh.is_finished() => ("running", None, None),
            _ => ("unknown", None, None),
        };
        let ended_ns =
            refresh.is_finished().then(|| refresh.attempts().filter_map(|(_, a)| a.ended_at).max().map(ns)).flatten();
        let mut map = serializer.serialize_map(Some(9))?;
        map.serialize_entry("attempts", &Attempts(*self))?;
        map.serialize_entry("cause", refresh.cause().name())?;
        map.serialize_entry("ended_ns", &ended_ns)?;
        map.serialize_entry("epoch", &epoch)?;
        map.serialize_entry("error", &error)?;
        map.serialize_entry("outcome", outcome)?;
        map.serialize_entry("started_ns", &ns(refresh.started_at()))?;
        map.serialize_entry("stats", &refresh.stats())?;
        map.serialize_entry("winner", &winner)?;
        map.end()
    }
}

/// The broker that answered a refresh.
#[derive(Serialize)]
struct Winner<'a> {
    address: &'a str,
    broker: u32,
}

/// A refresh's attempts in the core's one report vocabulary: the rows of the CLI's `--json`.
struct Attempts<'a>(RefreshRecord<'a>);

impl Serialize for Attempts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let RefreshRecord { session, refresh, notes, .. } = self.0;
        let book = session.cluster().book();
        let mut seq = serializer.serialize_seq(None)?;
        for (id, info) in refresh.attempts() {
            let note = notes.iter().find(|n| n.attempt == id);
            seq.serialize_element(&AttemptReport::new(
                id,
                info,
                note,
                book.address(info.broker),
                refresh.started_at(),
            ))?;
        }
        seq.end()
    }
}

/// The report: the session's counters, the refresh running (its attempts so far), and the
/// last finished refresh with every attempt and how it ended. Written straight into bytes
/// (no tree of values in between), its fields in the order of their names.
pub fn report(session: &Session, ended: Option<&Ended>) -> Vec<u8> {
    struct Report<'a>(&'a Session, Option<&'a Ended>);
    impl Serialize for Report<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let Report(session, ended) = *self;
            let running =
                session.cluster().current().map(|refresh| RefreshRecord { session, refresh, notes: &[], ended: None });
            let last = session.last_refresh().map(|refresh| RefreshRecord {
                session,
                refresh,
                notes: session.attempt_notes(),
                ended,
            });
            let mut map = serializer.serialize_map(Some(7))?;
            map.serialize_entry("buffered_bytes", &session.buffered_bytes())?;
            map.serialize_entry("ignored_events", &session.ignored_events())?;
            map.serialize_entry("kept_connection", &session.kept_connection().map(|c| c.0))?;
            map.serialize_entry("last_refresh", &last)?;
            map.serialize_entry("open_connections", &OpenConnections(session))?;
            map.serialize_entry("running", &running)?;
            map.serialize_entry("stats", &session.stats())?;
            map.end()
        }
    }
    struct OpenConnections<'a>(&'a Session);
    impl Serialize for OpenConnections<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_seq(self.0.open_connections().map(|c| c.0))
        }
    }
    // Serialising plain data into a Vec cannot fail.
    serde_json::to_vec(&Report(session, ended)).unwrap_or_else(|_| b"null".to_vec())
}
