//! Socket accounting: which of this process's open file descriptors are TCP connections *to*
//! given ports. Counting only those excludes the runtime's own descriptors and the mock
//! brokers' accepted sockets (which live in this process too and close on their own
//! schedule), so "our sockets are closed" is checked exactly, without waiting.
//!
//! Fast path: the socket descriptors in `/proc/self/fd`, each asked for its TCP state
//! (`TCP_INFO`) and peer (`getpeername`) — cost proportional to *our* descriptors. Only when
//! one of them is still connecting (SYN-SENT: it has no peer yet) is `/proc/self/net/tcp`
//! read to learn where it is going; that file lists every socket of the network namespace,
//! which on a busy machine (thousands of TIME-WAIT rows) takes the kernel ~0.1 s to produce.

use std::collections::HashSet;
use std::fs;
use std::os::fd::{BorrowedFd, RawFd};

/// Linux TCP states (`include/net/tcp_states.h`).
const TCP_SYN_SENT: u8 = 2;
const TCP_CLOSE: u8 = 7;
const TCP_LISTEN: u8 = 10;

/// Open TCP sockets of this process whose remote port is one of `ports`.
pub fn sockets_to(ports: &[u16]) -> usize {
    let mut count = 0;
    for (fd, _) in socket_fds() {
        match tcp_state(fd) {
            None | Some(TCP_LISTEN | TCP_CLOSE) => {}
            Some(TCP_SYN_SENT) => return sockets_to_by_proc(ports),
            Some(_) => {
                if peer_port(fd).is_some_and(|port| ports.contains(&port)) {
                    count += 1;
                }
            }
        }
    }
    count
}

/// Describes this process's TCP sockets to `ports` (descriptor, state, local and remote
/// address), for failure messages.
pub fn describe_sockets_to(ports: &[u16]) -> String {
    let mut out = Vec::new();
    for (fd, inode) in socket_fds() {
        let Some(state) = tcp_state(fd) else { continue };
        // SAFETY: borrowed for these calls only; a stale descriptor only fails.
        let sock = unsafe { BorrowedFd::borrow_raw(fd) };
        let sock = socket2::SockRef::from(&sock);
        let local = sock.local_addr().ok().and_then(|a| a.as_socket());
        let peer = sock.peer_addr().ok().and_then(|a| a.as_socket());
        if state == TCP_SYN_SENT || peer.is_some_and(|p| ports.contains(&p.port())) {
            out.push(format!("fd {fd} (inode {inode}) state {state} {local:?} -> {peer:?}"));
        }
    }
    out.join("; ")
}

/// This process's socket descriptors and their inodes.
fn socket_fds() -> Vec<(RawFd, u64)> {
    let mut fds = Vec::new();
    for entry in fs::read_dir("/proc/self/fd").expect("/proc/self/fd").flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<RawFd>() else { continue };
        if let Ok(target) = fs::read_link(entry.path()) {
            let target = target.to_string_lossy();
            if let Some(inode) = target.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                if let Ok(inode) = inode.parse::<u64>() {
                    fds.push((fd, inode));
                }
            }
        }
    }
    fds
}

/// The TCP state of `fd`, or `None` if it is not a TCP socket (or was closed meanwhile).
fn tcp_state(fd: RawFd) -> Option<u8> {
    // `struct tcp_info` starts with `__u8 tcpi_state`; the kernel copies what fits.
    let mut info = [0u8; 8];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: a plain getsockopt into a buffer of `len` bytes; a stale fd only fails.
    let rc = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, info.as_mut_ptr().cast(), &mut len) };
    (rc == 0 && len >= 1).then_some(info[0])
}

/// The remote port of a connected socket.
fn peer_port(fd: RawFd) -> Option<u16> {
    // SAFETY: the descriptor is only borrowed for this call; a stale one only fails.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    socket2::SockRef::from(&fd).peer_addr().ok()?.as_socket().map(|a| a.port())
}

/// [`sockets_to`] through `/proc/self/net/tcp`, which also knows where a connecting socket
/// is going.
fn sockets_to_by_proc(ports: &[u16]) -> usize {
    let ours: HashSet<u64> = socket_fds().into_iter().map(|(_, inode)| inode).collect();
    // The file is produced in chunks while sockets come and go (other tests, the brokers in
    // this process), and a row can then appear twice: count each socket once.
    let mut counted = HashSet::new();
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else { continue };
        // Columns: sl local remote st tx:rx tr:when retrnsmt uid timeout inode ...
        for line in text.lines().skip(1) {
            let mut fields = line.split_whitespace();
            let remote = fields.nth(2);
            let inode = fields.nth(6);
            let remote_port =
                remote.and_then(|r| r.rsplit_once(':')).and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            let inode = inode.and_then(|i| i.parse::<u64>().ok());
            if let (Some(port), Some(inode)) = (remote_port, inode) {
                if inode != 0 && ports.contains(&port) && ours.contains(&inode) {
                    counted.insert(inode);
                }
            }
        }
    }
    counted.len()
}

/// All open file descriptors of this process (for information in failure messages).
pub fn open_fds() -> usize {
    fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

/// A port on 127.0.0.1 that refuses connections: a socket bound to it but not listening
/// (kept, so no one else takes the port), which is what a stopped broker looks like — the
/// kernel answers a SYN with RST, and `connect` fails with `ECONNREFUSED` at once.
pub struct Refusing {
    /// `127.0.0.1:port`, to use as a seed.
    pub address: String,
    _socket: socket2::Socket,
}

impl Refusing {
    /// Binds a port on 127.0.0.1 without listening on it.
    pub fn new() -> Refusing {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        socket.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into()).expect("bind");
        let address = socket.local_addr().unwrap().as_socket().unwrap().to_string();
        Refusing { address, _socket: socket }
    }
}

/// A listener on 127.0.0.1 that never completes another TCP handshake: its accept queue
/// (backlog 1) is full of connections nobody accepts, and Linux silently drops SYNs to a
/// listener whose accept queue is full (`ListenOverflows`; no RST, unlike a closed port), so a
/// `connect` to it hangs in SYN-SENT until the caller gives up — a broker host that is
/// overloaded or behind a black-holing firewall, made on loopback.
///
/// [`Unanswered::new`] fills the queue until a probe connect really times out, so it proves
/// the premise on the machine it runs on (or panics saying it does not hold).
pub struct Unanswered {
    /// `127.0.0.1:port`, to use as a seed.
    pub address: String,
    /// The connections that fill the queue (they are ours: sockets to this port).
    pub fillers: usize,
    _listener: socket2::Socket,
    _queued: Vec<std::net::TcpStream>,
}

impl Unanswered {
    /// A listener on 127.0.0.1 whose accept queue is already full.
    pub fn new() -> Unanswered {
        use socket2::{Domain, Socket, Type};
        use std::net::{SocketAddr, TcpStream};
        use std::time::Duration;
        let listener = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        listener.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into()).expect("bind");
        listener.listen(1).expect("listen");
        let addr = listener.local_addr().unwrap().as_socket().unwrap();
        let mut queued = Vec::new();
        loop {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
                Ok(stream) => queued.push(stream),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => break,
                Err(e) => panic!("filling the accept queue of {addr}: {e}"),
            }
            assert!(queued.len() < 16, "{addr}: the accept queue never filled; SYNs are not dropped here");
        }
        Unanswered { address: addr.to_string(), fillers: queued.len(), _listener: listener, _queued: queued }
    }

    /// The port (for socket accounting).
    pub fn port(&self) -> u16 {
        self.address.rsplit_once(':').unwrap().1.parse().unwrap()
    }
}
