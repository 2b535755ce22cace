//! A TCP forwarder in front of one broker that counts what the broker pays: connections
//! accepted, and connections the broker answered on (sent any byte back: a TLS ServerHello or
//! a Kafka frame — work done by the broker process, not its kernel).
//!
//! A forwarder keeps its upstream's faults that matter here: a stopped broker's kernel still
//! accepts the forwarder's connection and nobody answers. (A killed broker would read as a
//! close instead of a refusal, so refusal cases connect to brokers directly.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Counters of one forwarder.
#[derive(Debug, Default)]
pub struct Counts {
    accepted: AtomicU64,
    answered: AtomicU64,
}

/// A snapshot of [`Counts`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections on which the broker sent at least one byte.
    pub answered: u64,
}

impl std::ops::Sub for Snapshot {
    type Output = Snapshot;
    fn sub(self, rhs: Snapshot) -> Snapshot {
        Snapshot { accepted: self.accepted - rhs.accepted, answered: self.answered - rhs.answered }
    }
}

impl std::ops::Add for Snapshot {
    type Output = Snapshot;
    fn add(self, rhs: Snapshot) -> Snapshot {
        Snapshot { accepted: self.accepted + rhs.accepted, answered: self.answered + rhs.answered }
    }
}

/// A running counting forwarder; dropping it stops it and every connection it carries.
#[derive(Debug)]
pub struct CountingForwarder {
    address: String,
    counts: Arc<Counts>,
    task: JoinHandle<()>,
}

impl CountingForwarder {
    /// Listens on an ephemeral port of 127.0.0.1 and forwards each connection to `target`.
    pub async fn start(target: &str) -> std::io::Result<CountingForwarder> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        let counts = Arc::new(Counts::default());
        let (target, shared) = (target.to_owned(), counts.clone());
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((client, _)) = listener.accept().await else { continue };
                let _ = client.set_nodelay(true);
                shared.accepted.fetch_add(1, Ordering::SeqCst);
                connections.spawn(carry(client, target.clone(), shared.clone()));
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(CountingForwarder { address, counts, task })
    }

    /// The `127.0.0.1:port` it listens on.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The counters now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            accepted: self.counts.accepted.load(Ordering::SeqCst),
            answered: self.counts.answered.load(Ordering::SeqCst),
        }
    }
}

impl Drop for CountingForwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Carries one connection both ways, counting it as answered at the broker's first byte.
async fn carry(client: TcpStream, target: String, counts: Arc<Counts>) {
    let Ok(server) = TcpStream::connect(&target).await else { return };
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = async move {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        let _ = server_write.shutdown().await;
    };
    let down = async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut first = true;
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if std::mem::take(&mut first) {
                counts.answered.fetch_add(1, Ordering::SeqCst);
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = client_write.shutdown().await;
    };
    // Either side ending ends the connection, as a direct one would.
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}
