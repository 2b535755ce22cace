//! The session's host over tokio: carries out its actions (dial, send, close, look a name
//! up, a nonce from the OS, a token from the token source) and reports what the sockets did.
//! It decides nothing and speaks no Kafka: the [`Session`] does both.
//!
//! Every connection is a future owned by the host (no task is spawned), so dropping the
//! host drops every socket before the drop returns, and a `Close` ends its connection the
//! next time the host is polled (right after the actions are carried out).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::{AbortHandle, Abortable};
use futures_util::stream::{FuturesUnordered, StreamExt};
use stagger::kafka::sasl::{Nonce, TokenSource};
use stagger::report::{connect_error, io_error};
use stagger::session::{Action, CloseKind, ConnId, Event, Session, SessionConfig};
use stagger::{AttemptError, AttemptId, BrokerBook, ErrorKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::clock::Clock;
use crate::resolver::Lookup;
use crate::tls::Connector;
use crate::transport::Transport;
use crate::Error;

/// Bytes read from a socket at a time; the session reassembles frames of any size.
const READ_BUFFER: usize = 64 * 1024;

/// What the host does besides TCP: TLS, where tokens come from, how names are looked up.
#[derive(Debug)]
pub(crate) struct Io {
    pub(crate) tls: Option<Connector>,
    pub(crate) tokens: Option<TokenSource>,
    pub(crate) lookup: Lookup,
}

/// What a connection's future or a lookup tells the host.
enum Note {
    Conn(ConnId, Wire),
    Resolved(AttemptId, Result<Vec<SocketAddr>, AttemptError>),
}

/// What happened on a connection.
enum Wire {
    Connected,
    Secured,
    Received(Vec<u8>),
    Closed,
    Failed(AttemptError),
}

type Running = Abortable<Pin<Box<dyn Future<Output = ()> + Send>>>;

/// A connection as the host holds it: where its writes go, and how to end it.
struct Conn {
    writes: mpsc::UnboundedSender<Bytes>,
    abort: AbortHandle,
}

pub(crate) struct Host {
    pub(crate) session: Session,
    pub(crate) clock: Clock,
    io: Arc<Io>,
    conns: HashMap<ConnId, Conn>,
    running: FuturesUnordered<Running>,
    notes: (mpsc::UnboundedSender<Note>, mpsc::UnboundedReceiver<Note>),
    /// `Refreshed` and `RefreshFailed`, until the caller takes them.
    done: VecDeque<Action>,
}

impl Host {
    /// A session over `seeds` (names resolved through the session, each address a
    /// candidate) and its host; the settings are validated before any broker is contacted.
    pub(crate) fn start(seeds: &[impl AsRef<str>], mut config: SessionConfig, io: Io) -> Result<Host, Error> {
        let book = BrokerBook::resolving(seeds.iter().map(|s| s.as_ref()))?;
        (config.tls, config.fresh_tokens) = (io.tls.is_some(), io.tokens.is_some());
        config.seed_unless_set(fresh_seed);
        let clock = Clock::start();
        let session = Session::new(config, book, clock.now())?;
        Ok(Host {
            session,
            clock,
            io: Arc::new(io),
            conns: HashMap::new(),
            running: FuturesUnordered::new(),
            notes: mpsc::unbounded_channel(),
            done: VecDeque::new(),
        })
    }

    /// The next end of a refresh the session announced (`Refreshed` or `RefreshFailed`).
    pub(crate) fn take_done(&mut self) -> Option<Action> {
        self.done.pop_front()
    }

    /// Waits until a connection or a lookup has news, the session's next timer is due, or
    /// `other` completes (then its output is returned); reports what happened, then the
    /// time, and carries out the actions that follow.
    pub(crate) async fn wait<T>(&mut self, other: impl Future<Output = T>) -> Option<T> {
        let due = self.session.poll_timeout();
        let mut woken = None;
        tokio::select! {
            biased;
            Some(note) = self.notes.1.recv() => {
                self.note(note);
                while let Ok(note) = self.notes.1.try_recv() {
                    self.note(note);
                }
            }
            Some(_) = self.running.next(), if !self.running.is_empty() => {}
            out = other => woken = Some(out),
            () = self.clock.sleep_until(due) => {}
        }
        // What happened first, then the time: an answer that came as its timer fell due wins.
        self.session.handle_timeout(self.clock.now());
        self.carry_out();
        woken
    }

    /// Carries out the session's actions, and feeds what that produces at once (a nonce,
    /// a token). Call after every `request_*` on the session.
    pub(crate) fn carry_out(&mut self) {
        let mut immediate = Vec::new();
        loop {
            while let Some(action) = self.session.poll_action() {
                self.act(action, &mut immediate);
            }
            if immediate.is_empty() {
                return;
            }
            let now = self.clock.now();
            for event in immediate.drain(..) {
                self.session.handle_event(now, event);
            }
        }
    }

    fn act(&mut self, action: Action, immediate: &mut Vec<Event<'static>>) {
        match action {
            Action::Dial { conn, address, tls } => self.dial(conn, address, tls),
            Action::Send { conn, bytes } => {
                if let Some(c) = self.conns.get(&conn) {
                    let _ = c.writes.send(bytes);
                }
            }
            // The connection's future ends at its next poll, and drops its socket.
            Action::Close { conn } => {
                if let Some(c) = self.conns.remove(&conn) {
                    c.abort.abort();
                }
            }
            Action::Resolve { lookup, name } => {
                let (io, notes) = (self.io.clone(), self.notes.0.clone());
                self.spawn(async move {
                    let _ = notes.send(Note::Resolved(lookup, io.lookup.resolve(&name).await));
                });
            }
            Action::NeedNonce { conn } => {
                let mut bytes: Nonce = Default::default();
                immediate.push(match getrandom::getrandom(&mut bytes) {
                    Ok(()) => Event::Nonce { conn, bytes },
                    Err(e) => {
                        if let Some(c) = self.conns.remove(&conn) {
                            c.abort.abort();
                        }
                        Event::IoError {
                            conn,
                            error: AttemptError::with_detail(ErrorKind::Io, format!("no nonce: {e}")),
                        }
                    }
                });
            }
            Action::NeedToken { conn } => {
                let token = self.io.tokens.as_ref().map_or_else(|| Err("no token source".into()), TokenSource::fetch);
                immediate.push(Event::Token { conn, token });
            }
            done @ (Action::Refreshed { .. } | Action::RefreshFailed { .. }) => self.done.push_back(done),
            Action::Rebootstrapped => {}
        }
    }

    /// Opens `conn`: its future connects, secures (with TLS, verifying `server_name`),
    /// then moves bytes both ways until it fails, the broker closes it, or the host does.
    fn dial(&mut self, conn: ConnId, address: Arc<str>, server_name: Option<Arc<str>>) {
        let (writes, inbox) = mpsc::unbounded_channel();
        let (io, notes) = (self.io.clone(), self.notes.0.clone());
        let abort = self.spawn(converse(io, conn, address, server_name, inbox, notes));
        self.conns.insert(conn, Conn { writes, abort });
    }

    fn spawn(&mut self, future: impl Future<Output = ()> + Send + 'static) -> AbortHandle {
        let (abort, registration) = AbortHandle::new_pair();
        let boxed: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(future);
        self.running.push(Abortable::new(boxed, registration));
        abort
    }

    /// Reports `note` to the session (news about a connection it closed is dropped here).
    fn note(&mut self, note: Note) {
        let now = self.clock.now();
        let (conn, wire) = match note {
            Note::Conn(conn, wire) if self.conns.contains_key(&conn) => (conn, wire),
            Note::Conn(..) => return,
            Note::Resolved(lookup, result) => {
                self.session.handle_event(now, Event::Resolved { lookup, result });
                return self.carry_out();
            }
        };
        if let Wire::Closed | Wire::Failed(_) = wire {
            self.conns.remove(&conn);
        }
        let event = match wire {
            Wire::Connected => Event::Connected { conn },
            Wire::Secured => Event::Secured { conn },
            Wire::Received(ref bytes) => Event::Received { conn, bytes },
            Wire::Closed => Event::Closed { conn, how: CloseKind::Clean },
            Wire::Failed(error) => Event::IoError { conn, error },
        };
        self.session.handle_event(now, event);
        self.carry_out();
    }
}

/// One connection's life: connect, TLS, then bytes both ways. Every step is a [`Note`].
async fn converse(
    io: Arc<Io>,
    conn: ConnId,
    address: Arc<str>,
    server_name: Option<Arc<str>>,
    mut writes: mpsc::UnboundedReceiver<Bytes>,
    notes: mpsc::UnboundedSender<Note>,
) {
    let tcp = match connect(&io.lookup, &address).await {
        Ok(tcp) => tcp,
        Err(error) => return drop(notes.send(Note::Conn(conn, Wire::Failed(error)))),
    };
    let _ = notes.send(Note::Conn(conn, Wire::Connected));
    let mut transport = match &io.tls {
        None => Transport::Tcp(tcp),
        Some(tls) => match tls.handshake(tcp, server_name.as_deref().unwrap_or(&address)).await {
            Ok(transport) => {
                let _ = notes.send(Note::Conn(conn, Wire::Secured));
                transport
            }
            Err(error) => return drop(notes.send(Note::Conn(conn, Wire::Failed(error)))),
        },
    };
    let mut buf = vec![0u8; READ_BUFFER];
    loop {
        tokio::select! {
            biased;
            bytes = writes.recv() => {
                // The host forgot the connection: it is closed by this return.
                let Some(bytes) = bytes else { return };
                if let Err(e) = write(&mut transport, &bytes).await {
                    return drop(notes.send(Note::Conn(conn, Wire::Failed(failed(&e)))));
                }
            }
            read = transport.read(&mut buf) => match read {
                Ok(0) => return drop(notes.send(Note::Conn(conn, Wire::Closed))),
                Ok(n) => drop(notes.send(Note::Conn(conn, Wire::Received(buf[..n].to_vec())))),
                Err(e) => return drop(notes.send(Note::Conn(conn, Wire::Failed(failed(&e))))),
            },
        }
    }
}

/// An attempt's error from a failed read or write.
fn failed(e: &io::Error) -> AttemptError {
    io_error(e, crate::transport::is_tls_error(e))
}

async fn write(transport: &mut Transport, bytes: &[u8]) -> io::Result<()> {
    transport.write_all(bytes).await?;
    transport.flush().await
}

/// Connects to `address` (`host:port`; a discovered broker's name is looked up with the
/// configured resolver), trying each of its addresses in turn.
async fn connect(lookup: &Lookup, address: &str) -> Result<TcpStream, AttemptError> {
    let mut last = AttemptError::with_detail(ErrorKind::Dns, format!("{address}: no address"));
    for addr in lookup.resolve(address).await? {
        match TcpStream::connect(addr).await {
            Ok(tcp) => {
                // Requests are small and latency is the point: do not wait to coalesce.
                let _ = tcp.set_nodelay(true);
                return Ok(tcp);
            }
            Err(e) => last = connect_error(addr, &e),
        }
    }
    Err(last)
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
