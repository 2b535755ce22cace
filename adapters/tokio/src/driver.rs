//! One refresh over tokio: a one-shot [`Session`](stagger::session::Session) and its
//! [`Host`], until the session says the refresh is done.

use stagger::report::{Event, RefreshOutcome};
use stagger::session::{Action, SessionConfig};
use stagger::{ClusterConfig, Metadata, RefreshConfig};

use crate::host::{Host, Io};
use crate::options::RefreshOptions;
use crate::resolver::Lookup;
use crate::tls::Connector;
use crate::Error;

/// Name written into recorded traces.
const RECORDER: &str = concat!("stagger-tokio ", env!("CARGO_PKG_VERSION"));

/// Fetches cluster metadata from `seeds` (`host:port`) with the policy `config`.
///
/// The simple entry point: plaintext, every topic, no reports. See [`refresh_with`] for
/// reports, live events, TLS and traces.
pub async fn refresh(config: &RefreshConfig, seeds: &[impl AsRef<str>]) -> Result<Metadata, Error> {
    let options = RefreshOptions { config: *config, ..RefreshOptions::default() };
    refresh_with(&options, seeds, |_| {}).await.map(|outcome| outcome.metadata)
}

/// Fetches cluster metadata from `seeds`, reporting every attempt.
///
/// `observer` sees each [`Event`] as it happens (for a live progress view); the result
/// carries every attempt's [`crate::AttemptReport`] either way, and the policy's trace when
/// `options.record_trace` is set. Dropping the returned future closes every connection it
/// opened before the drop returns. The future is `Send` when `observer` is, so it can be
/// spawned.
pub async fn refresh_with(
    options: &RefreshOptions,
    seeds: &[impl AsRef<str>],
    mut observer: impl FnMut(&Event),
) -> Result<RefreshOutcome, Error> {
    // A one-shot refresh asks the token source once, before any broker.
    let exchange = options.exchange.with_token_from(options.oauth_token.as_ref())?.into_owned();
    let io = Io {
        tls: options.tls.as_ref().map(Connector::new).transpose()?,
        tokens: None,
        lookup: Lookup::new(&options.resolver)?,
    };
    let config = SessionConfig {
        cluster: ClusterConfig { refresh: options.config, ..ClusterConfig::default() },
        exchange,
        one_shot: true,
        observe: true,
        recorder: options.record_trace.then(|| RECORDER.to_owned()),
        ..SessionConfig::default()
    };
    let mut host = Host::start(seeds, config, io)?;
    host.session.request_refresh(host.clock.now());
    host.carry_out();
    loop {
        while let Some(event) = host.session.poll_event() {
            observer(&event);
        }
        match host.take_done() {
            Some(Action::Refreshed { .. }) => return host.session.outcome().ok_or(Error::Closed),
            Some(Action::RefreshFailed { error, .. }) => {
                let (attempts, trace) = (host.session.reports(), host.session.last_trace().cloned().map(Box::new));
                return Err(Error::Refresh { error, attempts, trace });
            }
            _ => {
                host.wait(std::future::pending::<()>()).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn refresh_futures_can_be_spawned() {
        let options = RefreshOptions::default();
        let seeds = ["127.0.0.1:9092".to_owned()];
        let mut seen = 0usize;
        assert_send(&refresh_with(&options, &seeds, |_| seen += 1));
        assert_send(&refresh(&options.config, &seeds));
    }
}
