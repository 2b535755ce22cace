//! A TCP forwarder on 127.0.0.1 whose target can be switched: an address that starts
//! pointing at one broker and is then re-pointed at another (a recycled IP, a moved DNS
//! name), which is what Kafka 4.4's cluster check (KIP-1242) exists to catch.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running forwarder; dropping it stops the listener and every connection it carries.
#[derive(Debug)]
pub struct Forwarder {
    address: String,
    target: Arc<watch::Sender<String>>,
    task: JoinHandle<()>,
}

impl Forwarder {
    /// Listens on an ephemeral port of 127.0.0.1 and forwards each connection to `target`.
    pub async fn start(target: &str) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the forwarder");
        Forwarder::serve(listener, target)
    }

    /// Listens on `address` (a port chosen before the brokers that advertise it start).
    pub async fn bind(address: SocketAddr, target: &str) -> Forwarder {
        let listener = TcpListener::bind(address).await.expect("bind the forwarder");
        Forwarder::serve(listener, target)
    }

    /// The `127.0.0.1:port` it listens on.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Re-points the forwarder at `target`: new connections go there, and every connection
    /// it carries now is closed (as when an address moves to another host).
    pub fn switch(&self, target: &str) {
        self.target.send_replace(target.to_owned());
    }

    fn serve(listener: TcpListener, target: &str) -> Forwarder {
        let address = listener.local_addr().expect("forwarder address").to_string();
        let (sender, _) = watch::channel(target.to_owned());
        let target = Arc::new(sender);
        let targets = target.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((client, _)) = listener.accept().await else { continue };
                let mut switched = targets.subscribe();
                let upstream = switched.borrow_and_update().clone();
                connections.spawn(async move {
                    let Ok(server) = TcpStream::connect(&upstream).await else { return };
                    let (mut client, mut server) = (client, server);
                    tokio::select! {
                        _ = copy_bidirectional(&mut client, &mut server) => {}
                        _ = switched.changed() => {}
                    }
                });
                // Reap finished connections so a long test does not accumulate them.
                while connections.try_join_next().is_some() {}
            }
        });
        Forwarder { address, target, task }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every connection.
        self.task.abort();
    }
}
