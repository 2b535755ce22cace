//! A TCP forwarder whose listener lives in a host's namespace and whose upstream
//! connections are made from the test's, so every forwarded byte crosses the veth.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, ErrorKind};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
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
    /// The connections being carried, by number, so dropping the forwarder can end them.
    open: Mutex<HashMap<u64, [TcpStream; 2]>>,
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
            open: Mutex::new(HashMap::new()),
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
                let id = state.accepted.fetch_add(1, Ordering::Relaxed);
                let (home, state) = (Arc::clone(home), Arc::clone(state));
                // This thread is in the host's namespace; the new one goes home to connect.
                let _ = std::thread::Builder::new().name("forward-conn".into()).spawn(move || {
                    if enter(&home).is_ok() {
                        carry(id, client, upstream, &state);
                    }
                    state.open.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
                });
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn carry(id: u64, client: TcpStream, upstream: SocketAddr, state: &Shared) {
    let _ = client.set_nonblocking(false);
    let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(5)) else {
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    // A client that went away behind a blackhole never sends its FIN here: keepalive
    // probes end such a connection within seconds, as a broker's own keepalive would.
    keepalive(&client);
    keepalive(&server);
    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    if let (Ok(c3), Ok(s3)) = (client.try_clone(), server.try_clone()) {
        state.open.lock().unwrap_or_else(PoisonError::into_inner).insert(id, [c3, s3]);
    }
    if state.stop.load(Ordering::Relaxed) {
        let _ = (client.shutdown(Shutdown::Both), server.shutdown(Shutdown::Both));
        return;
    }
    let back = std::thread::spawn(move || pipe(s2, c2));
    pipe(client, server);
    let _ = back.join();
}

/// Probes an idle connection after 2 s, every second, and gives up after 3 unanswered.
fn keepalive(stream: &TcpStream) {
    let set = |level, name, value: libc::c_int| {
        // SAFETY: a valid descriptor and a c_int option value of the right size.
        unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    };
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 2);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 1);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3);
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
        let open = self.shared.open.lock().unwrap_or_else(PoisonError::into_inner);
        for s in open.values().flatten() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}
