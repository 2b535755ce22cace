//! One refresh episode driven over tokio: the loop of the core's contract.
//!
//! Drain the core's commands and carry them out (start an attempt, cancel one, finish),
//! then wait for whichever comes first — an attempt's progress or the core's next timer —
//! and hand it to the core. Nothing here decides anything; the core does.

use stagger::{
    AttemptId, BrokerBook, Command, Input, InputOutcome, Instant, Metadata, Refresh, RefreshConfig, TimerKind,
};
use stagger::{Recorder, Trace};

use crate::attempt::{tls_name, AttemptContext, AttemptSet, Progress};
use crate::clock::Clock;
use crate::error::Error;
use crate::ledger::{Act, Ledger, Reported};
use crate::options::RefreshOptions;
use crate::report::{Event, RefreshOutcome};
use crate::resolver::Lookup;
use crate::tls;
use stagger::kafka::validate;

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
/// carries every attempt's [`crate::AttemptReport`] either way, and the core's trace when
/// `options.record_trace` is set. Dropping the returned future closes every connection it
/// opened before the drop returns. The future is `Send` when `observer` is, so it can be
/// spawned.
pub async fn refresh_with(
    options: &RefreshOptions,
    seeds: &[impl AsRef<str>],
    mut observer: impl FnMut(&Event),
) -> Result<RefreshOutcome, Error> {
    // Seeds given by name are resolved through the core: each address is a candidate.
    let mut book = BrokerBook::resolving(seeds.iter().map(|s| s.as_ref()))?;
    validate::seeds(&book)?;
    let exchange = options.exchange.with_token_from(options.oauth_token.as_ref())?.into_owned();
    validate::exchange(&exchange)?;
    let tls = tls::connector(options.tls.as_ref())?;
    let clock = Clock::start();
    let mut at = clock.now();
    let mut core = if options.record_trace {
        Core::Recorded(Box::new(Recorder::new(&options.config, &book, at, RECORDER)?))
    } else {
        Core::Plain(Box::new(Refresh::new(&options.config, &book, at)?))
    };
    let lookup = Lookup::new(&options.resolver)?;
    let mut attempts = AttemptSet::new(AttemptContext { exchange, tls, oauth_token: None, lookup });
    let mut ledger = Ledger::new(at);
    // The input fed by the last call, and the Metadata version of the last answer.
    let mut fed: Option<(AttemptId, Reported, InputOutcome)> = None;
    let mut answer_version = None;
    loop {
        let mut commands = Vec::new();
        while let Some(command) = core.poll_command(at) {
            commands.push(command);
        }
        let acts: Vec<Act<'_>> = commands.iter().filter_map(|c| act(c, &book)).collect();
        if let Some((attempt, reported, outcome)) = fed.take() {
            ledger.settle_input(at, attempt, reported, outcome, &mut observer);
        }
        for a in acts {
            ledger.apply(at, a, &mut observer);
        }
        for command in commands {
            match command {
                // A one-shot refresh knows no broker's identity: no cluster check.
                Command::Connect { attempt, broker } => {
                    attempts.connect(attempt, book.address(broker).into(), tls_name(&book, broker), None)
                }
                Command::Resolve { attempt, broker } => attempts.resolve(attempt, book.address(broker).into()),
                Command::Cancel { attempt, .. } => attempts.cancel(attempt),
                Command::Done { broker, metadata, .. } => {
                    attempts.clear();
                    return Ok(RefreshOutcome {
                        metadata,
                        winner: book.address(broker).to_owned(),
                        metadata_version: answer_version,
                        elapsed: ledger.offset(at),
                        attempts: ledger.into_reports(),
                        trace: core.into_trace(),
                    });
                }
                Command::GiveUp(error) => {
                    attempts.clear();
                    return Err(Error::Refresh {
                        error,
                        attempts: ledger.into_reports(),
                        trace: core.into_trace().map(Box::new),
                    });
                }
            }
        }
        let timer = core.next_timer();
        tokio::select! {
            biased;
            (attempt, progress) = attempts.next() => {
                at = clock.now();
                let (input, reported) = match progress {
                    Progress::Connected { tls } => (Input::Connected { attempt, tls }, Reported::Connected),
                    Progress::Answered => (Input::FirstFrame { attempt }, Reported::Answered),
                    Progress::Finished(Ok(answer)) => {
                        answer_version = answer.version;
                        let rejection = answer.metadata.rejection();
                        (Input::Response { attempt, metadata: answer.metadata }, Reported::Response { rejection })
                    }
                    Progress::Finished(Err(error)) | Progress::Resolved(Err(error)) => {
                        (Input::Failed { attempt, error: error.clone() }, Reported::Failed(error))
                    }
                    Progress::Resolved(Ok(addresses)) => {
                        (Input::Resolved { attempt, addresses: addresses.clone() }, Reported::Resolved(addresses))
                    }
                };
                let outcome = core.handle_input(at, input);
                // The addresses a name resolved to are entries of the book from now on.
                book.absorb(core.refresh());
                fed = Some((attempt, reported, outcome));
            }
            () = clock.sleep_until(timer.map(|(due, _)| due)) => {
                at = clock.now();
                if let Some((_, kind)) = timer.filter(|(due, _)| *due <= at) {
                    ledger.timer(at, kind, &mut observer);
                }
                core.handle_timeout(at);
            }
        }
    }
}

/// The ledger's view of a command (terminal `GiveUp` has no attempt to record).
fn act<'a>(command: &Command, book: &'a BrokerBook) -> Option<Act<'a>> {
    match *command {
        Command::Connect { attempt, broker } => Some(Act::Start { attempt, address: book.address(broker) }),
        Command::Resolve { attempt, broker } => Some(Act::Resolve { attempt, address: book.address(broker) }),
        Command::Cancel { attempt, reason } => Some(Act::Cancel { attempt, reason }),
        Command::Done { attempt, .. } => Some(Act::Won { attempt }),
        Command::GiveUp(_) => None,
    }
}

/// The core, recording a trace or not.
enum Core {
    Plain(Box<Refresh>),
    Recorded(Box<Recorder>),
}

impl Core {
    fn poll_command(&mut self, now: Instant) -> Option<Command> {
        match self {
            Core::Plain(r) => r.poll_command(),
            Core::Recorded(r) => r.poll_command(now),
        }
    }

    fn handle_input(&mut self, now: Instant, input: Input) -> InputOutcome {
        match self {
            Core::Plain(r) => r.handle_input(now, input),
            Core::Recorded(r) => r.handle_input(now, input),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        match self {
            Core::Plain(r) => r.handle_timeout(now),
            Core::Recorded(r) => r.handle_timeout(now),
        }
    }

    fn refresh(&self) -> &Refresh {
        match self {
            Core::Plain(r) => r,
            Core::Recorded(r) => r.refresh(),
        }
    }

    fn next_timer(&self) -> Option<(Instant, TimerKind)> {
        match self {
            Core::Plain(r) => r.next_timer(),
            Core::Recorded(r) => r.refresh().next_timer(),
        }
    }

    fn into_trace(self) -> Option<Trace> {
        match self {
            Core::Plain(_) => None,
            Core::Recorded(r) => Some(r.into_trace()),
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
