//! One refresh on the calling thread: a one-shot [`Session`] and its [`Host`], until the
//! session says the refresh is done; and what it reports — the core's record of every
//! attempt, with what the session saw of each.

use std::time::Duration;

use stagger::session::{Session, SessionConfig};
use stagger::{
    AttemptError, AttemptId, AttemptInfo, AttemptState, CancelReason, ClusterConfig, Metadata, RefreshConfig,
};

use crate::error::Error;
use crate::host::{Done, Host, Io};
use crate::options::RefreshOptions;

/// Fetches cluster metadata from `seeds` (`host:port`) with the policy `config`.
///
/// The simple entry point: plaintext, every topic. See [`refresh_with`] for reports and TLS.
pub fn refresh(config: &RefreshConfig, seeds: &[impl AsRef<str>]) -> Result<Metadata, Error> {
    let options = RefreshOptions { config: *config, ..RefreshOptions::default() };
    refresh_with(&options, seeds).map(|outcome| outcome.metadata)
}

/// Fetches cluster metadata from `seeds`, reporting every attempt.
///
/// Blocks the calling thread until the core is done (its deadline bounds that). Every
/// connection it opened is closed when it returns.
pub fn refresh_with(options: &RefreshOptions, seeds: &[impl AsRef<str>]) -> Result<RefreshOutcome, Error> {
    // A one-shot refresh asks the token source once, before any broker.
    let exchange = options.exchange.with_token_from(options.oauth_token.as_ref())?.into_owned();
    let io = Io {
        #[cfg(feature = "tls")]
        tls: options.tls.clone(),
        tokens: None,
        resolve_names: options.resolve_names,
    };
    let cluster = ClusterConfig { refresh: options.config, ..ClusterConfig::default() };
    let mut host = Host::start(seeds, SessionConfig { cluster, exchange, one_shot: true, ..Default::default() }, io)?;
    host.session.request_refresh(host.clock.now());
    loop {
        host.settle();
        let done = host.take_done();
        let (session, now) = (&host.session, host.clock.now());
        match done {
            Some(Done::Refreshed(epoch, broker)) => {
                let (Some(metadata), Some(refresh)) = (session.metadata(), session.last_refresh()) else {
                    return Err(Error::Closed);
                };
                let attempts = reports(session, epoch);
                let won = attempts.iter().find(|a| a.info.state == AttemptState::Won).map(|a| a.attempt);
                let version = session.attempt_notes().iter().find(|n| Some(n.attempt) == won);
                return Ok(RefreshOutcome {
                    metadata: metadata.clone(),
                    winner: session.cluster().book().address(broker).to_owned(),
                    metadata_version: version.and_then(|n| n.metadata_version),
                    elapsed: now.saturating_since(refresh.started_at()),
                    attempts,
                });
            }
            Some(Done::Failed(epoch, error)) => {
                return Err(Error::Refresh { error, attempts: reports(session, epoch) })
            }
            None => host.wait()?,
        }
    }
}

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
