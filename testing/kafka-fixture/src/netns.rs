//! A real Kafka cluster whose brokers are reached through hosts of their own, each in a
//! network namespace with a forwarder in front of its broker ([`stagger_test_netns`]), so
//! the faults of those hosts' paths (blackhole, reject, loss, delay) fall on real Kafka
//! traffic. Each broker advertises its host's address, so metadata sends clients (and the
//! other brokers, whose replication then crosses the same paths) through the hosts too; the
//! controllers talk on loopback, so the quorum survives every fault.

use std::net::SocketAddr;

pub use stagger_test_netns::Fault;
use stagger_test_netns::{Forwarder, NetHost};

use crate::{free_base_port, KafkaCluster, Options};

/// The port every host's forwarder listens on (each host has an address of its own).
pub const HOST_PORT: u16 = 9092;

/// See the module docs. Field order is drop order: forwarders, then hosts, then brokers.
#[derive(Debug)]
pub struct NetCluster {
    forwarders: Vec<Forwarder>,
    hosts: Vec<NetHost>,
    kafka: KafkaCluster,
}

impl NetCluster {
    /// Hosts `first_host..first_host + brokers` of this process and a cluster behind them.
    /// `Ok(None)` when this machine cannot run Kafka (and the run does not require it);
    /// `Err` says why network namespaces are unavailable.
    pub fn start(brokers: u32, first_host: u8) -> Result<Option<NetCluster>, String> {
        if let Some(why) = NetHost::unavailable() {
            return Err(why);
        }
        let base = free_base_port(brokers);
        let mut hosts = Vec::new();
        let mut forwarders = Vec::new();
        for node in 0..brokers {
            let host = NetHost::create(first_host + node as u8)?;
            let broker = SocketAddr::from(([127, 0, 0, 1], base + 10 * node as u16));
            forwarders.push(host.forward(HOST_PORT, broker)?);
            hosts.push(host);
        }
        let advertised = forwarders.iter().map(|f| f.address().to_string()).collect();
        let options =
            Options { brokers, advertise_plaintext: Some(advertised), base_port: Some(base), ..Options::default() };
        Ok(KafkaCluster::start(&options).map(|kafka| NetCluster { forwarders, hosts, kafka }))
    }

    /// The cluster itself (process faults, the brokers' own loopback addresses).
    pub fn kafka(&self) -> &KafkaCluster {
        &self.kafka
    }

    /// Every broker's address through its host (`198.18.x.y:9092`), node 1 first.
    pub fn seeds(&self) -> Vec<String> {
        self.forwarders.iter().map(|f| f.address().to_string()).collect()
    }

    /// Node `node`'s host (1-based, as Kafka numbers nodes).
    pub fn host(&self, node: u32) -> &NetHost {
        &self.hosts[node as usize - 1]
    }

    /// Gives node `node`'s path `fault`.
    pub fn set(&self, node: u32, fault: Fault) {
        self.host(node).set(fault).unwrap_or_else(|e| panic!("node {node}: {e}"));
    }

    /// Clears every host's fault.
    pub fn heal(&self) {
        for host in &self.hosts {
            host.set(Fault::Clear).expect("clear a fault");
        }
    }

    /// Connections each host's forwarder accepted so far (clients and brokers alike).
    pub fn accepted(&self) -> Vec<u64> {
        self.forwarders.iter().map(Forwarder::accepted).collect()
    }
}
