//! A loopback listener whose TCP handshake never completes, on tokio: the one the tokio
//! adapter's `tests/blackhole.rs` and stagger-lab's real-socket programs (`realsockets`,
//! `realsockets_kafka`, `librdkafka_reference`, `rule_costs`) share, so all of them meet the
//! same fault. ([`crate::sockets::Unanswered`] is its blocking twin, for the fault matrix.)

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// A listener whose TCP handshake never completes for new clients.
pub struct Blackhole {
    /// Where clients are sent.
    pub address: SocketAddr,
    /// Connections that filled its accept queue (reported, so readers can check the setup).
    pub queued: usize,
    /// The listener itself (backlog 1, never accepting).
    _listener: TcpListener,
    /// The connections that fill its accept queue; they must stay open.
    _fill: Vec<TcpStream>,
}

/// Binds a loopback listener with backlog 1, never accepts, and fills its accept queue (Linux
/// keeps backlog + 1 = 2 there) so the kernel drops further SYNs. Verifies that a connect then
/// really hangs. (`TcpSocket::listen(backlog)` is tokio's wrapper over socket2's `listen`.)
pub async fn blackhole() -> Result<Blackhole, String> {
    let err = |what: &str, e: std::io::Error| format!("blackhole: {what}: {e}");
    let socket = TcpSocket::new_v4().map_err(|e| err("socket", e))?;
    socket.bind(SocketAddr::from(([127, 0, 0, 1], 0))).map_err(|e| err("bind", e))?;
    let listener = socket.listen(1).map_err(|e| err("listen", e))?;
    let address = listener.local_addr().map_err(|e| err("local address", e))?;
    let mut fill = Vec::new();
    for _ in 0..8 {
        match tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(address)).await {
            Ok(Ok(stream)) => fill.push(stream),
            Ok(Err(e)) => return Err(err("filling the accept queue", e)),
            Err(_) => break, // this SYN was dropped: the queue is full
        }
    }
    let probe = Instant::now();
    if let Ok(result) = tokio::time::timeout(Duration::from_millis(500), TcpStream::connect(address)).await {
        return Err(format!("blackhole check: connect did not hang ({result:?}, {:?})", probe.elapsed()));
    }
    Ok(Blackhole { address, queued: fill.len(), _listener: listener, _fill: fill })
}
