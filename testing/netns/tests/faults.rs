//! The fixture's faults do what they say, on a plain echo server behind a host.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use stagger_test_netns::{Fault, NetHost};

/// An echo server on loopback, answering each connection on a thread of its own.
fn echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                while let Ok(n @ 1..) = conn.read(&mut buf) {
                    if conn.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    address
}

/// One round trip through the host: connect, send a byte, read it back.
fn round_trip(to: SocketAddr, timeout: Duration) -> std::io::Result<Duration> {
    let start = Instant::now();
    let mut conn = TcpStream::connect_timeout(&to, timeout)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.write_all(b"x")?;
    let mut byte = [0u8; 1];
    conn.read_exact(&mut byte)?;
    Ok(start.elapsed())
}

#[test]
fn each_fault_changes_what_a_connection_through_the_host_sees() {
    if let Some(why) = NetHost::unavailable() {
        assert!(std::env::var_os("STAGGER_REQUIRE_NETNS").is_none(), "network namespaces required: {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let host = NetHost::create(0).expect("create a host");
    let forwarder = host.forward(9000, echo()).expect("forward");
    let to = forwarder.address();
    assert_eq!(to.ip(), host.address());
    let quick = Duration::from_millis(500);

    round_trip(to, quick).expect("a clear path answers");

    host.set(Fault::Blackhole).unwrap();
    let err = round_trip(to, quick).expect_err("a blackholed host never completes the handshake");
    assert!(matches!(err.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock), "{err:?}");

    host.set(Fault::Reject).unwrap();
    let err = round_trip(to, quick).expect_err("a rejecting host resets the connection");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err:?}");

    // A handshake and a one-byte exchange cross the path twice: at least twice the delay
    // less the jitter. (An upper bound would be a timing claim; the lower one cannot be beaten.)
    let delay = Duration::from_millis(40);
    host.set(Fault::Path { delay, jitter: Duration::from_millis(10), loss_percent: 0 }).unwrap();
    let took = round_trip(to, Duration::from_secs(5)).expect("a slow path still answers");
    assert!(took >= 2 * (delay - Duration::from_millis(10)), "{took:?}");

    // Every packet lost is a blackhole by another name.
    host.set(Fault::Path { delay: Duration::ZERO, jitter: Duration::ZERO, loss_percent: 100 }).unwrap();
    assert!(round_trip(to, quick).is_err(), "a path that loses every packet carries nothing");

    host.set(Fault::Clear).unwrap();
    round_trip(to, quick).expect("the path heals");
    assert!(forwarder.accepted() >= 3, "connections reached the host's forwarder");
}

#[test]
fn a_dropped_host_leaves_no_namespace_veth_or_chain_behind() {
    if NetHost::unavailable().is_some() {
        return;
    }
    let host = NetHost::create(1).expect("create a host");
    host.set(Fault::Blackhole).unwrap();
    let pid = std::process::id();
    drop(host);
    let netns = std::process::Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&netns.stdout).contains(&format!("stg{pid}h1")));
    let links = std::process::Command::new("ip").args(["link", "show"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&links.stdout).contains(&format!("sg{pid}r1")));
    let rules = std::process::Command::new("iptables").args(["-S"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&rules.stdout).contains(&format!("STG{pid}H1")));
}
