//! A long-lived client: cached metadata, single-flight refresh, periodic refresh, and the
//! winning connection kept for the next refresh — on a background thread of its own.
//!
//! The session makes every decision (when to refresh, which broker first, whether callers
//! share a refresh, which connection to keep). One thread owns its [`Host`] and runs the
//! poll loop; [`Client`] handles send it requests over a channel and wake its poll. Closing
//! or dropping the client stops that thread, and returns once every socket is closed.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use mio::Waker;
use stagger::report::AttemptReport;
use stagger::session::{Callers, ClientRequest, Published, SessionConfig};
use stagger::{ClientStats, ClusterConfig, Metadata, RefreshCause};

use crate::host::{Host, Io};
use crate::Error;

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
    /// As [`crate::RefreshOptions::resolve_names`]: every address of a seed's name is a
    /// candidate of its own. Off by default.
    pub resolve_names: bool,
}

/// Long-lived cluster metadata for an application. See the module documentation.
///
/// Every method takes `&self`, and the client is `Send + Sync`: share it behind an `Arc`.
#[derive(Debug)]
pub struct Client {
    requests: Sender<Request>,
    waker: Arc<Waker>,
    shared: Arc<Published<std::time::Instant>>,
    max_age: Duration,
    thread: Option<JoinHandle<()>>,
}

type Reply = Sender<Result<Arc<Metadata>, Error>>;

type Request = ClientRequest<Reply>;

impl Client {
    /// Starts a client over `seeds` (`host:port`) and its background thread; no broker is
    /// contacted until the first [`Client::metadata`] or [`Client::refresh`], or the first
    /// periodic refresh.
    pub fn new(config: ClusterConfig, seeds: &[impl AsRef<str>], options: ClientOptions) -> Result<Client, Error> {
        let io = Io {
            #[cfg(feature = "tls")]
            tls: options.tls,
            tokens: options.oauth_token,
            resolve_names: options.resolve_names,
        };
        let max_age = config.refresh_interval;
        let host = Host::start(
            seeds,
            SessionConfig { cluster: config, exchange: options.exchange, ..Default::default() },
            io,
        )?;
        let waker = host.waker();
        let shared = Arc::new(Published::default());
        let background = Background { host, callers: Callers::default(), shared: shared.clone() };
        let (requests, inbox) = mpsc::channel();
        let thread = std::thread::Builder::new().name("stagger-client".into()).spawn(move || background.run(inbox))?;
        Ok(Client { requests, waker, shared, max_age, thread: Some(thread) })
    }

    /// The cluster metadata: the cached copy while it is younger than the refresh interval
    /// (Kafka's `metadata.max.age.ms`), otherwise a fresh one (blocking until it comes).
    pub fn metadata(&self) -> Result<Arc<Metadata>, Error> {
        match self.shared.fresh(|at| at.elapsed() < self.max_age) {
            Some(metadata) => Ok(metadata),
            None => self.refresh(),
        }
    }

    /// The cached metadata, however old, without contacting anyone.
    pub fn cached(&self) -> Option<Arc<Metadata>> {
        self.shared.cached()
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
        self.send(ClientRequest::Refresh(reply, cause, broker.map(str::to_owned)))?;
        answer.recv().unwrap_or(Err(Error::Closed))
    }

    /// What the client has done so far.
    pub fn stats(&self) -> ClientStats {
        self.shared.stats()
    }

    /// Every attempt of the refresh that finished last, in start order, with what became of
    /// it (empty before the first): why a refresh took as long as it did, or opened the
    /// connections it did.
    pub fn last_refresh(&self) -> Vec<AttemptReport> {
        self.shared.last_refresh()
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
        let _ = self.send(ClientRequest::Close);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The background thread: the session's host, and the callers waiting for a refresh.
struct Background {
    host: Host,
    callers: Callers<Reply>,
    shared: Arc<Published<std::time::Instant>>,
}

impl Background {
    fn run(mut self, inbox: Receiver<Request>) {
        loop {
            self.host.settle();
            // Stats and cache are published before callers are answered, so what a caller
            // reads next is up to date.
            self.shared.stats_of(&self.host.session);
            while let Some(done) = self.host.take_done() {
                let Some((answer, replies)) = self.callers.answer(&self.host.session, &done) else { continue };
                self.shared.refreshed(&self.host.session, &answer, std::time::Instant::now());
                for reply in replies {
                    let _ = reply.send(answer.clone());
                }
            }
            if let Err(e) = self.host.wait() {
                // The poll itself failed: nothing more can be done; tell every caller why.
                let error = Error::from(e);
                for reply in self.callers.drain() {
                    let _ = reply.send(Err(error.clone()));
                }
                return;
            }
            loop {
                match inbox.try_recv() {
                    Ok(ClientRequest::Refresh(reply, cause, broker)) => {
                        let (session, now) = (&mut self.host.session, self.host.clock.now());
                        if let Err((reply, error)) = self.callers.request(session, now, cause, broker.as_deref(), reply)
                        {
                            let _ = reply.send(Err(error));
                        }
                    }
                    // Dropping the host closes every socket.
                    Ok(ClientRequest::Close) | Err(mpsc::TryRecvError::Disconnected) => return,
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
        }
    }
}
