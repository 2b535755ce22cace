//! DNS on loopback for the resolution tests: an authoritative server for one zone
//! (hickory-server, in-process, on a free UDP port), a "server" that reads queries and never
//! answers, and a TCP blackhole on any loopback address. Meant to be shared: a test file
//! takes it with `#[path = "common/dns.rs"] mod dns;`.
#![allow(dead_code)] // each test file uses what it needs

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

use hickory_proto::rr::rdata::{A, AAAA, SOA};
use hickory_proto::rr::{Name, RData, Record};
use hickory_server::authority::{Catalog, ZoneType};
use hickory_server::store::in_memory::InMemoryAuthority;
use hickory_server::ServerFuture;
use tokio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};
use tokio::task::JoinHandle;

/// An authoritative DNS server for one zone on `127.0.0.1:<free port>` (UDP). Names of the
/// zone it has no records for are NXDOMAIN. Stops when dropped.
pub struct DnsServer {
    /// Where to send queries (`DnsOptions::name_servers`).
    pub address: SocketAddr,
    task: JoinHandle<()>,
}

impl DnsServer {
    /// Serves `zone` (e.g. `"test."`) with `records`: `(name, address)` pairs, A or AAAA by
    /// the address's family, answered in the order given.
    pub async fn start(zone: &str, records: &[(&str, IpAddr)]) -> DnsServer {
        let origin = Name::from_str(zone).expect("a zone name");
        let mut authority = InMemoryAuthority::empty(origin.clone(), ZoneType::Primary, false);
        let soa = SOA::new(
            Name::from_str("ns.").unwrap().append_domain(&origin).unwrap(),
            Name::from_str("admin.").unwrap().append_domain(&origin).unwrap(),
            1,
            3600,
            600,
            86400,
            // The negative-caching TTL: short, so a test may change its mind.
            1,
        );
        authority.upsert_mut(Record::from_rdata(origin.clone(), 1, RData::SOA(soa)), 1);
        for (name, ip) in records {
            let name = Name::from_str(name).expect("a record name");
            let rdata = match ip {
                IpAddr::V4(v4) => RData::A(A(*v4)),
                IpAddr::V6(v6) => RData::AAAA(AAAA(*v6)),
            };
            // A TTL of 1 s: a resolver asked again soon after asks the server again.
            authority.upsert_mut(Record::from_rdata(name, 1, rdata), 1);
        }
        let mut catalog = Catalog::new();
        catalog.upsert(origin.into(), vec![std::sync::Arc::new(authority)]);
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("a UDP port on loopback");
        let address = socket.local_addr().unwrap();
        let mut server = ServerFuture::new(catalog);
        server.register_socket(socket);
        let task = tokio::spawn(async move {
            let _ = server.block_until_done().await;
        });
        DnsServer { address, task }
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A UDP "name server" that reads every query and never answers (a resolver behind a
/// firewall that drops the answers). Counts the queries it read. Stops when dropped.
pub struct SilentDns {
    /// Where to send queries.
    pub address: SocketAddr,
    queries: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: JoinHandle<()>,
}

impl SilentDns {
    pub async fn start() -> SilentDns {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("a UDP port on loopback");
        let address = socket.local_addr().unwrap();
        let queries = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = queries.clone();
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            while socket.recv_from(&mut buf).await.is_ok() {
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        SilentDns { address, queries, task }
    }

    /// Queries read so far.
    pub fn queries(&self) -> usize {
        self.queries.load(std::sync::atomic::Ordering::Relaxed)
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
/// `127.0.0.1`, so both A records of a name carry one port.
pub struct Blackhole {
    pub address: SocketAddr,
    _listener: TcpListener,
    _fill: Vec<TcpStream>,
}

impl Blackhole {
    pub async fn start(address: SocketAddr) -> Blackhole {
        let socket = TcpSocket::new_v4().expect("a socket");
        socket.bind(address).expect("the blackhole's address");
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
