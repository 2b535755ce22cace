//! A long-lived client: cached metadata, single-flight refresh, periodic refresh in the
//! background, and the winning connection kept for the next refresh.
//!
//! The session makes every decision (when to refresh, which broker first — connected ones
//! are preferred —, whether concurrent requests share a refresh, which connection to keep,
//! checking a discovered broker's identity, rebootstrapping). A spawned task owns its
//! [`Host`]; [`Client`] handles talk to it over a channel. Closing or dropping the client
//! stops that task, which closes every socket.

use std::sync::Arc;
use std::time::Duration;

use stagger::report::AttemptReport;
use stagger::session::{Callers, ClientRequest, Published, SessionConfig};
use stagger::{ClientStats, ClusterConfig, ConfigError, Metadata, RefreshCause};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::host::{Host, Io};
use crate::options::{TlsOptions, TokenSource};
use crate::resolver::Lookup;
use crate::tls::Connector;
use crate::Error;

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
    shared: Arc<Published<tokio::time::Instant>>,
    max_age: Duration,
    task: Option<JoinHandle<()>>,
}

type Reply = oneshot::Sender<Result<Arc<Metadata>, Error>>;

type Request = ClientRequest<Reply>;

impl Client {
    /// Starts a client over `seeds` (`host:port`); no broker is contacted until the first
    /// [`Client::metadata`] or [`Client::refresh`], or the first periodic refresh.
    ///
    /// Must be called inside a tokio runtime: it spawns the background task there.
    pub fn new(config: ClusterConfig, seeds: &[impl AsRef<str>], options: ClientOptions) -> Result<Client, Error> {
        let needs = || ConfigError::new("runtime", "Client::new needs a tokio runtime");
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| needs())?;
        let io = Io {
            tls: options.tls.as_ref().map(Connector::new).transpose()?,
            tokens: options.oauth_token,
            lookup: Lookup::new(&options.resolver)?,
        };
        let session = SessionConfig { cluster: config, exchange: options.exchange, ..SessionConfig::default() };
        let host = Host::start(seeds, session, io)?;
        let shared = Arc::new(Published::default());
        let (requests, inbox) = mpsc::unbounded_channel();
        let background = Background { host, callers: Callers::default(), shared: shared.clone() };
        let task = runtime.spawn(background.run(inbox));
        Ok(Client { requests, shared, max_age: config.refresh_interval, task: Some(task) })
    }

    /// The cluster metadata: the cached copy while it is younger than the refresh
    /// interval (Kafka's `metadata.max.age.ms`), otherwise a fresh one.
    pub async fn metadata(&self) -> Result<Arc<Metadata>, Error> {
        match self.shared.fresh(|at| at.elapsed() < self.max_age) {
            Some(metadata) => Ok(metadata),
            None => self.refresh().await,
        }
    }

    /// The cached metadata, however old, without contacting anyone.
    pub fn cached(&self) -> Option<Arc<Metadata>> {
        self.shared.cached()
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
        let request = ClientRequest::Refresh(reply, cause, broker.map(str::to_owned));
        self.requests.send(request).map_err(|_| Error::Closed)?;
        answer.await.unwrap_or(Err(Error::Closed))
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

    /// Stops the background task and waits until every connection is closed.
    ///
    /// Dropping the client also stops it, but without waiting.
    pub async fn close(mut self) {
        let _ = self.requests.send(ClientRequest::Close);
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

/// The task that owns the host, and the callers waiting on its refreshes.
struct Background {
    host: Host,
    callers: Callers<Reply>,
    shared: Arc<Published<tokio::time::Instant>>,
}

impl Background {
    async fn run(mut self, mut inbox: mpsc::UnboundedReceiver<Request>) {
        loop {
            // Stats and cache are published before callers are answered, so what a caller
            // reads next is up to date.
            self.shared.stats_of(&self.host.session);
            while let Some(done) = self.host.take_done() {
                let Some((answer, replies)) = self.callers.answer(&self.host.session, &done) else { continue };
                self.shared.refreshed(&self.host.session, &answer, tokio::time::Instant::now());
                for reply in replies {
                    let _ = reply.send(answer.clone());
                }
            }
            // Dropping the host (on return) closes every socket.
            match self.host.wait(inbox.recv()).await {
                None => {}
                Some(Some(ClientRequest::Refresh(reply, cause, broker))) => {
                    let (session, now) = (&mut self.host.session, self.host.clock.now());
                    if let Err((reply, error)) = self.callers.request(session, now, cause, broker.as_deref(), reply) {
                        let _ = reply.send(Err(error));
                    }
                    self.host.carry_out();
                }
                Some(Some(ClientRequest::Close) | None) => return,
            }
        }
    }
}
