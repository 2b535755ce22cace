//! A long-lived client: cached metadata, single-flight refresh, periodic refresh in the
//! background, and the winning connection kept for the next refresh.
//!
//! The core's [`Cluster`] makes every decision (when to refresh, which broker first —
//! connected ones are preferred —, whether concurrent requests share a refresh). A spawned
//! task owns the `Cluster`, the attempts and the kept connection; [`Client`] handles talk
//! to it over a channel. Closing or dropping the client stops that task, which closes
//! every socket.
//!
//! Every fresh connection to a discovered broker carries the cluster and node id the core
//! expects of it ([`Cluster::identity`]): a Kafka 4.4 broker that is no longer that node of
//! that cluster answers REBOOTSTRAP_REQUIRED (KIP-1242), an older one is checked by the
//! cluster id of its answer, and either way the core goes on to the next broker, the seeds
//! last, and rebootstraps ([`ClusterEvent::Rebootstrapped`]). A kept connection is not
//! checked again: a TCP connection cannot move to another broker.

use std::collections::{HashMap, VecDeque};
use std::future::pending;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use stagger::{
    AttemptId, BrokerBook, BrokerIndex, ClientStats, Cluster, ClusterConfig, ClusterEvent, ConfigError, Input,
    InputOutcome, Instant, Metadata, RefreshCause,
};
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::attempt::{tls_name, AttemptContext, AttemptSet, Progress};
use crate::clock::Clock;
use crate::error::Error;
use crate::ledger::{Act, Ledger, Reported};
use crate::options::{TlsOptions, TokenSource};
use crate::resolver::Lookup;
use crate::tls;
use crate::transport::Transport;
use stagger::kafka::validate;

/// Connection settings of a [`Client`] (the policy lives in its [`ClusterConfig`]).
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// What each attempt asks the broker (client id, topics, maximum frame size).
    pub exchange: stagger::kafka::ExchangeConfig,
    /// TLS to the brokers; `None` for plaintext. Needs the `tls` feature.
    pub tls: Option<TlsOptions>,
    /// Where `OAUTHBEARER` tokens come from: asked as each attempt starts, so a token that
    /// expired between refreshes is replaced (a failure fails that attempt as fatal).
    pub oauth_token: Option<TokenSource>,
    /// Which resolver answers the core's lookups of seeds given by name (see
    /// [`crate::RefreshOptions::resolver`]).
    pub resolver: crate::Resolver,
}

/// Long-lived cluster metadata for an application. See the module documentation.
///
/// Cheap to share behind an `Arc`; every method takes `&self`.
#[derive(Debug)]
pub struct Client {
    requests: mpsc::UnboundedSender<Request>,
    shared: Arc<Shared>,
    max_age: Duration,
    task: Option<JoinHandle<()>>,
}

type Reply = oneshot::Sender<Result<Arc<Metadata>, Error>>;

#[derive(Debug)]
enum Request {
    /// Fresh metadata, why, and the `host:port` of the broker the trouble came from.
    Refresh(Reply, RefreshCause, Option<String>),
    Close,
}

#[derive(Debug, Default)]
struct Shared {
    cache: Mutex<Option<(Arc<Metadata>, tokio::time::Instant)>>,
    stats: Mutex<ClientStats>,
}

impl Client {
    /// Starts a client over `seeds` (`host:port`); no broker is contacted until the first
    /// [`Client::metadata`] or [`Client::refresh`], or the first periodic refresh.
    ///
    /// Must be called inside a tokio runtime: it spawns the background task there.
    pub fn new(config: ClusterConfig, seeds: &[impl AsRef<str>], options: ClientOptions) -> Result<Client, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::Config(ConfigError { field: "runtime", problem: "Client::new needs a tokio runtime".into() })
        })?;
        // Seeds given by name are resolved through the core: each address is a candidate.
        let book = BrokerBook::resolving(seeds.iter().map(|s| s.as_ref()))?;
        validate::seeds(&book)?;
        validate::exchange(&options.exchange)?;
        let tls = tls::connector(options.tls.as_ref())?;
        let clock = Clock::start();
        let cluster = Cluster::new(config, book, clock.now())?;
        let shared = Arc::new(Shared::default());
        let (requests, inbox) = mpsc::unbounded_channel();
        let background = Background {
            cluster,
            clock,
            attempts: AttemptSet::new(AttemptContext {
                exchange: options.exchange,
                tls,
                oauth_token: options.oauth_token,
                lookup: Lookup::new(&options.resolver)?,
            }),
            kept: None,
            waiters: HashMap::new(),
            ledgers: VecDeque::new(),
            answered: None,
            fed: None,
            shared: shared.clone(),
        };
        let task = runtime.spawn(background.run(inbox));
        Ok(Client { requests, shared, max_age: config.refresh_interval, task: Some(task) })
    }

    /// The cluster metadata: the cached copy while it is younger than the refresh
    /// interval (Kafka's `metadata.max.age.ms`), otherwise a fresh one.
    pub async fn metadata(&self) -> Result<Arc<Metadata>, Error> {
        let cached = lock(&self.shared.cache).clone();
        match cached {
            Some((metadata, at)) if at.elapsed() < self.max_age => Ok(metadata),
            _ => self.refresh().await,
        }
    }

    /// The cached metadata, however old, without contacting anyone.
    pub fn cached(&self) -> Option<Arc<Metadata>> {
        lock(&self.shared.cache).as_ref().map(|(m, _)| m.clone())
    }

    /// Fresh metadata now. Concurrent callers share one refresh (the core coalesces them),
    /// so a burst of "leader moved" errors in an application costs one refresh.
    pub async fn refresh(&self) -> Result<Arc<Metadata>, Error> {
        self.refresh_because(RefreshCause::Requested, None).await
    }

    /// Fresh metadata now, saying why, so the policy can read it ([`RefreshCause`]): after a
    /// refused or reset connection or NOT_LEADER-style errors (a failover, seen by every
    /// client at once) the refresh is gentle; `broker`, the `host:port` the trouble came
    /// from when known (a request that timed out there, say), is tried last. Shares a
    /// running refresh as [`Client::refresh`] does.
    pub async fn refresh_because(&self, cause: RefreshCause, broker: Option<&str>) -> Result<Arc<Metadata>, Error> {
        let (reply, answer) = oneshot::channel();
        let request = Request::Refresh(reply, cause, broker.map(str::to_owned));
        self.requests.send(request).map_err(|_| Error::Closed)?;
        answer.await.unwrap_or(Err(Error::Closed))
    }

    /// What the client has done so far.
    pub fn stats(&self) -> ClientStats {
        lock(&self.shared.stats).clone()
    }

    /// Stops the background task and waits until every connection is closed.
    ///
    /// Dropping the client also stops it, but without waiting.
    pub async fn close(mut self) {
        let _ = self.requests.send(Request::Close);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The connection kept from the last winning attempt.
struct Kept {
    broker: BrokerIndex,
    transport: Transport,
}

/// The background task's state.
struct Background {
    cluster: Cluster,
    clock: Clock,
    attempts: AttemptSet,
    kept: Option<Kept>,
    /// Callers waiting, by refresh epoch.
    waiters: HashMap<u32, Vec<Reply>>,
    /// Reports of the running refresh and the one before, by epoch (newest last): a
    /// periodic refresh can start in the very call that ends the previous one.
    ledgers: VecDeque<(u32, Ledger)>,
    /// The connection of the answer fed last, until the core says whether it won.
    answered: Option<(AttemptId, Transport)>,
    /// The input fed last, for the ledger.
    fed: Option<(AttemptId, Reported, InputOutcome)>,
    shared: Arc<Shared>,
}

impl Background {
    async fn run(mut self, mut inbox: mpsc::UnboundedReceiver<Request>) {
        let mut at = self.clock.now();
        loop {
            self.carry_out(at);
            let timer = self.cluster.poll_timeout();
            tokio::select! {
                biased;
                request = inbox.recv() => {
                    at = self.clock.now();
                    match request {
                        Some(Request::Refresh(reply, cause, broker)) => self.request(at, reply, cause, broker),
                        Some(Request::Close) | None => return,
                    }
                }
                (attempt, progress) = self.attempts.next() => {
                    at = self.clock.now();
                    self.progress(at, attempt, progress);
                }
                (broker, reset) = watch(&mut self.kept) => {
                    // The broker closed (or wrote to) an idle kept connection: forget it. A
                    // reset is a lost connection the next plain refresh says it follows; a
                    // clean close is what brokers do to idle connections.
                    self.kept = None;
                    if reset {
                        self.cluster.connection_lost(broker);
                    } else {
                        self.cluster.connection_closed(broker);
                    }
                    *lock(&self.shared.stats) = self.cluster.stats();
                }
                () = self.clock.sleep_until(timer) => {
                    at = self.clock.now();
                    self.cluster.handle_timeout(at);
                }
            }
        }
    }

    fn request(&mut self, at: Instant, reply: Reply, cause: RefreshCause, broker: Option<String>) {
        let broker = broker.and_then(|b| self.cluster.book().find(&b));
        let epoch = self.cluster.request_refresh_because(at, cause, broker);
        if self.cluster.current().map(|r| r.epoch()) == Some(epoch) {
            self.waiters.entry(epoch).or_default().push(reply);
        } else {
            // Cannot happen with a validated config and a non-empty book; never hang a caller.
            let problem = "the core could not start a refresh".into();
            let _ = reply.send(Err(Error::Config(ConfigError { field: "cluster", problem })));
        }
    }

    fn progress(&mut self, at: Instant, attempt: AttemptId, progress: Progress) {
        let (input, reported) = match progress {
            Progress::Connected { tls } => (Input::Connected { attempt, tls }, Reported::Connected),
            Progress::Answered => (Input::FirstFrame { attempt }, Reported::Answered),
            Progress::Finished(Ok(answer)) => {
                let rejection = answer.metadata.rejection();
                self.answered = Some((attempt, answer.transport));
                (Input::Response { attempt, metadata: answer.metadata }, Reported::Response { rejection })
            }
            Progress::Finished(Err(error)) | Progress::Resolved(Err(error)) => {
                (Input::Failed { attempt, error: error.clone() }, Reported::Failed(error))
            }
            Progress::Resolved(Ok(addresses)) => {
                (Input::Resolved { attempt, addresses: addresses.clone() }, Reported::Resolved(addresses))
            }
        };
        let outcome = self.cluster.handle_input(at, input);
        self.fed = Some((attempt, reported, outcome));
    }

    /// Drains the cluster's events and carries them out.
    fn carry_out(&mut self, at: Instant) {
        let mut events = Vec::new();
        while let Some(event) = self.cluster.poll_event() {
            events.push(event);
        }
        if events.is_empty() && self.fed.is_none() {
            return;
        }
        let book = self.cluster.book().clone();
        self.record(at, &events, &book);
        for event in events {
            match event {
                ClusterEvent::Connect { attempt, broker } => {
                    // A discovered broker is asked to confirm its cluster and node.
                    let name = tls_name(&book, broker);
                    self.attempts.connect(attempt, book.address(broker).into(), name, self.cluster.identity(broker));
                }
                ClusterEvent::Reuse { attempt, broker } => match self.kept.take() {
                    Some(kept) if kept.broker == broker => {
                        self.attempts.reuse(attempt, book.address(broker).into(), kept.transport)
                    }
                    // Not kept here (cannot happen: every close is reported): fail the attempt
                    // rather than guess, so the refresh goes on to the next broker.
                    other => {
                        self.kept = other;
                        self.attempts.fail(attempt, book.address(broker).into(), "no kept connection to reuse");
                    }
                },
                ClusterEvent::Resolve { attempt, broker } => {
                    self.attempts.resolve(attempt, book.address(broker).into())
                }
                ClusterEvent::Cancel { attempt, .. } => self.attempts.cancel(attempt),
                ClusterEvent::Keep { attempt, broker } => {
                    if let Some((winner, transport)) = self.answered.take() {
                        if winner == attempt {
                            self.kept = Some(Kept { broker, transport });
                        }
                    }
                }
                ClusterEvent::Release { broker } => {
                    if self.kept.as_ref().is_some_and(|k| k.broker == broker) {
                        self.kept = None;
                    }
                }
                ClusterEvent::Refreshed { epoch, .. } => {
                    // Published before any caller is answered, so what a caller reads next
                    // is up to date.
                    *lock(&self.shared.stats) = self.cluster.stats();
                    let metadata = self.cluster.metadata().cloned().map(Arc::new);
                    if let Some(metadata) = &metadata {
                        *lock(&self.shared.cache) = Some((metadata.clone(), tokio::time::Instant::now()));
                    }
                    for reply in self.waiters.remove(&epoch).unwrap_or_default() {
                        let _ = reply.send(metadata.clone().ok_or(Error::Closed));
                    }
                }
                ClusterEvent::RefreshFailed { epoch, error } => {
                    *lock(&self.shared.stats) = self.cluster.stats();
                    let attempts = self.ledger(epoch).map(|l| l.reports().to_vec()).unwrap_or_default();
                    let failure = Error::Refresh { error, attempts, trace: None };
                    for reply in self.waiters.remove(&epoch).unwrap_or_default() {
                        let _ = reply.send(Err(failure.clone()));
                    }
                }
                ClusterEvent::Rebootstrapped => {}
            }
        }
        // An answer that did not win: close its connection.
        self.answered = None;
        *lock(&self.shared.stats) = self.cluster.stats();
    }

    /// Mirrors the events into the ledgers of their refreshes (reports for failed ones).
    fn record(&mut self, at: Instant, events: &[ClusterEvent], book: &BrokerBook) {
        let mut acts = Vec::new();
        for event in events {
            let act = match *event {
                ClusterEvent::Connect { attempt, broker }
                | ClusterEvent::Reuse { attempt, broker }
                | ClusterEvent::Resolve { attempt, broker } => {
                    if self.ledger(attempt.epoch()).is_none() {
                        if self.ledgers.len() == 2 {
                            self.ledgers.pop_front();
                        }
                        self.ledgers.push_back((attempt.epoch(), Ledger::new(at)));
                    }
                    match event {
                        ClusterEvent::Resolve { .. } => Act::Resolve { attempt, address: book.address(broker) },
                        _ => Act::Start { attempt, address: book.address(broker) },
                    }
                }
                ClusterEvent::Cancel { attempt, reason } => Act::Cancel { attempt, reason },
                ClusterEvent::Refreshed { attempt, .. } => Act::Won { attempt },
                ClusterEvent::Keep { .. }
                | ClusterEvent::Release { .. }
                | ClusterEvent::RefreshFailed { .. }
                | ClusterEvent::Rebootstrapped => continue,
            };
            acts.push(act);
        }
        let mut ignore = |_: &crate::report::Event| {};
        if let Some((attempt, reported, outcome)) = self.fed.take() {
            if let Some(ledger) = self.ledger(attempt.epoch()) {
                ledger.settle_input(at, attempt, reported, outcome, &mut ignore);
            }
        }
        for act in acts {
            if let Some(ledger) = self.ledger(act.attempt().epoch()) {
                ledger.apply(at, act, &mut ignore);
            }
        }
    }

    fn ledger(&mut self, epoch: u32) -> Option<&mut Ledger> {
        self.ledgers.iter_mut().find(|(e, _)| *e == epoch).map(|(_, l)| l)
    }
}

/// Completes when the kept connection (if any) is closed by the broker or misbehaves;
/// pending forever otherwise. Cancel-safe: a read future holds no data when dropped.
async fn watch(kept: &mut Option<Kept>) -> (BrokerIndex, bool) {
    match kept {
        Some(kept) => {
            let mut byte = [0u8; 1];
            let reset = kept.transport.read(&mut byte).await.is_err();
            (kept.broker, reset)
        }
        None => pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn a_client_can_be_shared_across_tasks() {
        assert_send_sync::<Client>();
    }

    #[test]
    fn new_outside_a_runtime_is_an_error_not_a_panic() {
        let error = Client::new(ClusterConfig::default(), &["127.0.0.1:9092"], ClientOptions::default()).unwrap_err();
        assert!(matches!(error, Error::Config(ref e) if e.field == "runtime"), "{error}");
    }
}
