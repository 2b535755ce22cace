//! The counting TCP proxies in front of the mock brokers: each one's accepted connections
//! are the TCP handshakes librdkafka completed with that seed.

use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// The (proxy local port, broker port) pairs of the proxies' upstream connections in the
/// current run, so the capture does not mistake them for librdkafka's.
#[derive(Default)]
pub struct UpstreamLog(pub Mutex<HashSet<(u16, u16)>>);

/// A counting TCP proxy on loopback in front of one mock broker: real accounting of the TCP
/// handshakes librdkafka completes with that seed.
pub struct Proxy {
    /// Where librdkafka is sent.
    pub address: SocketAddr,
    /// Connections accepted so far (read before and after each run).
    pub accepted: Arc<AtomicUsize>,
    /// The accept loop, stopped when the proxy is dropped.
    task: tokio::task::AbortHandle,
}

impl Drop for Proxy {
    /// Stops accepting; connections in flight end when librdkafka closes them.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a proxy to `upstream` (must run inside the tokio runtime).
pub async fn proxy(upstream: SocketAddr, log: Arc<UpstreamLog>) -> io::Result<Proxy> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    let task = tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((client, _)) => {
                    counter.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(pipe(client, upstream, Arc::clone(&log)));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
    })
    .abort_handle();
    Ok(Proxy { address, accepted, task })
}

/// Copies bytes both ways until either side closes, then closes both (so a silent broker's
/// connection ends as soon as librdkafka drops it). No Nagle on the proxy's sockets: it must
/// not add delays of its own.
async fn pipe(mut client: TcpStream, upstream: SocketAddr, log: Arc<UpstreamLog>) {
    let Ok(mut server) = TcpStream::connect(upstream).await else { return };
    if let Ok(local) = server.local_addr() {
        log.0.lock().unwrap().insert((local.port(), upstream.port()));
    }
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    tokio::select! {
        _ = tokio::io::copy(&mut client_read, &mut server_write) => {}
        _ = tokio::io::copy(&mut server_read, &mut client_write) => {}
    }
}
