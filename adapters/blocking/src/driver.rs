//! One refresh on the calling thread: a one-shot [`Session`](stagger::session::Session) and
//! its [`Host`], until the session says the refresh is done.

use stagger::report::RefreshOutcome;
use stagger::session::{Action, SessionConfig};
use stagger::{ClusterConfig, Metadata, RefreshConfig};

use crate::host::{Host, Io};
use crate::options::RefreshOptions;
use crate::Error;

/// Fetches cluster metadata from `seeds` (`host:port`) with the policy `config`.
///
/// The simple entry point: plaintext, every topic. See [`refresh_with`] for reports and TLS.
pub fn refresh(config: &RefreshConfig, seeds: &[impl AsRef<str>]) -> Result<Metadata, Error> {
    let options = RefreshOptions { config: *config, ..RefreshOptions::default() };
    refresh_with(&options, seeds).map(|outcome| outcome.metadata)
}

/// Fetches cluster metadata from `seeds`, reporting every attempt.
///
/// Blocks the calling thread until the session is done (its deadline bounds that). Every
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
        match host.take_done() {
            Some(Action::Refreshed { .. }) => return host.session.outcome().ok_or(Error::Closed),
            Some(Action::RefreshFailed { error, .. }) => {
                return Err(Error::Refresh { error, attempts: host.session.reports(), trace: None })
            }
            _ => host.wait()?,
        }
    }
}
