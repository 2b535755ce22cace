//! A small fault proxy on 127.0.0.1 in front of a real (mock) broker, for the failures the
//! mock cannot produce: garbage, a close right after accept, a close mid-frame, an oversize
//! length prefix, a slow drip, and TLS termination.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// What the proxy does to each connection.
#[derive(Clone)]
pub enum Fault {
    /// Reads the request, answers with a well-framed frame of garbage.
    Garbage,
    /// Closes every connection right after accepting it.
    CloseOnAccept,
    /// Forwards the request, then sends half of the broker's response frame and closes.
    CloseMidFrame,
    /// Reads the request, answers with a 2 GiB length prefix and holds the connection.
    OversizeLength,
    /// Forwards everything, but the broker's bytes one at a time, `every` apart.
    SlowDrip(Duration),
    /// Terminates TLS with this server configuration and forwards the plaintext.
    Tls(Arc<rustls::ServerConfig>),
}

impl Fault {
    /// A short name for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Fault::Garbage => "garbage",
            Fault::CloseOnAccept => "close-on-accept",
            Fault::CloseMidFrame => "close-mid-frame",
            Fault::OversizeLength => "oversize-length",
            Fault::SlowDrip(_) => "slow-drip",
            Fault::Tls(_) => "tls",
        }
    }
}

/// A running proxy; dropping it stops the listener and every connection it serves.
pub struct Proxy {
    /// `127.0.0.1:port` to use as a seed.
    pub address: String,
    accepted: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy in front of `upstream` applying `fault`.
    pub async fn start(upstream: &str, fault: Fault) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let address = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let upstream = upstream.to_owned();
        let task = tokio::spawn(async move {
            // Owned by the accept loop: aborting the proxy drops (and closes) every connection.
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((client, _)) = accepted else { return };
                        counter.fetch_add(1, Ordering::SeqCst);
                        connections.spawn(serve(client, upstream.clone(), fault.clone()));
                    }
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        Proxy { address, accepted, task }
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut client: TcpStream, upstream: String, fault: Fault) -> io::Result<()> {
    match fault {
        Fault::CloseOnAccept => Ok(()),
        Fault::Garbage => {
            read_frame(&mut client).await?;
            // A correct length prefix in front of bytes that are no Kafka response.
            let mut frame = 12u32.to_be_bytes().to_vec();
            frame.extend_from_slice(b"\xde\xad\xbe\xefnot kafka");
            client.write_all(&frame[..16]).await?;
            hold(client).await
        }
        Fault::OversizeLength => {
            read_frame(&mut client).await?;
            client.write_all(&0x7fff_ffffu32.to_be_bytes()).await?;
            hold(client).await
        }
        Fault::CloseMidFrame => {
            let mut broker = TcpStream::connect(&upstream).await?;
            let request = read_frame(&mut client).await?;
            broker.write_all(&request).await?;
            let response = read_frame(&mut broker).await?;
            client.write_all(&response[..response.len() / 2]).await?;
            Ok(())
        }
        Fault::SlowDrip(every) => {
            let broker = TcpStream::connect(&upstream).await?;
            let (mut from_broker, mut to_broker) = broker.into_split();
            let (mut from_client, mut to_client) = client.into_split();
            let requests = async move { tokio::io::copy(&mut from_client, &mut to_broker).await };
            let responses = async move {
                let mut buf = [0u8; 4096];
                loop {
                    let n = from_broker.read(&mut buf).await?;
                    if n == 0 {
                        return Ok::<_, io::Error>(());
                    }
                    for byte in &buf[..n] {
                        to_client.write_all(std::slice::from_ref(byte)).await?;
                        tokio::time::sleep(every).await;
                    }
                }
            };
            tokio::select! {
                r = requests => r.map(|_| ()),
                r = responses => r,
            }
        }
        Fault::Tls(config) => {
            let mut tls = tokio_rustls::TlsAcceptor::from(config).accept(client).await?;
            let mut broker = TcpStream::connect(&upstream).await?;
            tokio::io::copy_bidirectional(&mut tls, &mut broker).await.map(|_| ())
        }
    }
}

/// Reads one length-prefixed frame, prefix included.
async fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).await?;
    let len = u32::from_be_bytes(prefix) as usize;
    let mut frame = vec![0u8; 4 + len];
    frame[..4].copy_from_slice(&prefix);
    stream.read_exact(&mut frame[4..]).await?;
    Ok(frame)
}

/// Keeps the connection open until the client closes it.
async fn hold(mut client: TcpStream) -> io::Result<()> {
    let mut buf = [0u8; 1024];
    while client.read(&mut buf).await? > 0 {}
    Ok(())
}
