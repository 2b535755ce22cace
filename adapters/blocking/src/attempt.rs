//! One attempt's I/O: its addresses, a non-blocking connect to each in turn, then bytes in
//! and out of its [`KafkaAttempt`], which says what to write and what the core must hear.
//! Nothing here decides anything; it only moves bytes and reports what the socket said.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::vec;

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use stagger::kafka::sasl::TokenSource;
use stagger::kafka::{ExchangeConfig, KafkaAttempt};
use stagger::{AttemptError, AttemptId, BrokerIdentity, ErrorKind, Input};

use crate::transport::Transport;

/// What every attempt of one loop shares.
#[derive(Debug)]
pub(crate) struct Context {
    /// What to ask the broker.
    pub(crate) exchange: ExchangeConfig,
    /// TLS, if the brokers speak it.
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<crate::options::Tls>,
    /// Asked for an `OAUTHBEARER` token as each attempt opens (a long-lived client's tokens
    /// expire); a one-shot refresh asks once, before, and leaves this `None`.
    pub(crate) oauth_token: Option<TokenSource>,
}

/// Where an attempt stands.
#[derive(Debug)]
enum Phase {
    /// Waiting for a helper thread's lookup.
    Resolving,
    /// A connect to one address is in flight; `rest` are tried if it fails.
    Connecting { tcp: TcpStream, addr: SocketAddr, rest: vec::IntoIter<SocketAddr> },
    /// The transport is up; the Kafka conversation runs.
    Open { transport: Transport, kafka: Box<KafkaAttempt>, out: Vec<u8> },
    /// Over: its last input is queued (and its transport handed on, if it answered).
    Over,
}

/// The `host:port` of the name `broker`'s address was resolved from, if it was: what TLS
/// verifies the broker against.
pub(crate) fn tls_name(book: &stagger::BrokerBook, broker: stagger::BrokerIndex) -> Option<Arc<str>> {
    let name = book.get(broker)?.resolved_from?;
    book.get(name).map(|e| e.address.clone())
}

/// One attempt on the wire.
#[derive(Debug)]
pub(crate) struct Attempt {
    id: AttemptId,
    token: Token,
    address: Arc<str>,
    /// The `host:port` whose host TLS verifies the broker against, when it is not
    /// `address`'s: the name an address was resolved from.
    tls_address: Option<Arc<str>>,
    expected: Option<BrokerIdentity>,
    phase: Phase,
}

/// What a step of an attempt produced for the loop.
#[derive(Debug, Default)]
pub(crate) struct Step {
    /// Inputs for the core, in order.
    pub(crate) inputs: Vec<Input>,
    /// The answer's connection and Metadata version, when the attempt ended with a response.
    pub(crate) answer: Option<(Transport, Option<i16>)>,
}

impl Attempt {
    /// An attempt to `address` that has not started any I/O yet.
    pub(crate) fn new(id: AttemptId, token: Token, address: Arc<str>, expected: Option<BrokerIdentity>) -> Self {
        Attempt { id, token, address, tls_address: None, expected, phase: Phase::Resolving }
    }

    /// Verifies the broker's certificate against the host of `name` (`host:port`) instead
    /// of the address connected to: the name the address was resolved from.
    pub(crate) fn with_tls_name(mut self, name: Option<Arc<str>>) -> Self {
        self.tls_address = name;
        self
    }

    /// The poll token its socket is registered with.
    pub(crate) fn token(&self) -> Token {
        self.token
    }

    /// Whether the attempt is over (its last input is in the step that ended it).
    pub(crate) fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Over)
    }

    /// The lookup answered (or the address needed none): connect to the first address.
    pub(crate) fn resolved(&mut self, result: io::Result<Vec<SocketAddr>>, registry: &Registry, step: &mut Step) {
        match result {
            Ok(addrs) => self.connect_next(addrs.into_iter(), None, registry, step),
            Err(e) => {
                let error = AttemptError::with_detail(ErrorKind::Dns, format!("{}: {e}", self.address));
                self.fail(error, step);
            }
        }
    }

    /// Starts the attempt on a connection kept from an earlier refresh.
    /// It authenticated already, if SASL is on.
    pub(crate) fn reuse(&mut self, ctx: &Context, transport: Transport, registry: &Registry, buf: &mut [u8]) -> Step {
        let mut step = Step::default();
        // Without a cluster check: the connection goes to the broker that already answered on it.
        self.expected = None;
        self.open(ctx, transport, true, registry, buf, &mut step);
        step
    }

    /// The socket is ready (or may be): make whatever progress it allows.
    pub(crate) fn ready(&mut self, ctx: &Context, registry: &Registry, buf: &mut [u8]) -> Step {
        let mut step = Step::default();
        match std::mem::replace(&mut self.phase, Phase::Over) {
            Phase::Connecting { mut tcp, addr, rest } => match connected(&tcp) {
                Ok(false) => self.phase = Phase::Connecting { tcp, addr, rest },
                Ok(true) => {
                    let _ = tcp.set_nodelay(true);
                    let _ = registry.deregister(&mut tcp);
                    match self.transport(ctx, tcp) {
                        Ok(transport) => self.open(ctx, transport, false, registry, buf, &mut step),
                        Err(e) => self.fail(e, &mut step),
                    }
                }
                Err(e) => {
                    let _ = registry.deregister(&mut tcp);
                    self.connect_next(rest, Some(connect_error(addr, &e)), registry, &mut step);
                }
            },
            Phase::Open { transport, kafka, out } => {
                self.phase = Phase::Open { transport, kafka, out };
                self.pump(registry, buf, &mut step);
            }
            phase => self.phase = phase,
        }
        step
    }

    /// Closes whatever the attempt holds (the socket closes when dropped).
    pub(crate) fn close(mut self, registry: &Registry) {
        match &mut self.phase {
            Phase::Connecting { tcp, .. } => drop(registry.deregister(tcp)),
            Phase::Open { transport, .. } => drop(registry.deregister(transport.socket())),
            Phase::Resolving | Phase::Over => {}
        }
    }

    /// Tries `addrs` in order until a connect is under way; fails with the last error.
    fn connect_next(
        &mut self,
        mut addrs: vec::IntoIter<SocketAddr>,
        mut last: Option<AttemptError>,
        registry: &Registry,
        step: &mut Step,
    ) {
        for addr in addrs.by_ref() {
            let started = TcpStream::connect(addr).and_then(|mut tcp| {
                registry.register(&mut tcp, self.token, Interest::READABLE | Interest::WRITABLE)?;
                Ok(tcp)
            });
            match started {
                Ok(tcp) => {
                    self.phase = Phase::Connecting { tcp, addr, rest: addrs };
                    return;
                }
                Err(e) => last = Some(connect_error(addr, &e)),
            }
        }
        let error = AttemptError::with_detail(ErrorKind::Dns, format!("{}: no address", self.address));
        self.fail(last.unwrap_or(error), step);
    }

    /// The TCP connection is up: wraps it in TLS, if configured.
    fn transport(&self, ctx: &Context, tcp: TcpStream) -> Result<Transport, AttemptError> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &ctx.tls {
            let address = self.tls_address.as_deref().unwrap_or(&self.address);
            let stream = crate::transport::tls::TlsStream::new(tls, tcp, address)?;
            return Ok(Transport::Tls(Box::new(stream)));
        }
        let _ = ctx;
        Ok(Transport::Tcp(tcp))
    }

    /// Starts the conversation on `transport` (`resumed`: a kept connection, authenticated
    /// already). The core hears `Connected` now: for a fresh connection that
    /// is the TCP handshake (before any TLS), the handshake the core times.
    fn open(
        &mut self,
        ctx: &Context,
        mut transport: Transport,
        resumed: bool,
        registry: &Registry,
        buf: &mut [u8],
        step: &mut Step,
    ) {
        let plaintext = transport.is_plaintext();
        // A kept connection authenticated already: it needs no token.
        let token = if resumed { None } else { ctx.oauth_token.as_ref() };
        let fetched = ctx.exchange.for_attempt(token);
        let exchange = fetched.as_deref().unwrap_or(&ctx.exchange);
        let mut kafka = if resumed {
            KafkaAttempt::resumed(self.id, exchange, plaintext)
        } else {
            with_fresh_nonce(KafkaAttempt::new(self.id, exchange, self.expected.as_ref(), plaintext))
        };
        if let Err(error) = fetched {
            kafka.handle_error(error);
        }
        kafka.handle_connected();
        if let Err(e) = registry.register(transport.socket(), self.token, Interest::READABLE | Interest::WRITABLE) {
            kafka.handle_error(AttemptError::with_detail(ErrorKind::Io, format!("poll registration: {e}")));
        }
        self.phase = Phase::Open { transport, kafka: Box::new(kafka), out: Vec::new() };
        self.pump(registry, buf, step);
    }

    /// Writes what the conversation has to say and reads what arrived, until the socket
    /// would block (the poll is edge-triggered) or the conversation ends.
    fn pump(&mut self, registry: &Registry, buf: &mut [u8], step: &mut Step) {
        let Phase::Open { transport, kafka, out } = &mut self.phase else { return };
        let securing = transport.is_handshaking();
        loop {
            while let Some(frame) = kafka.poll_transmit() {
                out.extend_from_slice(&frame);
            }
            if let Err(e) = transport.flush(out) {
                kafka.handle_error(io_error(transport, &e));
            }
            if kafka.is_finished() {
                break;
            }
            match transport.read(buf) {
                Ok(0) if transport.is_handshaking() => kafka.handle_error(AttemptError::with_detail(
                    ErrorKind::Tls,
                    "the broker hung up during the TLS handshake: does it speak TLS on this port?",
                )),
                Ok(0) => kafka.handle_closed(),
                Ok(n) => kafka.handle_bytes(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => kafka.handle_error(io_error(transport, &e)),
            }
        }
        if securing && !transport.is_handshaking() {
            // The broker process completed TLS: its first answer (`KafkaAttempt::handle_secured`).
            kafka.handle_secured();
        }
        let mut answered = false;
        while let Some(input) = kafka.poll_input() {
            answered |= matches!(input, Input::Response { .. });
            step.inputs.push(input);
        }
        if kafka.is_finished() {
            let version = kafka.metadata_version();
            let Phase::Open { mut transport, .. } = std::mem::replace(&mut self.phase, Phase::Over) else { return };
            let _ = registry.deregister(transport.socket());
            // An answer's connection may be kept for the next refresh; any other closes here.
            if answered {
                step.answer = Some((transport, version));
            }
        }
    }

    fn fail(&mut self, error: AttemptError, step: &mut Step) {
        self.phase = Phase::Over;
        step.inputs.push(Input::Failed { attempt: self.id, error });
    }
}

/// Whether a non-blocking connect has completed: `Ok(false)` while it is still under way,
/// the connect's own error if it failed.
fn connected(tcp: &TcpStream) -> io::Result<bool> {
    if let Some(e) = tcp.take_error()? {
        return Err(e);
    }
    match tcp.peer_addr() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
        Err(e) => Err(e),
    }
}

/// Classifies a failed TCP connect: refused means nothing listens (a definite, fast "no").
fn connect_error(addr: SocketAddr, e: &io::Error) -> AttemptError {
    let kind = match e.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
        io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
        _ => ErrorKind::Io,
    };
    AttemptError::with_detail(kind, format!("{addr}: {e}"))
}

/// Classifies a read or write failure on an established connection.
fn io_error(transport: &Transport, e: &io::Error) -> AttemptError {
    #[cfg(feature = "tls")]
    let tls = transport.is_handshaking() || crate::transport::tls::is_tls_error(e);
    #[cfg(not(feature = "tls"))]
    let tls = transport.is_handshaking();
    let kind = match e.kind() {
        _ if tls => ErrorKind::Tls,
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => ErrorKind::Closed,
        _ => ErrorKind::Io,
    };
    AttemptError::with_detail(kind, e.to_string())
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
