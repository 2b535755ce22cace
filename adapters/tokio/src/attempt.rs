//! One attempt on the wire — resolve, connect, (TLS), run the Kafka exchange — and the set
//! of attempts a driver runs concurrently.
//!
//! Attempts are futures owned by an [`AttemptSet`], which the driving future owns in turn:
//! no task is spawned, so dropping the driver drops every attempt and closes every socket
//! synchronously, and cancelling one attempt closes its socket the next time the set is
//! polled (the driver polls it right after carrying out the core's commands).

use std::collections::HashMap;
use std::future::{pending, Future};
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::future::{AbortHandle, Abortable};
use futures_util::stream::{FuturesUnordered, StreamExt};
use stagger::kafka::{ExchangeConfig, KafkaAttempt};
use stagger::{AttemptError, AttemptId, BrokerIdentity, ErrorKind, Input, Metadata};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::options::TokenSource;
use crate::resolver::Lookup;
use crate::tls::Connector;
use crate::transport::Transport;

/// Bytes read from a socket at a time; the exchange reassembles frames of any size.
const READ_BUFFER: usize = 64 * 1024;

/// What every attempt of one driver shares (what differs per attempt, the broker's expected
/// identity, is passed to [`AttemptSet::connect`] and [`AttemptSet::reuse`]).
#[derive(Debug)]
pub(crate) struct AttemptContext {
    /// What to ask the broker.
    pub(crate) exchange: ExchangeConfig,
    /// TLS, if the brokers speak it.
    pub(crate) tls: Option<Connector>,
    /// Asked for an `OAUTHBEARER` token as each attempt starts (a long-lived client's
    /// tokens expire); a one-shot refresh asks once, before, and leaves this `None`.
    pub(crate) oauth_token: Option<TokenSource>,
    /// Answers the core's `Resolve` commands.
    pub(crate) lookup: Lookup,
}

/// The `host:port` of the name `broker`'s address was resolved from, if it was: what TLS
/// verifies the broker's certificate against (and sends as SNI).
pub(crate) fn tls_name(book: &stagger::BrokerBook, broker: stagger::BrokerIndex) -> Option<Arc<str>> {
    let name = book.get(broker)?.resolved_from?;
    book.get(name).map(|e| e.address.clone())
}

/// A broker's answer, with the connection it came on (kept by the client for reuse).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) metadata: Metadata,
    /// The Metadata API version the exchange settled on.
    pub(crate) version: Option<i16>,
    pub(crate) transport: Transport,
}

/// Progress of an attempt, as the driver reports it to the core.
#[derive(Debug)]
pub(crate) enum Progress {
    /// The transport came up (`Input::Connected`); `tls`: a TLS handshake follows (a fresh
    /// connection to TLS brokers), so the broker's first answer will be its end.
    Connected { tls: bool },
    /// The broker sent its first complete answer on this attempt (`Input::FirstFrame`): it is
    /// alive. Reported at most once per attempt, and always before its `Finished`, even when
    /// the same read completed the exchange.
    Answered,
    /// The attempt ended (`Input::Response` or `Input::Failed`).
    Finished(Result<Answer, AttemptError>),
    /// A lookup (`Command::Resolve`) answered: `Input::Resolved`, or `Input::Failed` (kind
    /// `Dns`). The attempt is over either way.
    Resolved(Result<Vec<std::net::SocketAddr>, AttemptError>),
}

/// How a connection came to be.
enum Conn {
    /// A new TCP connection: the TLS handshake (if any) is still to come.
    Fresh(TcpStream),
    /// A connection kept from an earlier refresh: authenticated already, if SASL is on.
    Kept(Transport),
}

enum Step {
    /// The connection is up; the exchange expects the broker to be `expected`, if known.
    Connected {
        conn: Conn,
        expected: Option<BrokerIdentity>,
    },
    /// The broker's first answer arrived; the conversation goes on from here.
    Answered(Box<Conversation>),
    Finished(Result<Answer, AttemptError>),
    Resolved(Result<Vec<std::net::SocketAddr>, AttemptError>),
}

type Running = Abortable<Pin<Box<dyn Future<Output = (AttemptId, Step)> + Send>>>;

/// The attempts in flight, each cancellable on its own.
pub(crate) struct AttemptSet {
    ctx: Arc<AttemptContext>,
    running: FuturesUnordered<Running>,
    live: HashMap<AttemptId, Live>,
}

struct Live {
    abort: AbortHandle,
    address: Arc<str>,
    /// The `host:port` TLS verifies the broker against: `address`, or the name it was
    /// resolved from.
    tls_address: Arc<str>,
}

impl AttemptSet {
    pub(crate) fn new(ctx: AttemptContext) -> Self {
        AttemptSet { ctx: Arc::new(ctx), running: FuturesUnordered::new(), live: HashMap::new() }
    }

    /// Starts `attempt`: resolve and connect to `address`. With `expected` (a discovered
    /// broker's identity, from `Cluster::identity`) the exchange asks the broker to confirm
    /// it (ApiVersions v5, KIP-1242); without, it asks nothing of the kind.
    ///
    /// `tls_name` is the `host:port` of the name `address` was resolved from, if it was:
    /// TLS verifies the broker's certificate against that name.
    pub(crate) fn connect(
        &mut self,
        attempt: AttemptId,
        address: Arc<str>,
        tls_name: Option<Arc<str>>,
        expected: Option<BrokerIdentity>,
    ) {
        let target = address.clone();
        let tls_address = tls_name.unwrap_or_else(|| address.clone());
        self.push_for(attempt, address, tls_address, async move {
            let step = match connect(&target).await {
                Ok(tcp) => Step::Connected { conn: Conn::Fresh(tcp), expected },
                Err(e) => Step::Finished(Err(e)),
            };
            (attempt, step)
        });
    }

    /// Starts `attempt` as a lookup of `name` (`host:port`) with the configured resolver
    /// (`Command::Resolve`); it ends with [`Progress::Resolved`]. Cancelling it abandons
    /// the lookup.
    pub(crate) fn resolve(&mut self, attempt: AttemptId, name: Arc<str>) {
        let ctx = self.ctx.clone();
        let target = name.clone();
        self.push(attempt, name, async move { (attempt, Step::Resolved(ctx.lookup.resolve(&target).await)) });
    }

    /// Starts `attempt` on a connection kept from an earlier refresh: it reports
    /// `Connected` at once and goes straight to the exchange, without a cluster check (the
    /// connection goes to the broker process that already answered on it).
    pub(crate) fn reuse(&mut self, attempt: AttemptId, address: Arc<str>, transport: Transport) {
        self.push(attempt, address, async move {
            (attempt, Step::Connected { conn: Conn::Kept(transport), expected: None })
        });
    }

    /// Starts `attempt` already failed (kind `Io`, with `detail`): for a command this
    /// adapter cannot carry out, reported as the attempt's end like any failure.
    pub(crate) fn fail(&mut self, attempt: AttemptId, address: Arc<str>, detail: &'static str) {
        let error = AttemptError::with_detail(ErrorKind::Io, detail);
        self.push(attempt, address, async move { (attempt, Step::Finished(Err(error))) });
    }

    /// Abandons `attempt` and (on the set's next poll) closes its connection.
    pub(crate) fn cancel(&mut self, attempt: AttemptId) {
        if let Some(live) = self.live.remove(&attempt) {
            live.abort.abort();
        }
    }

    /// Abandons every attempt and closes every connection now.
    pub(crate) fn clear(&mut self) {
        self.live.clear();
        self.running = FuturesUnordered::new();
    }

    /// The next progress of any attempt; pending forever while none is in flight, so it
    /// can sit in a `select!` next to the core's timer. Cancel-safe.
    pub(crate) async fn next(&mut self) -> (AttemptId, Progress) {
        loop {
            let (attempt, step) = match self.running.next().await {
                None => pending().await,
                Some(Err(_aborted)) => continue,
                Some(Ok(item)) => item,
            };
            match step {
                Step::Connected { conn, expected } => {
                    let Some((address, tls)) =
                        self.live.get(&attempt).map(|l| (l.address.clone(), l.tls_address.clone()))
                    else {
                        continue;
                    };
                    let ctx = self.ctx.clone();
                    let handshake_follows = matches!(conn, Conn::Fresh(_)) && ctx.tls.is_some();
                    self.push_for(attempt, address, tls.clone(), async move {
                        (attempt, converse(&ctx, attempt, &tls, conn, expected.as_ref()).await)
                    });
                    return (attempt, Progress::Connected { tls: handshake_follows });
                }
                Step::Answered(conversation) => {
                    let Some((address, tls)) =
                        self.live.get(&attempt).map(|l| (l.address.clone(), l.tls_address.clone()))
                    else {
                        continue;
                    };
                    // The rest of the exchange runs on; the driver reports `Answered` now,
                    // so it reaches the core before whatever the exchange ends with.
                    self.push_for(attempt, address, tls, async move { (attempt, conversation.finish().await) });
                    return (attempt, Progress::Answered);
                }
                Step::Finished(result) => {
                    if self.live.remove(&attempt).is_none() {
                        continue;
                    }
                    return (attempt, Progress::Finished(result));
                }
                Step::Resolved(result) => {
                    if self.live.remove(&attempt).is_none() {
                        continue;
                    }
                    return (attempt, Progress::Resolved(result));
                }
            }
        }
    }

    fn push(
        &mut self,
        attempt: AttemptId,
        address: Arc<str>,
        future: impl Future<Output = (AttemptId, Step)> + Send + 'static,
    ) {
        self.push_for(attempt, address.clone(), address, future);
    }

    fn push_for(
        &mut self,
        attempt: AttemptId,
        address: Arc<str>,
        tls_address: Arc<str>,
        future: impl Future<Output = (AttemptId, Step)> + Send + 'static,
    ) {
        let (abort, registration) = AbortHandle::new_pair();
        self.live.insert(attempt, Live { abort, address, tls_address });
        let boxed: Pin<Box<dyn Future<Output = (AttemptId, Step)> + Send>> = Box::pin(future);
        self.running.push(Abortable::new(boxed, registration));
    }
}

/// Resolves `address` and connects to the first resolved address that accepts. (Seeds given
/// by name are resolved through the core instead, each address an attempt of its own; this
/// is for addresses the core asks to connect to: IP literals, and discovered brokers'
/// advertised names.)
async fn connect(address: &str) -> Result<TcpStream, AttemptError> {
    let addrs = tokio::net::lookup_host(address)
        .await
        .map_err(|e| AttemptError::with_detail(ErrorKind::Dns, format!("{address}: {e}")))?;
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(tcp) => {
                // Requests are small and latency is the point: do not wait to coalesce.
                let _ = tcp.set_nodelay(true);
                return Ok(tcp);
            }
            Err(e) => last = Some(connect_error(&addr.to_string(), &e)),
        }
    }
    Err(last.unwrap_or_else(|| AttemptError::with_detail(ErrorKind::Dns, format!("{address}: no address"))))
}

/// TLS handshake (for a fresh connection, when configured), then the exchange (expecting the
/// broker to be `expected`, if known) up to the broker's first answer (or its end, if it
/// ends before one).
async fn converse(
    ctx: &AttemptContext,
    attempt: AttemptId,
    address: &str,
    conn: Conn,
    expected: Option<&BrokerIdentity>,
) -> Step {
    let secured = matches!(conn, Conn::Fresh(_)) && ctx.tls.is_some();
    let (transport, resumed) = match (conn, &ctx.tls) {
        (Conn::Kept(transport), _) => (transport, true),
        (Conn::Fresh(tcp), None) => (Transport::Tcp(tcp), false),
        (Conn::Fresh(tcp), Some(tls)) => match tls.handshake(tcp, address).await {
            Ok(transport) => (transport, false),
            Err(e) => return Step::Finished(Err(e)),
        },
    };
    // A kept connection authenticated already: it needs no token.
    let token = if resumed { None } else { ctx.oauth_token.as_ref() };
    let exchange = match ctx.exchange.for_attempt(token) {
        Ok(exchange) => exchange,
        Err(e) => return Step::Finished(Err(e)),
    };
    let mut conversation = Box::new(Conversation::new(attempt, transport, &exchange, expected, resumed));
    if secured {
        // The broker process completed TLS: that is its first answer (see `handle_secured`).
        conversation.kafka.handle_secured();
    }
    conversation.until_answered().await
}

/// One attempt's Kafka conversation ([`KafkaAttempt`]) on a transport, resumable at the
/// broker's first answer so the driver can report it (`Input::FirstFrame`) while the exchange
/// goes on. This is only its I/O: what to write, what the core hears and when, and how a
/// close or a TLS broker on a plaintext port reads, are the core's. The transport coming up
/// is reported by the driver itself at the TCP handshake (before any TLS), which is the
/// handshake the core times.
struct Conversation {
    transport: Transport,
    kafka: KafkaAttempt,
    buf: Vec<u8>,
}

impl Conversation {
    fn new(
        attempt: AttemptId,
        transport: Transport,
        config: &ExchangeConfig,
        expected: Option<&BrokerIdentity>,
        resumed: bool,
    ) -> Self {
        let plaintext = matches!(transport, Transport::Tcp(_));
        let kafka = if resumed {
            KafkaAttempt::resumed(attempt, config, plaintext)
        } else {
            with_fresh_nonce(KafkaAttempt::new(attempt, config, expected, plaintext))
        };
        Conversation { transport, kafka, buf: vec![0u8; READ_BUFFER] }
    }

    /// Runs until the broker's first complete answer, then hands the conversation back as
    /// [`Step::Answered`]; or until the end, if the attempt ends without any answer (an I/O
    /// error, a close, a frame that cannot be read).
    async fn until_answered(mut self: Box<Self>) -> Step {
        match self.run(true).await {
            Some(outcome) => Step::Finished(self.conclude(outcome)),
            None => Step::Answered(self),
        }
    }

    /// Runs the rest of the conversation to its end.
    async fn finish(mut self: Box<Self>) -> Step {
        match self.run(false).await {
            Some(outcome) => Step::Finished(self.conclude(outcome)),
            // Unreachable: without a stop at the first answer, `run` only ends with an outcome.
            None => Step::Finished(Err(AttemptError::with_detail(ErrorKind::Protocol, "exchange stopped early"))),
        }
    }

    /// The I/O loop: write what is ready, hand on what the core should hear, read. Returns
    /// `None` when `stop_at_answer` is set and the broker has just answered for the first
    /// time (after this answer's follow-up request, if any, was written: reporting never
    /// delays the exchange), otherwise the attempt's end.
    async fn run(&mut self, stop_at_answer: bool) -> Option<Result<Metadata, AttemptError>> {
        loop {
            while let Some(frame) = self.kafka.poll_transmit() {
                if let Err(e) = self.transport.write_all(&frame).await {
                    self.kafka.handle_error(io_error(&e));
                }
            }
            if !self.kafka.is_finished() {
                if let Err(e) = self.transport.flush().await {
                    self.kafka.handle_error(io_error(&e));
                }
            }
            while let Some(input) = self.kafka.poll_input() {
                match input {
                    Input::FirstFrame { .. } if stop_at_answer => return None,
                    Input::Response { metadata, .. } => return Some(Ok(metadata)),
                    Input::Failed { error, .. } => return Some(Err(error)),
                    Input::FirstFrame { .. } | Input::Connected { .. } | Input::Resolved { .. } => {}
                }
            }
            match self.transport.read(&mut self.buf).await {
                Ok(0) => self.kafka.handle_closed(),
                Ok(n) => self.kafka.handle_bytes(&self.buf[..n]),
                Err(e) => self.kafka.handle_error(io_error(&e)),
            }
        }
    }

    /// The attempt's result, with the connection an answer came on (kept by the client).
    fn conclude(self: Box<Self>, outcome: Result<Metadata, AttemptError>) -> Result<Answer, AttemptError> {
        let version = self.kafka.metadata_version();
        outcome.map(|metadata| Answer { metadata, version, transport: self.transport })
    }
}

/// Classifies a failed TCP connect: refused means nothing listens (a definite, fast "no").
fn connect_error(addr: &str, e: &io::Error) -> AttemptError {
    let kind = match e.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
        io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
        _ => ErrorKind::Io,
    };
    AttemptError::with_detail(kind, format!("{addr}: {e}"))
}

/// Classifies a read or write failure on an established connection.
pub(crate) fn io_error(e: &io::Error) -> AttemptError {
    let kind = match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => ErrorKind::Closed,
        _ if is_tls_error(e) => ErrorKind::Tls,
        _ => ErrorKind::Io,
    };
    AttemptError::with_detail(kind, e.to_string())
}

#[cfg(feature = "tls")]
fn is_tls_error(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>())
}

#[cfg(not(feature = "tls"))]
fn is_tls_error(_e: &io::Error) -> bool {
    false
}

/// Gives the attempt a SCRAM client nonce from the operating system's randomness. Should
/// the OS source fail (it does not on supported systems), the core's attempt-seeded nonce
/// stays in place.
fn with_fresh_nonce(kafka: KafkaAttempt) -> KafkaAttempt {
    let mut nonce = [0; 18];
    match getrandom::getrandom(&mut nonce) {
        Ok(()) => kafka.with_sasl_nonce(&nonce),
        Err(_) => kafka,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_are_classified() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(connect_error("a:1", &refused).kind, ErrorKind::Refused);
        assert_eq!(io_error(&io::Error::from(io::ErrorKind::ConnectionReset)).kind, ErrorKind::Closed);
        assert_eq!(io_error(&io::Error::from(io::ErrorKind::PermissionDenied)).kind, ErrorKind::Io);
    }
}
