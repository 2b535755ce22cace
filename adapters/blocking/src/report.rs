//! What a refresh reports: the core's record of every attempt, with what the session saw of
//! each — the error its socket or broker produced, and why the policy closed it.

use std::time::Duration;

use stagger::session::Session;
use stagger::{AttemptError, AttemptId, AttemptInfo, AttemptState, CancelReason, Metadata};

/// One attempt of a refresh, start to end.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptReport {
    /// The core's id for it.
    pub attempt: AttemptId,
    /// The broker's `host:port`.
    pub broker: String,
    /// The core's record: when it started, connected, first heard the broker, ended (core
    /// instants, counted from the start of the refresh), and how it stands.
    pub info: AttemptInfo,
    /// Why it failed, if it did: what the socket or the broker said, a rejected answer's
    /// reason, or the core's attempt timeout (`ConnectTimeout` before the transport came
    /// up, `ResponseTimeout` after).
    pub error: Option<AttemptError>,
    /// Why the core closed it, if it did (lost the race, timed out, overtaken, …).
    pub cancelled: Option<CancelReason>,
}

/// A successful refresh: the metadata and how it was obtained.
#[derive(Clone, Debug)]
pub struct RefreshOutcome {
    /// The winning answer.
    pub metadata: Metadata,
    /// The `host:port` of the broker that answered.
    pub winner: String,
    /// The Metadata API version the winning exchange used.
    pub metadata_version: Option<i16>,
    /// Time from the start of the refresh to the win.
    pub elapsed: Duration,
    /// Every attempt, in start order.
    pub attempts: Vec<AttemptReport>,
}

impl RefreshOutcome {
    /// TCP connections the refresh opened (attempts whose transport came up).
    pub fn connections_opened(&self) -> usize {
        self.attempts.iter().filter(|a| a.info.connected_at.is_some()).count()
    }
}

/// Every attempt of the refresh `epoch`, if it is the one `session` finished last: the
/// policy's record of each, with what the session saw of it.
pub(crate) fn reports(session: &Session, epoch: u32) -> Vec<AttemptReport> {
    let Some(refresh) = session.last_refresh().filter(|r| r.epoch() == epoch) else { return Vec::new() };
    let book = session.cluster().book();
    let notes = session.attempt_notes();
    let report = |(attempt, &info): (AttemptId, &AttemptInfo)| {
        let note = notes.iter().find(|n| n.attempt == attempt);
        let broker = book.address(info.broker).to_owned();
        let (error, cancelled) = note.map_or((None, None), |n| (n.error.clone(), n.cancelled));
        AttemptReport { attempt, broker, info, error, cancelled }
    };
    refresh.attempts().map(report).collect()
}

/// The Metadata version the winner of the refresh `session` finished last used.
pub(crate) fn metadata_version(session: &Session) -> Option<i16> {
    let refresh = session.last_refresh()?;
    let won = |id: AttemptId| refresh.attempt(id).is_some_and(|i| i.state == AttemptState::Won);
    session.attempt_notes().iter().find(|n| won(n.attempt)).and_then(|n| n.metadata_version)
}
