//! A host in a network namespace of its own, and the faults its path can be given.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::command::{quietly, run};
use crate::delay::Delayer;
use crate::forward::Forwarder;

/// What the path between the test and a [`NetHost`] does to packets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// Every packet passes.
    Clear,
    /// A slow, lossy path: each packet to the host waits `delay` ± `jitter` (uniform), and
    /// `loss_percent` of the packets either way are dropped.
    Path {
        /// How long each packet to the host waits, on average.
        delay: Duration,
        /// How far each packet's wait may be from `delay`, either way.
        jitter: Duration,
        /// The share of packets dropped, 0–100.
        loss_percent: u8,
    },
    /// Every packet either way vanishes: SYNs go unanswered, established connections stall
    /// (a dead host, a firewall that drops, a partition).
    Blackhole,
    /// Every TCP packet to the host is answered with a reset (a host up with nothing
    /// listening, a firewall that rejects); established connections are reset.
    Reject,
}

/// A network namespace joined to the test's by a veth pair (see the crate docs).
#[derive(Debug)]
pub struct NetHost {
    name: String,
    veth: String,
    chain: String,
    address: Ipv4Addr,
    queue: u16,
    fault: Mutex<(Fault, Option<Delayer>)>,
}

impl NetHost {
    /// `None` when this machine can make hosts; otherwise why not, in one line.
    ///
    /// The answer is worked out once per process: tests of one binary ask at the same time,
    /// and one probe namespace per process keeps them from tripping over each other's.
    pub fn unavailable() -> Option<String> {
        static ANSWER: OnceLock<Option<String>> = OnceLock::new();
        ANSWER.get_or_init(Self::probe).clone()
    }

    fn probe() -> Option<String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Some("network namespaces need root".into());
        }
        for tool in ["ip", "iptables"] {
            if run(tool, &["-V"]).is_err() {
                return Some(format!("`{tool}` is not installed (scripts/setup.sh installs it)"));
            }
        }
        let probe = format!("stg{}probe", std::process::id());
        let made = run("ip", &["netns", "add", &probe]);
        quietly("ip", &["netns", "delete", &probe]);
        made.err().map(|e| format!("cannot create a network namespace: {e}"))
    }

    /// Creates host `index` (0–63) of this process: namespace, veth pair, addresses, and an
    /// empty firewall chain on the test's side of the veth.
    pub fn create(index: u8) -> Result<NetHost, String> {
        assert!(index < 64, "at most 64 hosts per process");
        let pid = std::process::id();
        cleanup::arm();
        // 198.18.0.0/15 is reserved for benchmarking networks (RFC 2544): never a real one.
        let (second, third) = (18 + (pid / 256 % 2) as u8, (pid % 256) as u8);
        let root_side = Ipv4Addr::new(198, second, third, index * 4 + 1);
        let address = Ipv4Addr::new(198, second, third, index * 4 + 2);
        let host = NetHost {
            name: format!("stg{pid}h{index}"),
            veth: format!("sg{pid}r{index}"),
            chain: format!("STG{pid}H{index}"),
            address,
            queue: (pid % 1000) as u16 * 64 + u16::from(index),
            fault: Mutex::new((Fault::Clear, None)),
        };
        let peer = format!("sg{pid}n{index}");
        let (root_cidr, host_cidr) = (format!("{root_side}/30"), format!("{address}/30"));
        let steps: [&[&str]; 8] = [
            &["netns", "add", &host.name],
            &["link", "add", &host.veth, "type", "veth", "peer", "name", &peer],
            &["link", "set", &peer, "netns", &host.name],
            &["addr", "add", &root_cidr, "dev", &host.veth],
            &["link", "set", &host.veth, "up"],
            &["-n", &host.name, "addr", "add", &host_cidr, "dev", &peer],
            &["-n", &host.name, "link", "set", &peer, "up"],
            &["-n", &host.name, "link", "set", "lo", "up"],
        ];
        cleanup::register(&host.name, &host.veth, &host.chain);
        for step in steps {
            // On failure `host` is dropped, which removes whatever was made so far.
            run("ip", step)?;
        }
        run("iptables", &["-N", &host.chain])?;
        run("iptables", &["-I", "OUTPUT", "-o", &host.veth, "-j", &host.chain])?;
        run("iptables", &["-I", "INPUT", "-i", &host.veth, "-j", &host.chain])?;
        Ok(host)
    }

    /// The host's own address.
    pub fn address(&self) -> Ipv4Addr {
        self.address
    }

    /// Listens on the host's `port` and carries each connection to `upstream` (on the
    /// test's side), so that connection crosses this host's faults.
    pub fn forward(&self, port: u16, upstream: SocketAddr) -> Result<Forwarder, String> {
        Forwarder::start(&self.namespace_path(), SocketAddr::from((self.address, port)), upstream)
    }

    /// The fault the path has now.
    pub fn fault(&self) -> Fault {
        self.fault.lock().unwrap().0
    }

    /// Gives the path `fault`, replacing the one it had; effective for the next packet.
    pub fn set(&self, fault: Fault) -> Result<(), String> {
        let mut current = self.fault.lock().unwrap();
        run("iptables", &["-F", &self.chain])?;
        quietly("tc", &["qdisc", "del", "dev", &self.veth, "root"]);
        current.1 = None;
        current.0 = Fault::Clear;
        let chain = self.chain.as_str();
        match fault {
            Fault::Clear => {}
            Fault::Blackhole => run("iptables", &["-A", chain, "-j", "DROP"])?,
            Fault::Reject => {
                let reset = ["-A", chain, "-o", &self.veth, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"];
                run("iptables", &reset)?;
                run("iptables", &["-A", chain, "-i", &self.veth, "-j", "DROP"])?;
            }
            Fault::Path { delay, jitter, loss_percent } => {
                if self.netem(delay, jitter, loss_percent).is_err() {
                    if loss_percent > 0 {
                        let p = format!("{:.4}", f64::from(loss_percent.min(100)) / 100.0);
                        let lose =
                            ["-A", chain, "-m", "statistic", "--mode", "random", "--probability", &p, "-j", "DROP"];
                        run("iptables", &lose)?;
                    }
                    if !delay.is_zero() || !jitter.is_zero() {
                        current.1 = Some(Delayer::start(self.queue, delay, jitter, u64::from(self.queue))?);
                        let q = self.queue.to_string();
                        let queue =
                            ["-A", chain, "-o", &self.veth, "-j", "NFQUEUE", "--queue-num", &q, "--queue-bypass"];
                        run("iptables", &queue)?;
                    }
                }
            }
        }
        current.0 = fault;
        Ok(())
    }

    /// `tc netem` on the test's side of the veth, where the kernel has it.
    fn netem(&self, delay: Duration, jitter: Duration, loss_percent: u8) -> Result<(), String> {
        let (d, j) = (format!("{}us", delay.as_micros()), format!("{}us", jitter.as_micros()));
        let loss = format!("{loss_percent}%");
        let args = ["qdisc", "replace", "dev", &self.veth, "root", "netem", "delay", &d, &j, "loss", &loss];
        // netem delays egress only, so its loss covers one direction; that is what `tc` users
        // mean by it too.
        run("tc", &args)
    }

    fn namespace_path(&self) -> PathBuf {
        PathBuf::from("/var/run/netns").join(&self.name)
    }
}

impl Drop for NetHost {
    fn drop(&mut self) {
        if let Ok(mut fault) = self.fault.lock() {
            fault.1 = None;
        }
        remove(&self.name, &self.veth, &self.chain);
        cleanup::unregister(&self.name);
    }
}

/// Removes a host's chain, veth and namespace, whichever of them exist.
fn remove(name: &str, veth: &str, chain: &str) {
    quietly("iptables", &["-D", "OUTPUT", "-o", veth, "-j", chain]);
    quietly("iptables", &["-D", "INPUT", "-i", veth, "-j", chain]);
    quietly("iptables", &["-F", chain]);
    quietly("iptables", &["-X", chain]);
    // Deleting the namespace deletes the veth end inside it, and with it the pair.
    quietly("ip", &["link", "delete", veth]);
    quietly("ip", &["netns", "delete", name]);
}

/// Hosts that outlive their test: kept in statics (never dropped), or left by a run that
/// was killed. The first host of a process sweeps what dead processes left behind and arms
/// an exit handler that removes this process's own.
mod cleanup {
    use std::sync::{Mutex, Once};

    static LIVE: Mutex<Vec<(String, String, String)>> = Mutex::new(Vec::new());

    pub(super) fn arm() {
        static ARMED: Once = Once::new();
        ARMED.call_once(|| {
            sweep_dead();
            // SAFETY: registering a plain `extern "C" fn` with no captured state.
            unsafe { libc::atexit(at_exit) };
        });
    }

    pub(super) fn register(name: &str, veth: &str, chain: &str) {
        LIVE.lock().unwrap().push((name.into(), veth.into(), chain.into()));
    }

    pub(super) fn unregister(name: &str) {
        LIVE.lock().unwrap().retain(|(n, _, _)| n != name);
    }

    extern "C" fn at_exit() {
        let live = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|e| e.into_inner()));
        for (name, veth, chain) in live {
            super::remove(&name, &veth, &chain);
        }
    }

    /// Hosts named `stg<pid>h<i>` whose process no longer runs.
    fn sweep_dead() {
        let Ok(out) = std::process::Command::new("ip").args(["netns", "list"]).output() else { return };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            let Some((pid, index)) = name.strip_prefix("stg").and_then(|rest| rest.split_once('h')) else { continue };
            if pid.parse::<u32>().is_err() || index.parse::<u8>().is_err() {
                continue;
            }
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                super::remove(name, &format!("sg{pid}r{index}"), &format!("STG{pid}H{index}"));
            }
        }
    }
}
