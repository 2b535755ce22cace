//! Hosts with real network faults, for tests that must see what a lossy or broken network
//! does to a refresh rather than what a fake broker pretends.
//!
//! A [`NetHost`] is a network namespace of its own joined to the test's namespace by a veth
//! pair, with an address of its own (`10.<a>.<b>.2`). A [`Forwarder`] listens inside it and
//! carries each connection to a broker on the test's loopback, so every byte between a client
//! and that broker crosses the veth, where [`NetHost::set`] applies a [`Fault`]: a blackhole
//! (every packet dropped), a reject (TCP reset), packet loss, and delay with jitter — with
//! `tc netem` where the kernel has it, otherwise by queueing the packets to userspace
//! (NFQUEUE) and releasing each after its delay, which is the same fault on the same packets.
//!
//! Everything a host creates (namespace, veth, firewall chain, delay queue, forwarder
//! threads) is removed when it is dropped, and the names carry the process id, so test
//! binaries running side by side do not collide and a crashed run's leftovers are
//! recognisable (`ip netns list | grep stg`). Needs root, iproute2 and iptables;
//! [`NetHost::unavailable`] says why a machine cannot, in one line.
#![warn(missing_docs)]

mod command;
mod delay;
mod forward;
mod host;

pub use forward::Forwarder;
pub use host::{Fault, NetHost};
