//! One refresh episode on the calling thread: a one-shot [`Session`] and its [`Host`], until
//! the session says the refresh is done. Nothing here decides anything; the session does.

use stagger::kafka::validate;
use stagger::session::{Session, SessionConfig};
use stagger::{BrokerBook, ClusterConfig, Metadata, RefreshConfig};

use crate::clock::Clock;
use crate::error::Error;
use crate::host::{Done, Host, Io};
use crate::options::RefreshOptions;
use crate::report::{metadata_version, reports, RefreshOutcome};

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
    let seeds = seeds.iter().map(|s| s.as_ref());
    let book = if options.resolve_names { BrokerBook::resolving(seeds)? } else { BrokerBook::new(seeds)? };
    validate::seeds(&book)?;
    // A one-shot refresh asks the token source once, before any broker.
    let exchange = options.exchange.with_token_from(options.oauth_token.as_ref())?.into_owned();
    validate::exchange(&exchange)?;
    let io = Io {
        #[cfg(feature = "tls")]
        tls: options.tls.clone(),
        tokens: None,
    };
    let cluster = ClusterConfig { refresh: options.config, ..ClusterConfig::default() };
    let config = SessionConfig { cluster, exchange, tls: io.tls(), fresh_tokens: false, one_shot: true };
    let clock = Clock::start();
    let mut host = Host::new(Session::new(config, book, clock.now())?, clock, io)?;
    host.session.request_refresh(clock.now());
    loop {
        host.settle();
        match host.take_done() {
            Some(Done::Refreshed(epoch, broker)) => {
                let session = &host.session;
                let (Some(metadata), Some(refresh)) = (session.metadata(), session.last_refresh()) else {
                    return Err(Error::Closed);
                };
                return Ok(RefreshOutcome {
                    metadata: metadata.clone(),
                    winner: session.cluster().book().address(broker).to_owned(),
                    metadata_version: metadata_version(session),
                    elapsed: clock.now().saturating_since(refresh.started_at()),
                    attempts: reports(session, epoch),
                });
            }
            Some(Done::Failed(epoch, error)) => {
                return Err(Error::Refresh { error, attempts: reports(&host.session, epoch) })
            }
            None => host.wait()?,
        }
    }
}
