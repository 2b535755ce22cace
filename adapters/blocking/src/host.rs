//! The session's host: carries out its actions over non-blocking sockets and one mio poll
//! (dial, send, close, a name looked up on a helper thread, a nonce from the OS, a token from
//! the token source) and reports what the sockets did. It decides nothing and speaks no
//! Kafka: the [`Session`] does both.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;
use std::vec;

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use stagger::kafka::sasl::{Nonce, TokenSource};
use stagger::session::{Action, CloseKind, ConnId, Event, Session, SessionConfig};
use stagger::{AttemptError, AttemptId, BrokerBook, ErrorKind, Instant};

use crate::transport::Transport;
use crate::Error;

/// Wakes the loop (a lookup answered, a caller asked); a connection's token is its id (≥ 1).
const WAKE: Token = Token(0);

/// Maps `std::time` onto the core's [`Instant`] (microseconds since the start), the only
/// place time comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock(std::time::Instant);

impl Clock {
    /// Now, rounded down, so a timer the session set for `at` has passed when woken for it.
    pub(crate) fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX))
    }
}

/// What the host does besides TCP: TLS, and where tokens come from.
#[derive(Debug, Default)]
pub(crate) struct Io {
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<crate::options::Tls>,
    pub(crate) tokens: Option<TokenSource>,
    /// Seeds by name are resolved through the session (`BrokerBook::resolving`).
    pub(crate) resolve_names: bool,
}

/// What a helper thread looked up: a dialled name, or a lookup the session asked for.
#[derive(Clone, Copy)]
enum Lookup {
    Dial(ConnId),
    Name(AttemptId),
}

type Answer = (Lookup, io::Result<Vec<SocketAddr>>);

struct Conn {
    /// With TLS, the name to verify, as the session says.
    server_name: Option<Arc<str>>,
    state: State,
    /// What the session asked to send, until the socket takes it.
    out: Vec<u8>,
    /// Whether the transport is up for requests (TLS done) and the session knows it.
    secured: bool,
}

enum State {
    Resolving,
    Connecting { tcp: TcpStream, addr: SocketAddr, rest: vec::IntoIter<SocketAddr> },
    Open(Transport),
}

pub(crate) struct Host {
    pub(crate) session: Session,
    pub(crate) clock: Clock,
    io: Io,
    poll: Poll,
    events: Events,
    waker: Arc<Waker>,
    lookups: (Sender<Answer>, Receiver<Answer>),
    conns: HashMap<ConnId, Conn>,
    /// Connections with something to write or read.
    dirty: Vec<ConnId>,
    /// `Refreshed` and `RefreshFailed`, until the caller takes them.
    done: VecDeque<Action>,
    buf: Vec<u8>,
}

impl Host {
    /// A session over `seeds` and its host, with a poll of its own; the settings are
    /// validated before any broker is contacted. `config` says what TLS and tokens `io` gives.
    pub(crate) fn start(seeds: &[impl AsRef<str>], mut config: SessionConfig, io: Io) -> Result<Host, Error> {
        let seeds = seeds.iter().map(|s| s.as_ref());
        let book = if io.resolve_names { BrokerBook::resolving(seeds)? } else { BrokerBook::new(seeds)? };
        #[cfg(feature = "tls")]
        let tls = io.tls.is_some();
        #[cfg(not(feature = "tls"))]
        let tls = false;
        (config.tls, config.fresh_tokens) = (tls, io.tokens.is_some());
        config.seed_unless_set(fresh_seed);
        let clock = Clock(std::time::Instant::now());
        let session = Session::new(config, book, clock.now())?;
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        let (conns, lookups, events) = (HashMap::new(), mpsc::channel(), Events::with_capacity(64));
        let (dirty, done, buf) = (Vec::new(), VecDeque::new(), vec![0; 64 * 1024]);
        Ok(Host { session, clock, io, poll, events, waker, lookups, conns, dirty, done, buf })
    }

    /// Wakes the loop from another thread.
    pub(crate) fn waker(&self) -> Arc<Waker> {
        self.waker.clone()
    }

    /// The next refresh the session finished, if any.
    pub(crate) fn take_done(&mut self) -> Option<Action> {
        self.done.pop_front()
    }

    /// Carries out what the session asks and moves the bytes of every connection that may
    /// have some. Call after every `request_*` on the session.
    pub(crate) fn settle(&mut self) {
        self.drain();
        while let Some(id) = self.dirty.pop() {
            self.pump(id);
        }
    }

    /// Waits until a socket is ready, a lookup answers, another thread wakes the loop or the
    /// session's next timer is due; reports it all, then the time, and settles.
    pub(crate) fn wait(&mut self) -> io::Result<()> {
        // `None` (no timer, or one too far to represent) sleeps until I/O.
        let due =
            self.session.poll_timeout().and_then(|at| self.clock.0.checked_add(Duration::from_micros(at.as_micros())));
        let timeout = due.map(|at| at.saturating_duration_since(std::time::Instant::now()));
        match self.poll.poll(&mut self.events, timeout) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => other?,
        }
        // The waker's token names no connection: it only ends the wait.
        self.dirty.extend(self.events.iter().map(|e| ConnId(e.token().0 as u64)).filter(|&id| id != ConnId(0)));
        while let Ok(answer) = self.lookups.1.try_recv() {
            self.resolved(answer);
        }
        self.settle();
        // What happened first, then the time: an answer that came as its timer fell due wins.
        self.session.handle_timeout(self.clock.now());
        self.settle();
        Ok(())
    }

    /// Carries out the session's actions (and reports what that produced at once); the
    /// bytes to write wait for [`Host::settle`].
    fn drain(&mut self) {
        while let Some(action) = self.session.poll_action() {
            match action {
                Action::Dial { conn, address, tls } => {
                    let (state, out) = (State::Resolving, Vec::new());
                    let entry = Conn { server_name: tls, state, out, secured: false };
                    self.conns.insert(conn, entry);
                    match address.parse::<SocketAddr>() {
                        Ok(addr) => self.connect(conn, vec![addr].into_iter(), None),
                        Err(_) => self.look_up(Lookup::Dial(conn), address),
                    }
                }
                Action::Send { conn, bytes } => {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.out.extend_from_slice(&bytes);
                        self.dirty.push(conn);
                    }
                }
                // Dropping the socket closes it and takes it out of the poll.
                Action::Close { conn } => drop(self.conns.remove(&conn)),
                Action::Resolve { lookup, name } => self.look_up(Lookup::Name(lookup), name),
                Action::NeedNonce { conn } => {
                    let mut bytes: Nonce = Default::default();
                    match getrandom::getrandom(&mut bytes) {
                        Ok(()) => self.feed(Event::Nonce { conn, bytes }),
                        Err(e) => self.fail(conn, AttemptError::with_detail(ErrorKind::Io, format!("no nonce: {e}"))),
                    }
                }
                Action::NeedToken { conn } => {
                    let token =
                        self.io.tokens.as_ref().map_or_else(|| Err("no token source".into()), TokenSource::fetch);
                    self.feed(Event::Token { conn, token });
                }
                done @ (Action::Refreshed { .. } | Action::RefreshFailed { .. }) => self.done.push_back(done),
                Action::Rebootstrapped => {}
            }
        }
    }

    fn feed(&mut self, event: Event<'_>) {
        self.session.handle_event(self.clock.now(), event);
        self.drain();
    }

    /// Drops `conn`'s socket and reports `error` for it.
    fn fail(&mut self, conn: ConnId, error: AttemptError) {
        if self.conns.remove(&conn).is_some() {
            self.feed(Event::IoError { conn, error });
        }
    }

    fn resolved(&mut self, (lookup, result): Answer) {
        match (lookup, result) {
            (Lookup::Name(lookup), result) => {
                let result = result.map_err(|e| AttemptError::with_detail(ErrorKind::Dns, e.to_string()));
                self.feed(Event::Resolved { lookup, result });
            }
            (Lookup::Dial(conn), Ok(addrs)) => self.connect(conn, addrs.into_iter(), None),
            (Lookup::Dial(conn), Err(e)) => self.fail(conn, AttemptError::with_detail(ErrorKind::Dns, e.to_string())),
        }
    }

    /// Looks `name` up on a helper thread (`getaddrinfo` only blocks), which wakes the loop
    /// with the answer. A lookup cannot be interrupted: one nobody waits for finishes on its
    /// own and its answer is ignored; the session's attempt timeout bounds the wait.
    fn look_up(&mut self, lookup: Lookup, name: Arc<str>) {
        let (answers, waker) = (self.lookups.0.clone(), self.waker.clone());
        let started = std::thread::Builder::new().name("stagger-resolve".into()).spawn(move || {
            // The loop may be gone (the refresh ended): then nobody needs the answer.
            let result = name.to_socket_addrs().map_err(|e| io::Error::new(e.kind(), format!("{name}: {e}")));
            if answers.send((lookup, result.map(Iterator::collect))).is_ok() {
                let _ = waker.wake();
            }
        });
        if let Err(e) = started {
            self.resolved((lookup, Err(e)));
        }
    }

    /// Starts a non-blocking connect to the first of `addrs` that takes one; fails `id` with
    /// the last error when none does.
    fn connect(&mut self, id: ConnId, mut addrs: vec::IntoIter<SocketAddr>, mut last: Option<AttemptError>) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        for addr in addrs.by_ref() {
            let interest = Interest::READABLE | Interest::WRITABLE;
            let started = TcpStream::connect(addr).and_then(|mut tcp| {
                self.poll.registry().register(&mut tcp, Token(id.0 as usize), interest).map(|()| tcp)
            });
            match started {
                Ok(tcp) => {
                    conn.state = State::Connecting { tcp, addr, rest: addrs };
                    return;
                }
                Err(e) => last = Some(stagger::report::connect_error(addr, &e)),
            }
        }
        self.fail(id, last.unwrap_or_else(|| AttemptError::with_detail(ErrorKind::Dns, "the name has no address")));
    }

    /// Moves `id`'s bytes until its socket would block (the poll is edge-triggered),
    /// reporting each step to the session as it happens.
    fn pump(&mut self, id: ConnId) {
        loop {
            let Some(conn) = self.conns.get_mut(&id) else { return };
            let transport = match &mut conn.state {
                State::Resolving => return,
                State::Connecting { tcp, addr, rest } => match connected(tcp) {
                    Ok(false) => return,
                    Ok(true) => {
                        let State::Connecting { tcp, .. } = std::mem::replace(&mut conn.state, State::Resolving) else {
                            return;
                        };
                        let _ = tcp.set_nodelay(true);
                        match open(&self.io, tcp, conn.server_name.as_deref()) {
                            Ok(transport) => conn.state = State::Open(transport),
                            Err(error) => return self.fail(id, error),
                        }
                        self.feed(Event::Connected { conn: id });
                        continue;
                    }
                    Err(e) => {
                        let (error, rest) = (stagger::report::connect_error(*addr, &e), std::mem::take(rest));
                        return self.connect(id, rest, Some(error));
                    }
                },
                State::Open(transport) => transport,
            };
            if !conn.secured && !transport.is_handshaking() {
                conn.secured = true;
                if transport.is_tls() {
                    // The broker process completed TLS: requests may go now.
                    self.feed(Event::Secured { conn: id });
                    continue;
                }
            }
            if let Err(e) = transport.flush(&mut conn.out) {
                let error = io_error(transport, &e);
                return self.fail(id, error);
            }
            match transport.read(&mut self.buf) {
                Ok(0) if transport.is_handshaking() => {
                    // A close, which the next pass may not meet: not the TLS layer's refusal.
                    return self.fail(id, AttemptError::with_detail(ErrorKind::Closed, stagger::report::TLS_HUNG_UP));
                }
                Ok(0) => {
                    self.conns.remove(&id);
                    return self.feed(Event::Closed { conn: id, how: CloseKind::Clean });
                }
                Ok(n) => {
                    self.session.handle_event(self.clock.now(), Event::Received { conn: id, bytes: &self.buf[..n] });
                    self.drain();
                }
                // Unless the TLS handshake just completed (then `Secured` is due).
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && (conn.secured || transport.is_handshaking()) => {
                    return;
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
                Err(e) => {
                    let error = io_error(transport, &e);
                    return self.fail(id, error);
                }
            }
        }
    }
}

/// The TCP connection is up: wraps it in TLS, if configured, verifying `name`.
fn open(io: &Io, tcp: TcpStream, name: Option<&str>) -> Result<Transport, AttemptError> {
    #[cfg(feature = "tls")]
    if let Some(tls) = &io.tls {
        return Transport::tls(tcp, tls, tls.server_name.as_deref().or(name).unwrap_or_default());
    }
    let _ = (io, name);
    Ok(Transport::Tcp(tcp))
}

/// Whether a non-blocking connect has completed: `Ok(false)` while under way, the connect's
/// own error if it failed.
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

/// Classifies a read or write failure on an established connection.
fn io_error(transport: &Transport, e: &io::Error) -> AttemptError {
    let kind = stagger::report::io_error_kind(e, crate::transport::is_tls_error(e));
    if transport.is_handshaking() && kind == ErrorKind::Closed {
        AttemptError::with_detail(kind, format!("{e} ({})", stagger::report::TLS_HUNG_UP))
    } else {
        AttemptError::with_detail(kind, e.to_string())
    }
}

/// This process's own PRNG seed, for [`SessionConfig::seed_unless_set`]; the clock stands in
/// should the OS have no randomness.
fn fresh_seed() -> u64 {
    let mut bytes = [0u8; 8];
    match getrandom::getrandom(&mut bytes) {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64),
    }
}
