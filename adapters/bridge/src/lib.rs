//! `stagger-bridge`: a WebSocket↔TCP bridge, so a browser can speak Kafka's wire protocol —
//! and not an open tunnel into the network behind it.
//!
//! Browsers cannot open TCP sockets. The browser adapter (`stagger-web`) therefore runs each
//! attempt over a WebSocket whose binary messages carry the raw bytes of the Kafka
//! connection, and something next to the brokers turns that back into TCP. That something
//! is usually websockify; this crate is a small, embeddable equivalent on tokio and
//! tokio-tungstenite, used by the browser tests' fixture and by anyone who wants one process.
//!
//! # Who may connect, and what goes through
//!
//! A WebSocket server on `127.0.0.1` can be reached by *every web page the user opens*: a
//! browser lets any page open a WebSocket anywhere, and only tells the server the page's
//! origin. A bridge that forwarded whatever came would hand every such page a raw TCP
//! connection to the broker (to produce, delete topics, read data). So, by default:
//!
//! * **Origins are checked** ([`OriginPolicy`]). An upgrade whose `Origin` header is not in the
//!   allow-list is answered `403 Forbidden` with the reason in the body, before the target is
//!   contacted. The default allow-list is empty: the bridge serves no page itself, so no page
//!   is same-origin, and each page origin that may connect must be listed. A request without
//!   `Origin` (browsers always send one, so this is a non-browser client: websockify-style
//!   tools, tests, programs that could as well open TCP to the broker) is let through, unless
//!   [`OriginPolicy::require_origin`]; a [`Token`] is what keeps those out.
//! * **A token can be required** ([`BridgeOptions::token`]): `ws://host:port/?token=…`,
//!   compared in constant time; missing or wrong is `401 Unauthorized`. The token is never in
//!   a refusal, an event or `Debug` output.
//! * **Only a metadata refresh's requests are forwarded** ([`ApiPolicy`]): the bridge parses
//!   the client's bytes as Kafka request frames (4-byte big-endian size, then `api_key` and
//!   `api_version`), buffering across WebSocket messages however they split or combine the
//!   frames, and forwards ApiVersions (18), SaslHandshake (17), SaslAuthenticate (36) and
//!   Metadata (3). Any other request closes the connection (WebSocket close 1008, and a
//!   [`BridgeEvent::RequestRefused`] naming it, e.g. `Produce (0)`) before one byte of it
//!   reaches the target; so does a frame over [`BridgeOptions::max_frame_size`] (close 1009)
//!   or one too small to hold a request header. Metadata itself can write — a broker with
//!   `auto.create.topics.enable` creates the topics a request names when it allows it — so
//!   Metadata requests are read whole, decoded, and refused when they may create topics
//!   (`allow_auto_topic_creation`; before v4, which lacks the field, naming topics at all).
//!   [`ApiPolicy::All`] forwards every byte, unparsed. (SASL's pre-1.0 raw token frames, which follow SaslHandshake v0, are not
//!   requests and are refused; the core always uses SaslHandshake v1 and SaslAuthenticate.)
//! * **Listening on loopback** is the caller's choice of address; the `stagger bridge`
//!   command listens on `127.0.0.1:9100` unless told another address, and warns when that
//!   address is reachable from other machines.
//!
//! Every refusal is reported to [`BridgeOptions::events`] (the `stagger` command prints them
//! on stderr) and counted in [`Stats`].
//!
//! # Behaviour, as seen from the browser (compatible with websockify's binary mode)
//!
//! * Each WebSocket connection gets its own TCP connection to the one `target` (`host:port`);
//!   binary messages are written to it as bytes, and bytes read from it are sent back as
//!   binary messages (message boundaries carry no meaning; the Kafka framing is end to end).
//! * No subprotocol is required. If the client offers `binary` (websockify's name for this
//!   mode), the bridge selects it; other subprotocols (such as websockify's old `base64`) are
//!   not selected, which makes a browser fail the handshake — better than a silent mismatch.
//! * A text message is refused: the bridge closes with 1003 (unsupported data) and drops the
//!   TCP connection.
//! * When either side closes, the other is closed: a WebSocket close (or error) drops the TCP
//!   connection, a TCP EOF (or error) sends a WebSocket close (1000) and drops the socket.
//! * **Refused targets fail the handshake.** Unlike websockify, which accepts the WebSocket
//!   first and connects afterwards (so the browser sees `open` then `close`), this bridge
//!   reads and checks the upgrade request, then connects to the target *before* answering
//!   it, and answers `502 Bad Gateway` if that fails. The browser then sees `error`/`close`
//!   without `open` — exactly what a refused TCP connection looks like to a native client —
//!   and the browser adapter reports `Refused` instead of `Closed`. A target that accepts TCP
//!   but never answers (a hung broker) opens normally, and the refresh core's timers deal
//!   with it. A refused origin or token never causes a connection to the target.
//! * [`Bridge::shutdown_handle`] stops accepting and closes every open connection with 1001
//!   (going away) before [`Bridge::run`] returns.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use stagger_bridge::{Bridge, BridgeOptions, OriginPolicy, Token};
//! let options = BridgeOptions {
//!     // The page that will connect is served from http://127.0.0.1:8080.
//!     origins: OriginPolicy::new().allow("http://127.0.0.1:8080").map_err(std::io::Error::other)?,
//!     token: Some(Token::generate()?),
//!     ..BridgeOptions::default()
//! };
//! let bridge = Bridge::bind_with("127.0.0.1:0".parse().unwrap(), "127.0.0.1:9092", options).await?;
//! println!("browsers connect to {}", bridge.url_with_token());
//! let running = bridge.spawn();
//! // ...
//! running.shutdown().await?;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod filter;
mod policy;
mod upgrade;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_tungstenite::tungstenite::handshake::server::{Callback, ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{header, HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

pub use filter::{api_name, ApiPolicy, Violation, METADATA_REFRESH_APIS};
pub use policy::{OriginPolicy, Refusal, Token};

use filter::RequestFilter;
use policy::Admission;
use upgrade::Rewind;

/// The subprotocol websockify calls its binary mode; selected when a client offers it.
pub const BINARY_SUBPROTOCOL: &str = "binary";

/// The default [`BridgeOptions::max_frame_size`]: 1 MiB, far above any request a metadata
/// refresh sends (an OAUTHBEARER token, a Metadata request naming thousands of topics).
pub const DEFAULT_MAX_FRAME_SIZE: usize = 1 << 20;

/// Tunables of a [`Bridge`]; the defaults suit a Kafka bridge on a LAN or loopback, and are
/// the safe ones: no web page allowed, metadata requests only.
#[derive(Clone, Debug)]
pub struct BridgeOptions {
    /// How long to wait for the target's TCP handshake before failing the upgrade with 502
    /// (default 10 s, a typical client connect timeout; the refresh core's attempt timeout
    /// usually ends a hopeless attempt sooner).
    pub connect_timeout: Duration,
    /// How long a client may take to send its upgrade request, and then to complete the
    /// upgrade (default 10 s each), so idle TCP connections cannot hold a slot forever.
    pub handshake_timeout: Duration,
    /// How long to wait for the client's close reply after the bridge closed (default 1 s).
    pub close_grace: Duration,
    /// Largest single read from the target, i.e. the largest binary message the bridge sends
    /// (default 64 KiB; Kafka frames larger than that simply span several messages).
    pub read_buffer: usize,
    /// Which web pages may connect (default: none; clients without `Origin` may).
    pub origins: OriginPolicy,
    /// A token every client must give in the URL's query (`?token=…`); default none.
    pub token: Option<Token>,
    /// Which Kafka requests are forwarded (default: a metadata refresh's only).
    pub apis: ApiPolicy,
    /// Largest Kafka request frame (its size prefix) forwarded under
    /// [`ApiPolicy::MetadataRefresh`] (default [`DEFAULT_MAX_FRAME_SIZE`]).
    pub max_frame_size: usize,
    /// Called with every refusal (default: nobody).
    pub events: Option<EventSink>,
}

impl Default for BridgeOptions {
    fn default() -> Self {
        BridgeOptions {
            connect_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            close_grace: Duration::from_secs(1),
            read_buffer: 64 * 1024,
            origins: OriginPolicy::default(),
            token: None,
            apis: ApiPolicy::default(),
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            events: None,
        }
    }
}

/// Something the bridge refused, as [`BridgeOptions::events`] hears it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BridgeEvent {
    /// An upgrade request refused (origin or token) before the target was contacted.
    UpgradeRefused {
        /// The client.
        peer: SocketAddr,
        /// Why; [`Refusal::status`] is the HTTP status it was answered with.
        refusal: Refusal,
    },
    /// A connection closed over a request the bridge does not forward.
    RequestRefused {
        /// The client.
        peer: SocketAddr,
        /// What it sent.
        violation: Violation,
    },
}

impl fmt::Display for BridgeEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BridgeEvent::UpgradeRefused { peer, refusal } => {
                write!(f, "refused {peer} (HTTP {}): {refusal}", refusal.status())
            }
            BridgeEvent::RequestRefused { peer, violation } => write!(f, "closed {peer}: {violation}"),
        }
    }
}

/// Where a bridge reports its [`BridgeEvent`]s: a function called on the connection's task
/// (keep it quick; it must not block).
#[derive(Clone)]
pub struct EventSink(Arc<dyn Fn(&BridgeEvent) + Send + Sync>);

impl EventSink {
    /// A sink calling `f` with each event.
    pub fn new(f: impl Fn(&BridgeEvent) + Send + Sync + 'static) -> Self {
        EventSink(Arc::new(f))
    }
}

impl fmt::Debug for EventSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EventSink")
    }
}

/// Counters of one bridge, shared with its connections; cheap to clone and to read.
#[derive(Clone, Debug, Default)]
pub struct StatsHandle(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    open: AtomicU64,
    upgraded: AtomicU64,
    target_failures: AtomicU64,
    text_rejected: AtomicU64,
    origin_refused: AtomicU64,
    token_refused: AtomicU64,
    requests_refused: AtomicU64,
}

/// A snapshot of a bridge's counters. Non-exhaustive: a new counter is not a breaking change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// TCP connections accepted from clients so far.
    pub accepted: u64,
    /// Client connections being served right now (accepted and not yet fully closed): what a
    /// test checks to prove that a browser really closed its sockets.
    pub open: u64,
    /// Connections that completed the WebSocket upgrade.
    pub upgraded: u64,
    /// Connections whose target refused (or did not answer) the TCP connect: upgrade failed.
    pub target_failures: u64,
    /// Connections closed because the client sent a text message.
    pub text_rejected: u64,
    /// Upgrades refused over their `Origin` (403).
    pub origin_refused: u64,
    /// Upgrades refused over a missing or wrong token (401).
    pub token_refused: u64,
    /// Connections closed over a request not forwarded (API, size, not Kafka).
    pub requests_refused: u64,
}

impl StatsHandle {
    /// The counters right now.
    pub fn snapshot(&self) -> Stats {
        let c = &self.0;
        let load = |counter: &AtomicU64| counter.load(Ordering::SeqCst);
        Stats {
            accepted: load(&c.accepted),
            open: load(&c.open),
            upgraded: load(&c.upgraded),
            target_failures: load(&c.target_failures),
            text_rejected: load(&c.text_rejected),
            origin_refused: load(&c.origin_refused),
            token_refused: load(&c.token_refused),
            requests_refused: load(&c.requests_refused),
        }
    }

    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

/// Decrements `open` when a connection's task ends, however it ends (even when aborted).
struct OpenGuard(StatsHandle);

impl OpenGuard {
    fn new(stats: &StatsHandle) -> Self {
        StatsHandle::bump(&stats.0.open);
        OpenGuard(stats.clone())
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0 .0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Asks a bridge to stop: no new connections, open ones closed with 1001 (going away).
#[derive(Clone, Debug)]
pub struct ShutdownHandle(Arc<watch::Sender<bool>>);

impl ShutdownHandle {
    /// Starts the graceful shutdown; [`Bridge::run`] returns once every connection closed
    /// (or after a bounded grace period). Calling it again does nothing.
    pub fn shutdown(&self) {
        self.0.send_replace(true);
    }
}

/// A bound, not yet running bridge from one listening address to one TCP target.
#[derive(Debug)]
pub struct Bridge {
    listener: TcpListener,
    local_addr: SocketAddr,
    target: Arc<str>,
    options: BridgeOptions,
    stats: StatsHandle,
    shutdown: ShutdownHandle,
}

impl Bridge {
    /// Binds `listen` (port 0 picks a free port) for a bridge to `target` (`host:port`,
    /// resolved at each connection) with the default [`BridgeOptions`]: no web page may
    /// connect (only clients that send no `Origin`), metadata requests only.
    pub async fn bind(listen: SocketAddr, target: impl Into<String>) -> io::Result<Bridge> {
        Bridge::bind_with(listen, target, BridgeOptions::default()).await
    }

    /// As [`Bridge::bind`], with explicit options.
    pub async fn bind_with(
        listen: SocketAddr,
        target: impl Into<String>,
        options: BridgeOptions,
    ) -> io::Result<Bridge> {
        let target = target.into();
        if !target.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok()) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("target {target:?} is not host:port")));
        }
        if options.max_frame_size < 8 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("max_frame_size {} cannot hold a Kafka request header (8 bytes)", options.max_frame_size),
            ));
        }
        let listener = TcpListener::bind(listen).await?;
        let local_addr = listener.local_addr()?;
        let (tx, _) = watch::channel(false);
        Ok(Bridge {
            listener,
            local_addr,
            target: target.into(),
            options,
            stats: StatsHandle::default(),
            shutdown: ShutdownHandle(Arc::new(tx)),
        })
    }

    /// The address browsers connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `ws://` URL of [`Bridge::local_addr`], as the browser adapter's `bootstrap` wants it
    /// (without the token: see [`Bridge::url_with_token`]).
    pub fn url(&self) -> String {
        format!("ws://{}", self.local_addr)
    }

    /// [`Bridge::url`] with the token in its query when the bridge requires one: the URL a
    /// client must open. It holds the secret: show it to the user, never log it.
    pub fn url_with_token(&self) -> String {
        match &self.options.token {
            Some(token) => token.add_to(&self.url()),
            None => self.url(),
        }
    }

    /// The `host:port` every connection is bridged to.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The options the bridge runs with.
    pub fn options(&self) -> &BridgeOptions {
        &self.options
    }

    /// The bridge's live counters.
    pub fn stats(&self) -> StatsHandle {
        self.stats.clone()
    }

    /// A handle that stops the bridge gracefully from anywhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Serves until [`ShutdownHandle::shutdown`], then closes every connection (1001) and
    /// returns. Connections still not closed after twice the close grace are dropped.
    pub async fn run(self) -> io::Result<()> {
        let Bridge { listener, target, options, stats, shutdown, .. } = self;
        let admission = Arc::new(Admission { origins: options.origins.clone(), token: options.token.clone() });
        let mut stop = shutdown.0.subscribe();
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                biased;
                () = stopped(&mut stop) => break,
                accepted = listener.accept() => match accepted {
                    Ok((client, peer)) => {
                        StatsHandle::bump(&stats.0.accepted);
                        let guard = OpenGuard::new(&stats);
                        let conn = Connection {
                            target: target.clone(),
                            options: options.clone(),
                            admission: admission.clone(),
                            stats: stats.clone(),
                            stop: shutdown.0.subscribe(),
                            peer,
                        };
                        connections.spawn(async move {
                            let _guard = guard;
                            conn.serve(client).await;
                        });
                    }
                    // Out of file descriptors and the like: back off instead of spinning.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop(listener);
        let drained = async { while connections.join_next().await.is_some() {} };
        if tokio::time::timeout(options.close_grace * 2, drained).await.is_err() {
            connections.shutdown().await;
        }
        Ok(())
    }

    /// Runs the bridge on the current tokio runtime.
    pub fn spawn(self) -> RunningBridge {
        let local_addr = self.local_addr;
        let stats = self.stats();
        let shutdown = self.shutdown_handle();
        let url_with_token = self.url_with_token();
        let task = tokio::spawn(self.run());
        RunningBridge { local_addr, url_with_token, stats, shutdown, task: Some(task) }
    }
}

/// A bridge running in a tokio task; dropping it starts a graceful shutdown.
pub struct RunningBridge {
    local_addr: SocketAddr,
    /// Holds the token, if any: kept out of `Debug`.
    url_with_token: String,
    stats: StatsHandle,
    shutdown: ShutdownHandle,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl fmt::Debug for RunningBridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunningBridge").field("local_addr", &self.local_addr).finish_non_exhaustive()
    }
}

impl RunningBridge {
    /// The address browsers connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `ws://` URL of the bridge (without the token).
    pub fn url(&self) -> String {
        format!("ws://{}", self.local_addr)
    }

    /// The URL a client must open: with the token, when the bridge requires one.
    pub fn url_with_token(&self) -> &str {
        &self.url_with_token
    }

    /// The bridge's live counters.
    pub fn stats(&self) -> StatsHandle {
        self.stats.clone()
    }

    /// A handle that stops the bridge from anywhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Stops the bridge gracefully and waits until every connection is closed.
    pub async fn shutdown(mut self) -> io::Result<()> {
        self.shutdown.shutdown();
        match self.task.take() {
            Some(task) => task.await.map_err(io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningBridge {
    fn drop(&mut self) {
        self.shutdown.shutdown();
    }
}

/// How a bridged connection ended, which decides how the WebSocket is closed.
#[derive(Debug)]
enum End {
    /// The client closed (close frame or EOF): reply (tungstenite does) and drop the TCP side.
    ClientClosed,
    /// The client's connection broke: nothing to say to it.
    ClientBroken,
    /// The client sent text: close with 1003.
    TextRejected,
    /// The client sent a request the bridge does not forward: close with 1008 or 1009.
    Refused(Violation),
    /// The target closed or failed: close the WebSocket normally.
    TargetClosed,
    /// The bridge is shutting down: close with 1001.
    Shutdown,
}

type ClientSocket = WebSocketStream<Rewind>;

/// Everything one connection's task needs.
struct Connection {
    target: Arc<str>,
    options: BridgeOptions,
    admission: Arc<Admission>,
    stats: StatsHandle,
    stop: watch::Receiver<bool>,
    peer: SocketAddr,
}

impl Connection {
    fn emit(&self, event: BridgeEvent) {
        if let Some(sink) = &self.options.events {
            (sink.0)(&event);
        }
    }

    async fn serve(mut self, mut client: TcpStream) {
        let _ = client.set_nodelay(true);
        // Read the upgrade request first and check it, so a refused page never makes the
        // bridge touch the target.
        let head = match tokio::time::timeout(self.options.handshake_timeout, upgrade::read_head(&mut client)).await {
            Ok(Ok(head)) => head,
            _ => return,
        };
        let precheck = upgrade::parse_head(&head)
            .map(|(target, origins)| self.admission.check(&target, origins.iter().map(Vec::as_slice)));
        // Connect next, so a refused target fails the upgrade (see the crate docs).
        let target = match precheck {
            Some(Ok(())) => {
                match tokio::time::timeout(self.options.connect_timeout, TcpStream::connect(&*self.target)).await {
                    Ok(Ok(stream)) => Some(Ok(stream)),
                    Ok(Err(e)) => Some(Err(format!("target {} refused the connection: {e}", self.target))),
                    Err(_) => Some(Err(format!(
                        "target {} did not accept within {:?}",
                        self.target, self.options.connect_timeout
                    ))),
                }
            }
            _ => None,
        };
        let failure = match &target {
            Some(Err(why)) => {
                StatsHandle::bump(&self.stats.0.target_failures);
                Some(why.clone())
            }
            _ => None,
        };
        let verdict = Arc::new(Mutex::new(None));
        let upgrade = Upgrade { admission: self.admission.clone(), precheck, failure, refused: verdict.clone() };
        let handshake = tokio_tungstenite::accept_hdr_async(Rewind::new(head, client), upgrade);
        let ws = tokio::time::timeout(self.options.handshake_timeout, handshake).await;
        let refusal = verdict.lock().ok().and_then(|mut v| v.take());
        if let Some(refusal) = refusal {
            let counter = match refusal {
                Refusal::MissingToken | Refusal::WrongToken => &self.stats.0.token_refused,
                _ => &self.stats.0.origin_refused,
            };
            StatsHandle::bump(counter);
            self.emit(BridgeEvent::UpgradeRefused { peer: self.peer, refusal });
        }
        let ws = match ws {
            Ok(Ok(ws)) => ws,
            // Failed upgrade (including our own 401/403/502), bad request or timeout: the TCP
            // connection to the target, if any, is dropped (closed) here, unused.
            _ => return,
        };
        let Some(Ok(target)) = target else { return };
        StatsHandle::bump(&self.stats.0.upgraded);
        let _ = target.set_nodelay(true);
        self.bridge(ws, target).await;
    }

    async fn bridge(&mut self, ws: ClientSocket, target: TcpStream) {
        let (mut ws_tx, mut ws_rx) = ws.split();
        let (mut tcp_rx, mut tcp_tx) = target.into_split();
        let mut filter = match self.options.apis {
            ApiPolicy::All => None,
            ref policy => Some(RequestFilter::new(policy.clone(), self.options.max_frame_size)),
        };
        let end = {
            let up = client_to_target(&mut ws_rx, &mut tcp_tx, filter.as_mut());
            let down = target_to_client(&mut tcp_rx, &mut ws_tx, self.options.read_buffer);
            tokio::select! {
                end = up => end,
                end = down => end,
                () = stopped(&mut self.stop) => End::Shutdown,
            }
        };
        // Whatever happened, the TCP side goes first: the target sees the close at once.
        drop(tcp_tx);
        drop(tcp_rx);
        let close = |code: CloseCode, reason: String| Message::Close(Some(CloseFrame { code, reason: reason.into() }));
        let farewell = match end {
            End::ClientBroken => return,
            End::ClientClosed => None,
            End::TextRejected => {
                StatsHandle::bump(&self.stats.0.text_rejected);
                Some(close(CloseCode::Unsupported, "binary messages only".into()))
            }
            End::Refused(violation) => {
                StatsHandle::bump(&self.stats.0.requests_refused);
                let code = match violation {
                    Violation::TooLarge { .. } => CloseCode::Size,
                    _ => CloseCode::Policy,
                };
                let reason = filter::close_reason(&violation);
                self.emit(BridgeEvent::RequestRefused { peer: self.peer, violation });
                Some(close(code, reason))
            }
            End::TargetClosed => Some(close(CloseCode::Normal, "target closed the connection".into())),
            End::Shutdown => Some(close(CloseCode::Away, "bridge shutting down".into())),
        };
        let grace = self.options.close_grace;
        let finish = async {
            if let Some(message) = farewell {
                let _ = ws_tx.send(message).await;
            }
            // Flushes tungstenite's queued close reply, if the client closed first.
            let _ = ws_tx.close().await;
            // Wait for the client's close reply (or its EOF) so the close is clean.
            while let Some(Ok(_)) = ws_rx.next().await {}
        };
        let _ = tokio::time::timeout(grace, finish).await;
    }
}

/// Resolves once shutdown was asked for (or the bridge, and with it the sender, is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not `Send`; drop it before anything else awaits.
    let _ = stop.wait_for(|stopped| *stopped).await.map(|_| ());
}

/// Answers the upgrade: refuses it (401/403) when the origin or token check fails, fails it
/// with 502 when the target could not be reached (`failure` says why), or accepts it
/// (selecting `binary` when offered).
///
/// The checks run again here, on tungstenite's own reading of the request, so the request
/// that is accepted is exactly the one that was checked; `precheck` is the verdict on the
/// bridge's first reading, which decided whether to contact the target (`None`: unreadable).
struct Upgrade {
    admission: Arc<Admission>,
    precheck: Option<Result<(), Refusal>>,
    failure: Option<String>,
    refused: Arc<Mutex<Option<Refusal>>>,
}

impl Callback for Upgrade {
    fn on_request(self, request: &Request, response: Response) -> Result<Response, ErrorResponse> {
        let target = request.uri().path_and_query().map_or("/", |p| p.as_str());
        let origins = request.headers().get_all(header::ORIGIN);
        let readable = self.precheck.is_some();
        let verdict = match self.precheck {
            Some(Err(refusal)) => Err(refusal),
            _ => self.admission.check(target, origins.iter().map(HeaderValue::as_bytes)),
        };
        if let Err(refusal) = verdict {
            let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::FORBIDDEN);
            let refused = refuse(status, refusal.to_string());
            if let Ok(mut slot) = self.refused.lock() {
                *slot = Some(refusal);
            }
            return Err(refused);
        }
        if !readable {
            return Err(refuse(StatusCode::BAD_REQUEST, "the upgrade request could not be read".into()));
        }
        answer_upgrade(request, response, self.failure)
    }
}

// The error type is tungstenite's `Callback` contract, not ours to shrink.
#[allow(clippy::result_large_err)]
fn answer_upgrade(
    request: &Request,
    mut response: Response,
    failure: Option<String>,
) -> Result<Response, ErrorResponse> {
    if let Some(why) = failure {
        return Err(refuse(StatusCode::BAD_GATEWAY, why));
    }
    let offers_binary = request
        .headers()
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|protocol| protocol.trim() == BINARY_SUBPROTOCOL);
    if offers_binary {
        response.headers_mut().insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(BINARY_SUBPROTOCOL));
    }
    Ok(response)
}

/// An HTTP error answer to the upgrade, the reason as its plain-text body.
fn refuse(status: StatusCode, why: String) -> ErrorResponse {
    let mut refusal = ErrorResponse::new(Some(why));
    *refusal.status_mut() = status;
    refusal.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    refusal
}

/// Copies binary messages from the client to the target (through `filter`, when there is
/// one) until something ends the flow.
async fn client_to_target(
    ws_rx: &mut futures_util::stream::SplitStream<ClientSocket>,
    tcp_tx: &mut OwnedWriteHalf,
    mut filter: Option<&mut RequestFilter>,
) -> End {
    let mut allowed = Vec::new();
    loop {
        match ws_rx.next().await {
            Some(Ok(Message::Binary(data))) => {
                let bytes: &[u8] = match filter.as_deref_mut() {
                    None => &data,
                    Some(filter) => match filter.feed(&data, &mut allowed) {
                        Ok(()) => &allowed,
                        Err(violation) => return End::Refused(violation),
                    },
                };
                if !bytes.is_empty() && tcp_tx.write_all(bytes).await.is_err() {
                    return End::TargetClosed;
                }
            }
            Some(Ok(Message::Text(_))) => return End::TextRejected,
            // tungstenite answers pings itself; pongs and raw frames carry no payload for us.
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
            Some(Ok(Message::Close(_))) | None => return End::ClientClosed,
            Some(Err(_)) => return End::ClientBroken,
        }
    }
}

/// Copies bytes from the target to the client as binary messages until either side ends.
async fn target_to_client(
    tcp_rx: &mut OwnedReadHalf,
    ws_tx: &mut futures_util::stream::SplitSink<ClientSocket, Message>,
    read_buffer: usize,
) -> End {
    let mut buf = vec![0u8; read_buffer.max(1)];
    loop {
        match tcp_rx.read(&mut buf).await {
            Ok(0) | Err(_) => return End::TargetClosed,
            Ok(n) => {
                if ws_tx.send(Message::binary(buf[..n].to_vec())).await.is_err() {
                    return End::ClientBroken;
                }
            }
        }
    }
}

/// The README's code samples, compiled by `cargo test --doc` so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The browser adapter's README shows this crate too; its samples compile here.
#[cfg(doctest)]
#[doc = include_str!("../../browser/README.md")]
pub struct BrowserReadmeDoctests;
