//! What a refresh reports: the core's own record of every attempt, plus what only the
//! adapter saw — the error its socket or broker produced, and why the core closed it.

use std::time::Duration;

use stagger::{
    AttemptError, AttemptId, AttemptInfo, BrokerBook, CancelReason, Input, Instant, Metadata, Refresh, RefreshError,
};

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

/// The reports of one refresh as it runs, from the commands carried out and the inputs fed.
#[derive(Debug, Default)]
pub(crate) struct Reports {
    reports: Vec<AttemptReport>,
    /// The reason a metadata answer cannot win, until the core says whether it rejected it.
    rejection: Option<(AttemptId, AttemptError)>,
}

impl Reports {
    /// The core started `attempt` to `broker` (`info` is filled in at the end).
    pub(crate) fn started(&mut self, attempt: AttemptId, broker: &str, refresh: &Refresh) {
        if let Some(&info) = refresh.attempt(attempt) {
            let report = AttemptReport { attempt, broker: broker.to_owned(), info, error: None, cancelled: None };
            self.reports.push(report);
        }
    }

    /// Feeds `input` to the core and keeps what only the adapter knows about it (the error,
    /// or why an answer cannot win) if the core applied it.
    pub(crate) fn feed(&mut self, refresh: &mut Refresh, now: Instant, input: Input) {
        let noted = match &input {
            Input::Failed { attempt, error } => Some((*attempt, Some(error.clone()), None)),
            Input::Response { attempt, metadata } => Some((*attempt, None, metadata.rejection())),
            Input::Connected { .. } | Input::FirstFrame { .. } | Input::Resolved { .. } => None,
        };
        if !refresh.handle_input(now, input).is_applied() {
            return;
        }
        match noted {
            Some((attempt, Some(error), _)) => {
                if let Some(r) = self.find(attempt) {
                    r.error = Some(error);
                }
            }
            Some((attempt, None, rejection)) => self.rejection = rejection.map(|e| (attempt, e)),
            None => {}
        }
    }

    /// The core cancelled `attempt` for `reason`.
    pub(crate) fn cancelled(&mut self, attempt: AttemptId, reason: CancelReason, refresh: &Refresh) {
        let connected = refresh.attempt(attempt).and_then(|info| info.connected_at);
        let rejection = self.rejection.take().filter(|(a, _)| *a == attempt).map(|(_, e)| e);
        if let Some(r) = self.find(attempt) {
            r.cancelled = Some(reason);
            r.error = match reason {
                CancelReason::Rejected => rejection,
                CancelReason::TimedOut => Some(AttemptError::timed_out(refresh.resolves(attempt), connected.is_some())),
                _ => r.error.take(),
            };
        }
    }

    /// Every report, with the core's final record of each attempt.
    pub(crate) fn finish(mut self, refresh: &Refresh) -> Vec<AttemptReport> {
        for r in &mut self.reports {
            if let Some(&info) = refresh.attempt(r.attempt) {
                r.info = info;
            }
        }
        self.reports
    }

    /// The reports of a refresh a [`stagger::Cluster`] ran and gave up on, read from the core's
    /// record of it: each broker's last error, or why the core cancelled it, goes to that
    /// broker's latest attempt. A cancelled one gets no error, as when the adapter saw the
    /// cancel itself: the error the core records for it is of the timeout it pre-empted.
    pub(crate) fn of_finished(refresh: &Refresh, book: &BrokerBook, error: &RefreshError) -> Vec<AttemptReport> {
        let mut reports: Vec<AttemptReport> = refresh
            .attempts()
            .map(|(attempt, &info)| AttemptReport {
                attempt,
                broker: book.address(info.broker).to_owned(),
                info,
                error: None,
                cancelled: None,
            })
            .collect();
        for failure in &error.brokers {
            if let Some(r) = reports.iter_mut().rev().find(|r| r.info.broker == failure.broker) {
                r.cancelled = failure.cancelled;
                r.error = failure.last_error.clone().filter(|_| failure.cancelled.is_none());
            }
        }
        reports
    }

    fn find(&mut self, attempt: AttemptId) -> Option<&mut AttemptReport> {
        self.reports.iter_mut().find(|r| r.attempt == attempt)
    }
}
