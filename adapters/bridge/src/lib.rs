//! `stagger-bridge`: a WebSocket↔TCP bridge, so a browser can speak Kafka's wire protocol.
//!
//! Browsers cannot open TCP sockets. The browser adapter (`stagger-web`) therefore runs each
//! attempt over a WebSocket whose binary messages carry the raw bytes of the Kafka
//! connection, and something next to the brokers turns that back into TCP. That something
//! is usually websockify; this crate is a small, embeddable equivalent on tokio and
//! tokio-tungstenite, used by the browser tests' fixture and by anyone who wants one process.
//!
//! Behaviour, as seen from the browser (compatible with websockify's binary mode):
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
//!   connects to the target *before* answering the upgrade and answers `502 Bad Gateway` if
//!   that fails. The browser then sees `error`/`close` without `open` — exactly what a refused
//!   TCP connection looks like to a native client — and the browser adapter reports
//!   `Refused` instead of `Closed`. A target that accepts TCP but never answers (a hung
//!   broker) opens normally, and the refresh core's timers deal with it.
//! * [`Bridge::shutdown_handle`] stops accepting and closes every open connection with 1001
//!   (going away) before [`Bridge::run`] returns.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let bridge = stagger_bridge::Bridge::bind("127.0.0.1:0".parse().unwrap(), "127.0.0.1:9092").await?;
//! println!("browsers connect to {}", bridge.url());
//! let running = bridge.spawn();
//! // ...
//! running.shutdown().await?;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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

/// The subprotocol websockify calls its binary mode; selected when a client offers it.
pub const BINARY_SUBPROTOCOL: &str = "binary";

/// Tunables of a [`Bridge`]; the defaults suit a Kafka bridge on a LAN or loopback.
#[derive(Clone, Debug)]
pub struct BridgeOptions {
    /// How long to wait for the target's TCP handshake before failing the upgrade with 502
    /// (default 10 s, a typical client connect timeout; the refresh core's attempt timeout
    /// usually ends a hopeless attempt sooner).
    pub connect_timeout: Duration,
    /// How long a client may take to send its upgrade request (default 10 s), so idle TCP
    /// connections cannot hold a target connection open forever.
    pub handshake_timeout: Duration,
    /// How long to wait for the client's close reply after the bridge closed (default 1 s).
    pub close_grace: Duration,
    /// Largest single read from the target, i.e. the largest binary message the bridge sends
    /// (default 64 KiB; Kafka frames larger than that simply span several messages).
    pub read_buffer: usize,
}

impl Default for BridgeOptions {
    fn default() -> Self {
        BridgeOptions {
            connect_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            close_grace: Duration::from_secs(1),
            read_buffer: 64 * 1024,
        }
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
}

/// A snapshot of a bridge's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
}

impl StatsHandle {
    /// The counters right now.
    pub fn snapshot(&self) -> Stats {
        let c = &self.0;
        Stats {
            accepted: c.accepted.load(Ordering::SeqCst),
            open: c.open.load(Ordering::SeqCst),
            upgraded: c.upgraded.load(Ordering::SeqCst),
            target_failures: c.target_failures.load(Ordering::SeqCst),
            text_rejected: c.text_rejected.load(Ordering::SeqCst),
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
    /// resolved at each connection) with the default [`BridgeOptions`].
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

    /// `ws://` URL of [`Bridge::local_addr`], as the browser adapter's `bootstrap` wants it.
    pub fn url(&self) -> String {
        format!("ws://{}", self.local_addr)
    }

    /// The `host:port` every connection is bridged to.
    pub fn target(&self) -> &str {
        &self.target
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
        let mut stop = shutdown.0.subscribe();
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                biased;
                () = stopped(&mut stop) => break,
                accepted = listener.accept() => match accepted {
                    Ok((client, _peer)) => {
                        StatsHandle::bump(&stats.0.accepted);
                        let guard = OpenGuard::new(&stats);
                        let conn = Connection {
                            target: target.clone(),
                            options: options.clone(),
                            stats: stats.clone(),
                            stop: shutdown.0.subscribe(),
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
        let task = tokio::spawn(self.run());
        RunningBridge { local_addr, stats, shutdown, task: Some(task) }
    }
}

/// A bridge running in a tokio task; dropping it starts a graceful shutdown.
#[derive(Debug)]
pub struct RunningBridge {
    local_addr: SocketAddr,
    stats: StatsHandle,
    shutdown: ShutdownHandle,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl RunningBridge {
    /// The address browsers connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `ws://` URL of the bridge.
    pub fn url(&self) -> String {
        format!("ws://{}", self.local_addr)
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
    /// The target closed or failed: close the WebSocket normally.
    TargetClosed,
    /// The bridge is shutting down: close with 1001.
    Shutdown,
}

/// Everything one connection's task needs.
struct Connection {
    target: Arc<str>,
    options: BridgeOptions,
    stats: StatsHandle,
    stop: watch::Receiver<bool>,
}

impl Connection {
    async fn serve(mut self, client: TcpStream) {
        let _ = client.set_nodelay(true);
        // Connect first, so a refused target fails the upgrade (see the crate docs).
        let target = match tokio::time::timeout(self.options.connect_timeout, TcpStream::connect(&*self.target)).await {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(e)) => Err(format!("target {} refused the connection: {e}", self.target)),
            Err(_) => Err(format!("target {} did not accept within {:?}", self.target, self.options.connect_timeout)),
        };
        let failure = target.as_ref().err().cloned();
        if failure.is_some() {
            StatsHandle::bump(&self.stats.0.target_failures);
        }
        let handshake = tokio_tungstenite::accept_hdr_async(client, Upgrade { failure });
        let ws = match tokio::time::timeout(self.options.handshake_timeout, handshake).await {
            Ok(Ok(ws)) => ws,
            // Failed upgrade (including our own 502), bad request or timeout: the TCP
            // connection to the target, if any, is dropped (closed) here.
            _ => return,
        };
        let Ok(target) = target else { return };
        StatsHandle::bump(&self.stats.0.upgraded);
        let _ = target.set_nodelay(true);
        self.bridge(ws, target).await;
    }

    async fn bridge(&mut self, ws: WebSocketStream<TcpStream>, target: TcpStream) {
        let (mut ws_tx, mut ws_rx) = ws.split();
        let (mut tcp_rx, mut tcp_tx) = target.into_split();
        let end = {
            let up = client_to_target(&mut ws_rx, &mut tcp_tx);
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
        let close =
            |code: CloseCode, reason: &'static str| Message::Close(Some(CloseFrame { code, reason: reason.into() }));
        let farewell = match end {
            End::ClientBroken => return,
            End::ClientClosed => None,
            End::TextRejected => {
                StatsHandle::bump(&self.stats.0.text_rejected);
                Some(close(CloseCode::Unsupported, "binary messages only"))
            }
            End::TargetClosed => Some(close(CloseCode::Normal, "target closed the connection")),
            End::Shutdown => Some(close(CloseCode::Away, "bridge shutting down")),
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

/// Answers the upgrade: accepts it (selecting `binary` when offered), or fails it with 502
/// when the target could not be reached (`failure` says why).
struct Upgrade {
    failure: Option<String>,
}

impl Callback for Upgrade {
    fn on_request(self, request: &Request, response: Response) -> Result<Response, ErrorResponse> {
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
        let mut refusal = ErrorResponse::new(Some(why));
        *refusal.status_mut() = StatusCode::BAD_GATEWAY;
        return Err(refusal);
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

/// Copies binary messages from the client to the target until something ends the flow.
async fn client_to_target(
    ws_rx: &mut futures_util::stream::SplitStream<WebSocketStream<TcpStream>>,
    tcp_tx: &mut OwnedWriteHalf,
) -> End {
    loop {
        match ws_rx.next().await {
            Some(Ok(Message::Binary(data))) => {
                if tcp_tx.write_all(&data).await.is_err() {
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
    ws_tx: &mut futures_util::stream::SplitSink<WebSocketStream<TcpStream>, Message>,
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
