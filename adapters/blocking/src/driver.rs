//! One refresh episode on the calling thread: the loop of the core's contract.
//!
//! Drain the core's commands and carry them out (start an attempt, cancel one, finish),
//! then wait for whichever comes first — an attempt's progress or the core's next timer —
//! and hand it to the core. Nothing here decides anything; the core does.

use stagger::kafka::validate;
use stagger::{BrokerBook, Command, Metadata, Refresh, RefreshConfig};

use crate::attempt::{tls_name, Context};
use crate::attempts::Attempts;
use crate::clock::Clock;
use crate::error::Error;
use crate::options::RefreshOptions;
use crate::report::{RefreshOutcome, Reports};

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
    let mut book = if options.resolve_names { BrokerBook::resolving(seeds)? } else { BrokerBook::new(seeds)? };
    validate::seeds(&book)?;
    let exchange = options.exchange.with_token_from(options.oauth_token.as_ref())?.into_owned();
    validate::exchange(&exchange)?;
    let ctx = Context {
        exchange,
        #[cfg(feature = "tls")]
        tls: options.tls.clone(),
        oauth_token: None,
    };
    let clock = Clock::start();
    let mut core = Refresh::new(&options.config, &book, clock.now())?;
    let mut attempts = Attempts::new(ctx)?;
    let mut reports = Reports::default();
    loop {
        while let Some(command) = core.poll_command() {
            match command {
                // A one-shot refresh knows no broker's identity: no cluster check.
                Command::Connect { attempt, broker } => {
                    reports.started(attempt, book.address(broker), &core);
                    attempts.connect(attempt, book.address(broker).into(), tls_name(&book, broker), None);
                }
                Command::Resolve { attempt, broker } => {
                    reports.started(attempt, book.address(broker), &core);
                    attempts.resolve(attempt, book.address(broker).into());
                }
                Command::Cancel { attempt, reason } => {
                    reports.cancelled(attempt, reason, &core);
                    attempts.cancel(attempt);
                }
                Command::Done { attempt, broker, metadata } => {
                    let metadata_version = attempts.take_answer(attempt).and_then(|(_, version)| version);
                    drop(attempts);
                    return Ok(RefreshOutcome {
                        metadata,
                        winner: book.address(broker).to_owned(),
                        metadata_version,
                        elapsed: clock.now().saturating_since(core.started_at()),
                        attempts: reports.finish(&core),
                    });
                }
                Command::GiveUp(error) => {
                    drop(attempts);
                    return Err(Error::Refresh { error, attempts: reports.finish(&core) });
                }
            }
        }
        attempts.wait(clock.deadline(core.poll_timeout()))?;
        let now = clock.now();
        match attempts.poll_input() {
            Some(input) => {
                reports.feed(&mut core, now, input);
                // The addresses a name resolved to are entries of the book from now on.
                book.absorb(&core);
            }
            None => core.handle_timeout(now),
        }
    }
}
