//! A TCP forwarder whose listener lives in a host's namespace and whose upstream
//! connections are made from the test's, so every forwarded byte crosses the veth.

use std::fs::File;
use std::io::{self, ErrorKind};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A running forwarder; dropping it closes its listener and every connection it carries.
#[derive(Debug)]
pub struct Forwarder {
    address: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    stop: AtomicBool,
    accepted: AtomicU64,
    open: Mutex<Vec<TcpStream>>,
}

/// Moves the calling thread into the network namespace `ns` (a file under /var/run/netns
/// or /proc/…/ns/net). Sockets created afterwards belong to it; so do threads it spawns.
fn enter(ns: &File) -> io::Result<()> {
    // SAFETY: setns on a valid descriptor affects only the calling thread.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Forwarder {
    pub(crate) fn start(namespace: &Path, listen: SocketAddr, upstream: SocketAddr) -> Result<Forwarder, String> {
        let host = File::open(namespace).map_err(|e| format!("{}: {e}", namespace.display()))?;
        let home = Arc::new(File::open("/proc/thread-self/ns/net").map_err(|e| format!("own namespace: {e}"))?);
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            accepted: AtomicU64::new(0),
            open: Mutex::new(Vec::new()),
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let state = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("forward-{listen}"))
            .spawn(move || {
                let listener = enter(&host).and_then(|()| TcpListener::bind(listen)).and_then(|l| {
                    l.set_nonblocking(true)?;
                    Ok(l)
                });
                match listener {
                    Ok(listener) => {
                        let _ = tx.send(Ok(()));
                        accept(&listener, upstream, &home, &state);
                    }
                    Err(e) => {
                        let _ = tx.send(Err(format!("listen on {listen} in {}: {e}", listen.ip())));
                    }
                }
            })
            .map_err(|e| format!("forwarder thread: {e}"))?;
        rx.recv().map_err(|_| "forwarder thread died".to_string())??;
        Ok(Forwarder { address: listen, shared, thread: Some(thread) })
    }

    /// Where it listens: the host's address and the port asked for.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::Relaxed)
    }
}

fn accept(listener: &TcpListener, upstream: SocketAddr, home: &Arc<File>, state: &Arc<Shared>) {
    while !state.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((client, _)) => {
                state.accepted.fetch_add(1, Ordering::Relaxed);
                let (home, state) = (Arc::clone(home), Arc::clone(state));
                // This thread is in the host's namespace; the new one goes home to connect.
                let _ = std::thread::Builder::new().name("forward-conn".into()).spawn(move || {
                    if enter(&home).is_ok() {
                        carry(client, upstream, &state);
                    }
                });
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn carry(client: TcpStream, upstream: SocketAddr, state: &Shared) {
    let _ = client.set_nonblocking(false);
    let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(5)) else {
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    if let Ok(mut open) = state.open.lock() {
        open.retain(|s| s.peer_addr().is_ok());
        for s in [&client, &server] {
            if let Ok(s) = s.try_clone() {
                open.push(s);
            }
        }
    }
    if state.stop.load(Ordering::Relaxed) {
        let _ = (client.shutdown(Shutdown::Both), server.shutdown(Shutdown::Both));
        return;
    }
    let back = std::thread::spawn(move || pipe(s2, c2));
    pipe(client, server);
    let _ = back.join();
}

/// Copies `from` to `to` until either side ends, then ends both.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if let Ok(open) = self.shared.open.lock() {
            for s in open.iter() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}
