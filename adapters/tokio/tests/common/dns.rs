//! DNS on loopback for the resolution tests: a DNS server for one zone (hickory-server,
//! in-process, UDP and TCP on one free port of 127.0.0.1) whose behaviour per name can be
//! set and changed while it runs (answer, NXDOMAIN, SERVFAIL, drop the query, answer
//! truncated over UDP), a "server" that reads queries and never answers, and TCP endpoints
//! that refuse or never complete a handshake on any loopback address. Meant to be shared: a
//! test file takes it with `#[path = "common/dns.rs"] mod dns;`.
#![allow(dead_code)] // each test file uses what it needs

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hickory_proto::op::{Header, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, SOA};
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};
use hickory_proto::xfer::Protocol;
use hickory_server::authority::MessageResponseBuilder;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::ServerFuture;
use tokio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};
use tokio::task::JoinHandle;

/// What the server does with a query for one name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Answers with these addresses, in this order: the IPv4 ones to an `A` query, the IPv6
    /// ones to an `AAAA` query; a family with none is NOERROR with no record (NODATA).
    Answer(Vec<IpAddr>),
    /// NXDOMAIN: the name does not exist (with the zone's SOA, as an authority says it).
    NxDomain,
    /// SERVFAIL: the server failed to answer (a recursive resolver whose upstream is down).
    ServFail,
    /// Reads the query and never answers (over UDP and TCP alike).
    Drop,
    /// Over UDP an empty answer with the TC (truncated) bit, so the resolver asks again over
    /// TCP; over TCP, the inner behaviour.
    Truncated(Box<Behaviour>),
}

/// A DNS server for one zone on `127.0.0.1:<free port>`, UDP and TCP on the same port.
/// Names of the zone it has no behaviour for are NXDOMAIN; names outside it are REFUSED.
/// Stops when dropped.
pub struct DnsServer {
    /// Where to send queries (`DnsOptions::name_servers`).
    pub address: SocketAddr,
    zone: Arc<Zone>,
    task: JoinHandle<()>,
}

impl DnsServer {
    /// Serves `zone` (e.g. `"test."`) with `records`: `(name, address)` pairs, A or AAAA by
    /// the address's family, answered in the order given.
    pub async fn start(zone: &str, records: &[(&str, IpAddr)]) -> DnsServer {
        let zone = Arc::new(Zone::new(zone));
        for (name, ip) in records {
            let mut state = zone.lock();
            match state.names.entry(lower(name)).or_insert_with(|| Behaviour::Answer(Vec::new())) {
                Behaviour::Answer(addresses) => addresses.push(*ip),
                _ => unreachable!("records only make answers"),
            }
        }
        let (udp, tcp) = sockets().await;
        let address = udp.local_addr().unwrap();
        let mut server = ServerFuture::new(Handler(zone.clone()));
        server.register_socket(udp);
        // A TCP client idle this long is dropped by the server (the tests end far sooner).
        server.register_listener(tcp, Duration::from_secs(60));
        let task = tokio::spawn(async move {
            let _ = server.block_until_done().await;
        });
        DnsServer { address, zone, task }
    }

    /// From now on, answers queries for `name` (e.g. `"kafka.test."`) following `behaviour`.
    pub fn set(&self, name: &str, behaviour: Behaviour) {
        self.zone.lock().names.insert(lower(name), behaviour);
    }

    /// From now on, gives answers (and the SOA's negative-caching time) this TTL, in
    /// seconds (default 1): 0 tells resolvers not to cache them at all.
    pub fn set_ttl(&self, ttl: u32) {
        self.zone.lock().ttl = ttl;
    }

    /// Queries read so far for `name`, of any type, over UDP.
    pub fn udp_queries(&self, name: &str) -> usize {
        self.zone.lock().queries.get(&(lower(name), false)).copied().unwrap_or(0)
    }

    /// Queries read so far for `name`, of any type, over TCP.
    pub fn tcp_queries(&self, name: &str) -> usize {
        self.zone.lock().queries.get(&(lower(name), true)).copied().unwrap_or(0)
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        // Aborting the task drops the server, which aborts every task it spawned (its
        // sockets' loops and the requests in flight).
        self.task.abort();
    }
}

/// A UDP socket and a TCP listener on the same free port of 127.0.0.1.
async fn sockets() -> (UdpSocket, TcpListener) {
    for _ in 0..20 {
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("a UDP port on loopback");
        let port = udp.local_addr().unwrap().port();
        if let Ok(tcp) = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await {
            return (udp, tcp);
        }
    }
    panic!("no port of 127.0.0.1 free for both UDP and TCP");
}

fn lower(name: &str) -> LowerName {
    LowerName::new(&Name::from_str(name).expect("a DNS name"))
}

/// The zone's state, shared by the server's request handlers and the test.
struct Zone {
    origin: LowerName,
    state: Mutex<State>,
}

struct State {
    names: HashMap<LowerName, Behaviour>,
    ttl: u32,
    /// Queries read, by name and whether over TCP.
    queries: HashMap<(LowerName, bool), usize>,
}

impl Zone {
    fn new(origin: &str) -> Zone {
        let state = State { names: HashMap::new(), ttl: 1, queries: HashMap::new() };
        Zone { origin: lower(origin), state: Mutex::new(state) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The zone's SOA record, its TTL and minimum (negative caching) `ttl`.
    fn soa(&self, ttl: u32) -> Record {
        let origin = Name::from(&self.origin);
        let soa = SOA::new(
            Name::from_str("ns").unwrap().append_domain(&origin).unwrap(),
            Name::from_str("admin").unwrap().append_domain(&origin).unwrap(),
            1,
            3600,
            600,
            86400,
            ttl,
        );
        Record::from_rdata(origin, ttl, RData::SOA(soa))
    }
}

/// What a query gets, decided with the zone locked, answered without it.
enum Reply {
    Records(Vec<Record>),
    Code(ResponseCode),
    Truncated,
    Refused,
    Nothing,
}

struct Handler(Arc<Zone>);

impl Handler {
    fn decide(&self, request: &Request) -> (Reply, u32) {
        let Some(query) = request.queries().first() else { return (Reply::Refused, 0) };
        let name = query.name().clone();
        let tcp = request.protocol() == Protocol::Tcp;
        let mut state = self.0.lock();
        *state.queries.entry((name.clone(), tcp)).or_default() += 1;
        let ttl = state.ttl;
        if !self.0.origin.zone_of(&name) {
            return (Reply::Refused, ttl);
        }
        let mut behaviour = state.names.get(&name).cloned().unwrap_or(Behaviour::NxDomain);
        while let Behaviour::Truncated(then) = behaviour {
            if !tcp {
                return (Reply::Truncated, ttl);
            }
            behaviour = *then;
        }
        let reply = match behaviour {
            Behaviour::Answer(addresses) => {
                let owner = Name::from(&name);
                let records = addresses
                    .iter()
                    .filter_map(|ip| match (ip, query.query_type()) {
                        (IpAddr::V4(v4), RecordType::A) => Some(RData::A(A(*v4))),
                        (IpAddr::V6(v6), RecordType::AAAA) => Some(RData::AAAA(AAAA(*v6))),
                        _ => None,
                    })
                    .map(|rdata| Record::from_rdata(owner.clone(), ttl, rdata))
                    .collect();
                Reply::Records(records)
            }
            Behaviour::NxDomain => Reply::Code(ResponseCode::NXDomain),
            Behaviour::ServFail => Reply::Code(ResponseCode::ServFail),
            Behaviour::Drop => Reply::Nothing,
            Behaviour::Truncated(_) => unreachable!("unwrapped above"),
        };
        (reply, ttl)
    }

    async fn answer<R: ResponseHandler>(&self, request: &Request, mut response: R) -> ResponseInfo {
        let (reply, ttl) = self.decide(request);
        let mut header = Header::response_from_request(request.header());
        let builder = MessageResponseBuilder::from_message_request(request);
        let soa = self.0.soa(ttl);
        let none = std::iter::empty::<&Record>;
        let sent = match reply {
            Reply::Nothing => return header.into(),
            Reply::Refused => response.send_response(builder.error_msg(request.header(), ResponseCode::Refused)).await,
            Reply::Code(ResponseCode::ServFail) => {
                response.send_response(builder.error_msg(request.header(), ResponseCode::ServFail)).await
            }
            Reply::Truncated => {
                header.set_truncated(true);
                response.send_response(builder.build_no_records(header)).await
            }
            Reply::Code(code) => {
                header.set_authoritative(true);
                header.set_response_code(code);
                response.send_response(builder.build(header, none(), none(), [&soa], none())).await
            }
            // NOERROR with no record of the type asked: NODATA, with the SOA.
            Reply::Records(records) if records.is_empty() => {
                header.set_authoritative(true);
                response.send_response(builder.build(header, none(), none(), [&soa], none())).await
            }
            Reply::Records(records) => {
                header.set_authoritative(true);
                response.send_response(builder.build(header, records.iter(), none(), none(), none())).await
            }
        };
        sent.unwrap_or_else(|_| header.into())
    }
}

// hickory-server's trait is an `async_trait`; written out by hand (what the macro expands
// to) rather than adding the macro crate for one impl.
impl RequestHandler for Handler {
    fn handle_request<'s, 'r, 'f, R>(
        &'s self,
        request: &'r Request,
        response_handle: R,
    ) -> Pin<Box<dyn Future<Output = ResponseInfo> + Send + 'f>>
    where
        R: ResponseHandler + 'f,
        's: 'f,
        'r: 'f,
        Self: 'f,
    {
        Box::pin(self.answer(request, response_handle))
    }
}

/// A UDP "name server" that reads every query and never answers (a resolver behind a
/// firewall that drops the answers). Counts the queries it read. Stops when dropped.
pub struct SilentDns {
    /// Where to send queries.
    pub address: SocketAddr,
    queries: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl SilentDns {
    pub async fn start() -> SilentDns {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("a UDP port on loopback");
        let address = socket.local_addr().unwrap();
        let queries = Arc::new(AtomicUsize::new(0));
        let counted = queries.clone();
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            while socket.recv_from(&mut buf).await.is_ok() {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
        SilentDns { address, queries, task }
    }

    /// Queries read so far.
    pub fn queries(&self) -> usize {
        self.queries.load(Ordering::Relaxed)
    }
}

impl Drop for SilentDns {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A TCP listener on `address` whose handshake never completes for new clients: backlog 1,
/// never accepting, its accept queue filled, so the kernel drops further SYNs. Another
/// loopback address (`127.0.0.2`) can host it on the same port as a live broker on
/// `127.0.0.1`, so both A records of a name carry one port. (testing/faults' `Unanswered`
/// is the same on a port of its own.)
pub struct Blackhole {
    pub address: SocketAddr,
    _listener: TcpListener,
    _fill: Vec<TcpStream>,
}

impl Blackhole {
    pub async fn start(address: SocketAddr) -> Blackhole {
        let socket = TcpSocket::new_v4().expect("a socket");
        // As tokio's `TcpListener::bind` does: an earlier connection to this address and
        // port still in TIME-WAIT must not make the bind fail.
        socket.set_reuseaddr(true).expect("SO_REUSEADDR");
        socket.bind(address).unwrap_or_else(|e| panic!("the blackhole's address {address}: {e}"));
        let listener = socket.listen(1).expect("listen");
        let address = listener.local_addr().unwrap();
        let mut fill = Vec::new();
        for _ in 0..8 {
            match tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(address)).await {
                Ok(Ok(stream)) => fill.push(stream),
                Ok(Err(e)) => panic!("blackhole: filling the accept queue: {e}"),
                Err(_) => break, // this SYN was dropped: the queue is full
            }
        }
        let probe = tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(address)).await;
        assert!(probe.is_err(), "blackhole check: a connect to {address} did not hang: {probe:?}");
        Blackhole { address, _listener: listener, _fill: fill }
    }
}

/// A TCP address that refuses connections: a socket bound to `address` but not listening
/// (kept, so no one else takes it), so a SYN is answered with RST and `connect` fails with
/// `ECONNREFUSED` at once — a stopped broker. (testing/faults' `Refusing` is the same on a
/// port of its own; this one shares a live broker's port on another loopback address.)
pub struct Refusing {
    pub address: SocketAddr,
    _socket: TcpSocket,
}

impl Refusing {
    /// `None` when `address` cannot be bound (an IPv6 one on a machine without IPv6).
    pub fn new(address: SocketAddr) -> Option<Refusing> {
        let socket = if address.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.ok()?;
        socket.set_reuseaddr(true).ok()?; // as in `Blackhole::start`
        socket.bind(address).ok()?;
        Some(Refusing { address: socket.local_addr().ok()?, _socket: socket })
    }
}
