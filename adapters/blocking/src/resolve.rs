//! Turning `host:port` into socket addresses without blocking the poll loop.
//!
//! `std` resolves names only by blocking (`getaddrinfo`), so an IP literal is parsed in place
//! and a host name is looked up on a helper thread that sends the answer back and wakes the
//! loop. A lookup cannot be interrupted: if its attempt is cancelled meanwhile, the thread
//! finishes on its own and its answer is dropped (the core's attempt timeout bounds how long
//! the attempt waits for it).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::Sender;
use std::sync::Arc;

use mio::Waker;
use stagger::AttemptId;

/// A lookup's answer, for the attempt that asked.
pub(crate) type Resolved = (AttemptId, io::Result<Vec<SocketAddr>>);

/// The addresses of `address` when it needs no lookup (an IPv4 or bracketed IPv6 literal).
pub(crate) fn literal(address: &str) -> Option<Vec<SocketAddr>> {
    address.parse::<SocketAddr>().ok().map(|addr| vec![addr])
}

/// Looks `address` up on a helper thread; its answer goes to `answers`, then `waker` wakes
/// the loop. A thread that cannot be started is answered at once, as a failed lookup.
pub(crate) fn spawn(attempt: AttemptId, address: Arc<str>, answers: Sender<Resolved>, waker: Arc<Waker>) {
    let (failed, wake) = (answers.clone(), waker.clone());
    let started = std::thread::Builder::new().name("stagger-resolve".into()).spawn(move || {
        let result = address.to_socket_addrs().map(Iterator::collect);
        // The loop may be gone (the refresh ended): then nobody needs the answer.
        if answers.send((attempt, result)).is_ok() {
            let _ = waker.wake();
        }
    });
    if let Err(e) = started {
        let _ = failed.send((attempt, Err(e)));
        let _ = wake.wake();
    }
}
