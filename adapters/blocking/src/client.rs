//! A long-lived client: cached metadata, single-flight refresh, periodic refresh, and the
//! winning connection kept for the next refresh — on a background thread of its own.
//!
//! The core's [`Cluster`] makes every decision (when to refresh, which broker first —
//! connected ones are preferred —, whether concurrent requests share a refresh). One thread
//! owns the `Cluster`, the attempts and the kept connection and runs the poll loop; [`Client`]
//! handles send it requests over a channel and wake its poll. Closing or dropping the client
//! stops that thread, and returns once every socket is closed.
//!
//! Every fresh connection to a discovered broker carries the cluster and node id the core
//! expects of it ([`Cluster::identity`]), so a broker that is no longer that node of that
//! cluster is noticed and the core rebootstraps; a kept connection is not checked again.

use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use mio::Waker;
use stagger::kafka::validate;
use stagger::{
    AttemptId, BrokerBook, BrokerIndex, ClientStats, Cluster, ClusterConfig, ClusterEvent, ConfigError, Input, Instant,
    Metadata, RefreshCause,
};

use crate::attempt::{tls_name, Context};
use crate::attempts::Attempts;
use crate::clock::Clock;
use crate::error::Error;
use crate::report::Reports;

/// Connection settings of a [`Client`] (the policy lives in its [`ClusterConfig`]).
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// What each attempt asks the broker (client id, topics, maximum frame size).
    pub exchange: stagger::kafka::ExchangeConfig,
    /// TLS to the brokers; `None` for plaintext.
    #[cfg(feature = "tls")]
    pub tls: Option<crate::options::Tls>,
    /// Where `OAUTHBEARER` tokens come from: asked as each attempt opens, so a token that
    /// expired between refreshes is replaced (a failure fails that attempt as fatal).
    pub oauth_token: Option<stagger::kafka::sasl::TokenSource>,
    /// Resolve seeds given by name through the core (`BrokerBook::resolving`), so every
    /// address of a name is a candidate the fan-out staggers over, instead of one attempt
    /// that tries the addresses one after another. Lookups use `std`'s resolver
    /// (`getaddrinfo`) on a helper thread: its server and timeouts are the system's, and a
    /// lookup that hangs is bounded by the core's attempt timeout. Off by default.
    pub resolve_names: bool,
}

/// Long-lived cluster metadata for an application. See the module documentation.
///
/// Every method takes `&self`, and the client is `Send + Sync`: share it behind an `Arc`.
#[derive(Debug)]
pub struct Client {
    requests: Sender<Request>,
    waker: Arc<Waker>,
    shared: Arc<Shared>,
    max_age: Duration,
    thread: Option<JoinHandle<()>>,
}

type Reply = Sender<Result<Arc<Metadata>, Error>>;

#[derive(Debug)]
enum Request {
    /// Fresh metadata, why, and the `host:port` of the broker the trouble came from.
    Refresh(Reply, RefreshCause, Option<String>),
    Close,
}

#[derive(Debug, Default)]
struct Shared {
    cache: Mutex<Option<(Arc<Metadata>, std::time::Instant)>>,
    stats: Mutex<ClientStats>,
}

impl Client {
    /// Starts a client over `seeds` (`host:port`) and its background thread; no broker is
    /// contacted until the first [`Client::metadata`] or [`Client::refresh`], or the first
    /// periodic refresh.
    pub fn new(config: ClusterConfig, seeds: &[impl AsRef<str>], options: ClientOptions) -> Result<Client, Error> {
        let seeds = seeds.iter().map(|s| s.as_ref());
        let book = if options.resolve_names { BrokerBook::resolving(seeds)? } else { BrokerBook::new(seeds)? };
        validate::seeds(&book)?;
        validate::exchange(&options.exchange)?;
        let ctx = Context {
            exchange: options.exchange,
            #[cfg(feature = "tls")]
            tls: options.tls,
            oauth_token: options.oauth_token,
        };
        let clock = Clock::start();
        let cluster = Cluster::new(config, book, clock.now())?;
        let attempts = Attempts::new(ctx)?;
        let waker = attempts.waker();
        let shared = Arc::new(Shared::default());
        let (requests, inbox) = mpsc::channel();
        let background = Background {
            cluster,
            clock,
            attempts,
            kept: None,
            waiters: HashMap::new(),
            answered: None,
            shared: shared.clone(),
        };
        let thread = std::thread::Builder::new().name("stagger-client".into()).spawn(move || background.run(inbox))?;
        Ok(Client { requests, waker, shared, max_age: config.refresh_interval, thread: Some(thread) })
    }

    /// The cluster metadata: the cached copy while it is younger than the refresh interval
    /// (Kafka's `metadata.max.age.ms`), otherwise a fresh one (blocking until it comes).
    pub fn metadata(&self) -> Result<Arc<Metadata>, Error> {
        let cached = lock(&self.shared.cache).clone();
        match cached {
            Some((metadata, at)) if at.elapsed() < self.max_age => Ok(metadata),
            _ => self.refresh(),
        }
    }

    /// The cached metadata, however old, without contacting anyone.
    pub fn cached(&self) -> Option<Arc<Metadata>> {
        lock(&self.shared.cache).as_ref().map(|(m, _)| m.clone())
    }

    /// Fresh metadata now, blocking until it comes. Concurrent callers (on other threads)
    /// share one refresh: the core coalesces them.
    pub fn refresh(&self) -> Result<Arc<Metadata>, Error> {
        self.refresh_because(RefreshCause::Requested, None)
    }

    /// Fresh metadata now, saying why, so the policy can read it ([`RefreshCause`]): after a
    /// refused or reset connection or NOT_LEADER-style errors (a failover, seen by every
    /// client at once) the refresh is gentle; `broker`, the `host:port` the trouble came
    /// from when known (a request that timed out there, say), is tried last. Shares a
    /// running refresh as [`Client::refresh`] does.
    pub fn refresh_because(&self, cause: RefreshCause, broker: Option<&str>) -> Result<Arc<Metadata>, Error> {
        let (reply, answer) = mpsc::channel();
        self.send(Request::Refresh(reply, cause, broker.map(str::to_owned)))?;
        answer.recv().unwrap_or(Err(Error::Closed))
    }

    /// What the client has done so far.
    pub fn stats(&self) -> ClientStats {
        lock(&self.shared.stats).clone()
    }

    /// Stops the background thread and returns once every connection is closed (dropping
    /// the client does the same).
    pub fn close(self) {}

    fn send(&self, request: Request) -> Result<(), Error> {
        self.requests.send(request).map_err(|_| Error::Closed)?;
        self.waker.wake().map_err(Error::from)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.send(Request::Close);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Detail of an attempt told to reuse a connection this adapter does not hold.
const NOT_KEPT: &str = "no kept connection to reuse";

/// The background thread's state.
struct Background {
    cluster: Cluster,
    clock: Clock,
    attempts: Attempts,
    /// The broker whose connection `attempts` keeps.
    kept: Option<BrokerIndex>,
    /// Callers waiting, by refresh epoch.
    waiters: HashMap<u32, Vec<Reply>>,
    /// The attempt whose metadata answer was fed last, until the core says whether it won.
    answered: Option<AttemptId>,
    shared: Arc<Shared>,
}

impl Background {
    fn run(mut self, inbox: Receiver<Request>) {
        loop {
            self.carry_out();
            if let Err(e) = self.attempts.wait(self.clock.deadline(self.cluster.poll_timeout())) {
                // The poll itself failed: nothing more can be done; tell every waiter why.
                let error = Error::from(e);
                for reply in self.waiters.drain().flat_map(|(_, replies)| replies) {
                    let _ = reply.send(Err(error.clone()));
                }
                return;
            }
            let now = self.clock.now();
            if self.attempts.take_woken() {
                loop {
                    match inbox.try_recv() {
                        Ok(Request::Refresh(reply, cause, broker)) => self.request(now, reply, cause, broker),
                        Ok(Request::Close) | Err(mpsc::TryRecvError::Disconnected) => return,
                        Err(mpsc::TryRecvError::Empty) => break,
                    }
                }
            }
            if self.attempts.kept_stirred() {
                // The broker closed (or wrote to) an idle kept connection: forget it. A reset
                // is a lost connection the next plain refresh says it follows; a clean close
                // is what brokers do to idle connections.
                let reset = self.attempts.unkeep().is_some_and(|mut t| {
                    t.read(&mut [0u8; 1]).is_err_and(|e| {
                        !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted)
                    })
                });
                match (self.kept.take(), reset) {
                    (Some(broker), true) => self.cluster.connection_lost(broker),
                    (Some(broker), false) => self.cluster.connection_closed(broker),
                    (None, _) => {}
                }
            }
            match self.attempts.poll_input() {
                Some(input) => {
                    if let Input::Response { attempt, .. } = input {
                        self.answered = Some(attempt);
                    }
                    self.cluster.handle_input(now, input);
                }
                None => self.cluster.handle_timeout(now),
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

    /// Drains the cluster's events and carries them out.
    fn carry_out(&mut self) {
        let book = self.cluster.book().clone();
        while let Some(event) = self.cluster.poll_event() {
            match event {
                ClusterEvent::Connect { attempt, broker } => {
                    let name = tls_name(&book, broker);
                    self.attempts.connect(attempt, book.address(broker).into(), name, self.cluster.identity(broker))
                }
                ClusterEvent::Reuse { attempt, broker } => {
                    let kept =
                        if self.kept == Some(broker) { self.kept.take().and(self.attempts.unkeep()) } else { None };
                    match kept {
                        // The broker process that already answered on this connection.
                        Some(transport) => self.attempts.reuse(attempt, book.address(broker).into(), transport),
                        // Not kept here (cannot happen: every close is reported): fail the
                        // attempt rather than guess, so the refresh goes on to the next broker.
                        None => self.attempts.fail(attempt, NOT_KEPT),
                    }
                }
                ClusterEvent::Resolve { attempt, broker } => {
                    self.attempts.resolve(attempt, book.address(broker).into())
                }
                ClusterEvent::Cancel { attempt, .. } => self.attempts.cancel(attempt),
                ClusterEvent::Keep { attempt, broker } => {
                    if let Some((transport, _)) = self.attempts.take_answer(attempt) {
                        self.attempts.keep(transport);
                        self.kept = Some(broker);
                    }
                }
                ClusterEvent::Release { broker } => {
                    if self.kept == Some(broker) {
                        self.kept = None;
                        self.attempts.unkeep();
                    }
                }
                ClusterEvent::Refreshed { epoch, .. } => {
                    // Published before any caller is answered, so what a caller reads next
                    // is up to date.
                    self.publish();
                    let metadata = self.cluster.metadata().cloned().map(Arc::new);
                    if let Some(metadata) = &metadata {
                        *lock(&self.shared.cache) = Some((metadata.clone(), std::time::Instant::now()));
                    }
                    for reply in self.waiters.remove(&epoch).unwrap_or_default() {
                        let _ = reply.send(metadata.clone().ok_or(Error::Closed));
                    }
                }
                ClusterEvent::RefreshFailed { epoch, error } => {
                    self.publish();
                    let attempts = match self.cluster.last_refresh() {
                        Some(done) if done.epoch() == epoch => Reports::of_finished(done, &book, &error),
                        _ => Vec::new(),
                    };
                    let failure = Error::Refresh { error, attempts };
                    for reply in self.waiters.remove(&epoch).unwrap_or_default() {
                        let _ = reply.send(Err(failure.clone()));
                    }
                }
                ClusterEvent::Rebootstrapped => {}
            }
        }
        // An answer that did not win: close its connection.
        if let Some(attempt) = self.answered.take() {
            self.attempts.drop_answer(attempt);
        }
        self.publish();
    }

    /// Copies the core's counters into the shared stats.
    fn publish(&self) {
        *lock(&self.shared.stats) = self.cluster.stats();
    }
}
