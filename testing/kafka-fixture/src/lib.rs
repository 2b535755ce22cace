//! Real Apache Kafka for stagger's tests: clusters started by `scripts/kafka.sh`, faults made
//! with the broker processes themselves, and a TCP forwarder that re-points an address.
//!
//! * [`KafkaCluster::shared`]: the cluster of this test run. `scripts/test.sh` starts one
//!   before `cargo test` and names its directory in `STAGGER_KAFKA_DIR`; without that, the
//!   first test of a binary that asks starts one for the binary (its watchdog stops it when
//!   the binary exits). Tests that only read may share it.
//! * [`KafkaCluster::start`]: a cluster of the test's own, stopped when dropped, for tests
//!   that stop, kill or re-point brokers, or need another version.
//! * [`KafkaCluster::pause`] (`SIGSTOP`: the kernel still accepts TCP connections and nobody
//!   answers — a genuinely hung broker; `SIGCONT` when the guard drops, even if the test
//!   panics), [`KafkaCluster::kill`] (`SIGKILL`: connections are refused) and
//!   [`KafkaCluster::restart`] (the node comes back with its data).
//!
//! * [`librdkafka`]: topics created and metadata read by librdkafka's own client.
//!
//! A machine without Java or Maven cannot run brokers: the fixture then says so in one
//! sentence and returns `None`, so the test returns early — unless `STAGGER_REQUIRE_KAFKA=1`
//! (as in CI), where that is a failure.
#![warn(missing_docs)]

mod forwarder;
pub mod librdkafka;
pub mod netns;

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use forwarder::Forwarder;

/// The Kafka version every run tests against.
pub const DEFAULT_VERSION: &str = "4.4.0";
/// The older release line the negotiation tests also run (Metadata v12, ApiVersions v3).
pub const OLDER_VERSION: &str = "3.9.1";
/// The SASL user `scripts/kafka.sh` creates on every cluster.
pub const SASL_USERNAME: &str = "stagger";
/// That user's password (PLAIN and SCRAM alike).
pub const SASL_PASSWORD: &str = "stagger-secret";

/// An unsecured JWT (`alg: none`) for [`SASL_USERNAME`], valid for an hour: what the
/// `SASL_PLAINTEXT` listener's OAUTHBEARER validator (Kafka's test one) accepts.
pub fn unsecured_jwt() -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let claims = format!(r#"{{"sub":"{SASL_USERNAME}","iat":{now},"exp":{}}}"#, now + 3600);
    format!("{}.{}.", URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#), URL_SAFE_NO_PAD.encode(claims))
}

/// What cluster to start.
#[derive(Clone, Debug)]
pub struct Options {
    /// Apache Kafka version (a Maven version of `org.apache.kafka:kafka_2.13`).
    pub version: String,
    /// Number of nodes, each broker + controller.
    pub brokers: u32,
    /// Addresses node i advertises for PLAINTEXT instead of its own (see [`Forwarder`]).
    pub advertise_plaintext: Option<Vec<String>>,
    /// Addresses node i advertises for SASL_SSL instead of its own: forwarders that relay
    /// the TLS bytes to the broker's SASL_SSL port (the broker's certificate is for
    /// 127.0.0.1 and localhost, so a forwarder on 127.0.0.1 verifies). They must be
    /// listening before the cluster starts: its readiness check may be sent on to them.
    pub advertise_sasl_ssl: Option<Vec<String>>,
    /// First port of node 1 (node i's PLAINTEXT listener is `base + 10 (i - 1)`); `None`
    /// picks a free block. Set it (from [`free_base_port`]) when something must point at a
    /// broker before it starts, such as a forwarder it advertises.
    pub base_port: Option<u16>,
    /// `KEY=VALUE` lines added to every node's `server.properties` (`kafka.sh
    /// --broker-property`): a broker protection under test, such as
    /// `max.connection.creation.rate`.
    pub broker_properties: Vec<String>,
    /// Every broker logs each request it completes into a file of its own (`kafka.sh
    /// --request-log`; [`KafkaCluster::request_logs`]): what counts requests inside TLS,
    /// where a forwarder cannot read them.
    pub request_log: bool,
    /// CPUs every broker JVM runs on (`kafka.sh --cpus`, a `taskset -c` list such as `1`);
    /// `None` lets them run anywhere. A benchmark pins its clients elsewhere so that the
    /// two do not compete for the same cores.
    pub cpus: Option<String>,
}

impl Default for Options {
    /// Kafka [`DEFAULT_VERSION`], three brokers, advertising their own addresses, no
    /// request log, on any CPU.
    fn default() -> Self {
        Options {
            version: DEFAULT_VERSION.to_owned(),
            brokers: 3,
            advertise_plaintext: None,
            advertise_sasl_ssl: None,
            base_port: None,
            broker_properties: Vec::new(),
            request_log: false,
            cpus: None,
        }
    }
}

/// A running cluster, as `scripts/kafka.sh env` describes it.
#[derive(Debug)]
pub struct KafkaCluster {
    dir: PathBuf,
    env: BTreeMap<String, String>,
    /// Stopped when dropped (a test's own cluster; the shared one outlives every test).
    owned: bool,
}

/// A broker stopped with `SIGSTOP`; dropping the guard continues it (`SIGCONT`).
#[must_use = "the broker continues as soon as the guard is dropped"]
#[derive(Debug)]
pub struct Paused<'a> {
    cluster: &'a KafkaCluster,
    node: u32,
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.cluster.signal(self.node, libc::SIGCONT);
    }
}

impl KafkaCluster {
    /// The cluster of this test run (see the crate docs); `None` when this machine cannot
    /// run Kafka and the run does not require it.
    pub fn shared() -> Option<&'static KafkaCluster> {
        static SHARED: OnceLock<Option<KafkaCluster>> = OnceLock::new();
        SHARED
            .get_or_init(|| match std::env::var_os("STAGGER_KAFKA_DIR") {
                Some(dir) => Some(KafkaCluster::attach(PathBuf::from(dir))),
                None => KafkaCluster::launch(&Options::default(), false),
            })
            .as_ref()
    }

    /// Starts a cluster of the caller's own, stopped when the value is dropped; `None` when
    /// this machine cannot run Kafka and the run does not require it.
    pub fn start(options: &Options) -> Option<KafkaCluster> {
        KafkaCluster::launch(options, true)
    }

    /// The Kafka version the brokers run.
    pub fn version(&self) -> &str {
        self.var("KAFKA_VERSION")
    }

    /// Number of brokers (node ids are 1 to this).
    pub fn brokers(&self) -> u32 {
        self.var("KAFKA_BROKERS").parse().expect("KAFKA_BROKERS is a number")
    }

    /// The cluster id the storage was formatted with.
    pub fn cluster_id(&self) -> &str {
        self.var("KAFKA_CLUSTER_ID")
    }

    /// `127.0.0.1:port` of every broker's PLAINTEXT listener, in node order.
    pub fn plaintext(&self) -> Vec<String> {
        self.list("KAFKA_PLAINTEXT")
    }

    /// Every broker's SSL listener, in node order (certificates from [`KafkaCluster::ca`]).
    pub fn ssl(&self) -> Vec<String> {
        self.list("KAFKA_SSL")
    }

    /// Every broker's SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
    pub fn sasl_plaintext(&self) -> Vec<String> {
        self.list("KAFKA_SASL_PLAINTEXT")
    }

    /// Every broker's SASL_SSL listener.
    pub fn sasl_ssl(&self) -> Vec<String> {
        self.list("KAFKA_SASL_SSL")
    }

    /// The PEM file of the CA that signed the brokers' certificates.
    pub fn ca(&self) -> PathBuf {
        PathBuf::from(self.var("KAFKA_CA"))
    }

    /// Every broker's request log, in node order, when the cluster was started with
    /// [`Options::request_log`]: one line per request the broker completed, `EPOCH_MS
    /// Completed request:{json}` (Kafka's `kafka.request.logger` at DEBUG; the JSON names
    /// the request header, listener and timings). A restarted node appends to its file.
    pub fn request_logs(&self) -> Option<Vec<PathBuf>> {
        let files = self.env.get("KAFKA_REQUEST_LOGS").filter(|v| !v.is_empty())?;
        Some(files.split(',').map(PathBuf::from).collect())
    }

    /// Node `node`'s PLAINTEXT address.
    pub fn address(&self, node: u32) -> String {
        self.plaintext()[node as usize - 1].clone()
    }

    /// The process id of node `node`'s broker now (it changes with [`KafkaCluster::restart`]).
    pub fn pid(&self, node: u32) -> i32 {
        let file = self.dir.join(format!("node-{node}/pid"));
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        text.trim().parse().unwrap_or_else(|e| panic!("{}: {e}", file.display()))
    }

    /// Stops node `node` with `SIGSTOP` until the guard drops: TCP connections are still
    /// accepted by the kernel, and nothing answers on them.
    ///
    /// Returns once every thread of the broker is stopped: `kill` only queues the signal, and a
    /// thread busy on another core could otherwise still answer a request sent right after.
    pub fn pause(&self, node: u32) -> Paused<'_> {
        let pid = self.pid(node);
        self.signal(node, libc::SIGSTOP);
        let until = Instant::now() + Duration::from_secs(30);
        while !is_stopped(pid) {
            assert!(Instant::now() < until, "node {node} (pid {pid}) did not stop on SIGSTOP");
            std::thread::sleep(Duration::from_millis(5));
        }
        Paused { cluster: self, node }
    }

    /// Kills node `node` with `SIGKILL` and waits until it is gone: connections to it are
    /// refused until [`KafkaCluster::restart`].
    pub fn kill(&self, node: u32) {
        let pid = self.pid(node);
        self.signal(node, libc::SIGKILL);
        let until = Instant::now() + Duration::from_secs(30);
        while is_alive(pid) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!is_alive(pid), "node {node} (pid {pid}) survived SIGKILL");
        // The last of its threads closes its listeners, possibly after the process looks
        // gone: wait until a connection is refused, which is what the test is about.
        let address = self.address(node);
        while TcpStream::connect(&address).is_ok() {
            assert!(Instant::now() < until, "node {node}'s {address} still accepts after SIGKILL");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts node `node` again (killing it first if it runs) and waits until it serves
    /// metadata. Blocks for the broker's start, several seconds.
    pub fn restart(&self, node: u32) {
        let dir = self.dir.to_string_lossy().into_owned();
        run_script(&["restart", "--node", &node.to_string(), "--dir", &dir]);
    }

    fn launch(options: &Options, owned: bool) -> Option<KafkaCluster> {
        if let Some(missing) = missing_tools() {
            if std::env::var("STAGGER_REQUIRE_KAFKA").as_deref() == Ok("1") {
                panic!("{missing}, and STAGGER_REQUIRE_KAFKA=1 requires the real-Kafka tests to run");
            }
            eprintln!("real-Kafka test skipped: {missing}");
            return None;
        }
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("stagger-kafka-{}-{n}", std::process::id()));
        let base = options.base_port.unwrap_or_else(|| free_base_port(options.brokers));
        let mut args = vec![
            "start".to_owned(),
            "--version".to_owned(),
            options.version.clone(),
            "--brokers".to_owned(),
            options.brokers.to_string(),
            "--dir".to_owned(),
            dir.to_string_lossy().into_owned(),
            "--base-port".to_owned(),
            base.to_string(),
            // Stops by itself as soon as this test binary exits, however it exits.
            "--owner".to_owned(),
            std::process::id().to_string(),
        ];
        if let Some(addresses) = &options.advertise_plaintext {
            args.extend(["--advertise-plaintext".to_owned(), addresses.join(",")]);
        }
        if let Some(addresses) = &options.advertise_sasl_ssl {
            args.extend(["--advertise-sasl-ssl".to_owned(), addresses.join(",")]);
        }
        if options.request_log {
            args.push("--request-log".to_owned());
        }
        if let Some(cpus) = &options.cpus {
            args.extend(["--cpus".to_owned(), cpus.clone()]);
        }
        for property in &options.broker_properties {
            args.extend(["--broker-property".to_owned(), property.clone()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env = parse_env(&run_script(&args));
        Some(KafkaCluster { dir, env, owned })
    }

    /// A cluster somebody else started and left running (`scripts/test.sh`).
    fn attach(dir: PathBuf) -> KafkaCluster {
        let env = std::fs::read_to_string(dir.join("cluster.env")).ok().filter(|_| dir.join("ready").exists());
        let Some(env) = env else {
            panic!(
                "STAGGER_KAFKA_DIR={} names no running cluster (start one with `bash scripts/kafka.sh start --dir {0}`, \
                 or unset it to let the tests start their own)",
                dir.display()
            );
        };
        KafkaCluster { env: parse_env(&env), dir, owned: false }
    }

    fn var(&self, key: &str) -> &str {
        self.env.get(key).unwrap_or_else(|| panic!("kafka.sh env printed no {key}"))
    }

    fn list(&self, key: &str) -> Vec<String> {
        self.var(key).split(',').map(str::to_owned).collect()
    }

    /// Whether `pid` is still one of this cluster's brokers (never signal a recycled pid).
    fn is_ours(&self, pid: i32) -> bool {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
            let needle = self.dir.to_string_lossy();
            String::from_utf8_lossy(&cmdline).contains(needle.as_ref())
        })
    }

    fn signal(&self, node: u32, signal: libc::c_int) {
        let pid = self.pid(node);
        assert!(self.is_ours(pid), "node {node}'s pid {pid} is not a broker of {}", self.dir.display());
        // SAFETY: kill(2) has no memory-safety preconditions; the pid was checked above.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({pid}, {signal}): {}", std::io::Error::last_os_error());
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        if self.owned {
            let dir = self.dir.to_string_lossy().into_owned();
            run_script(&["stop", "--dir", &dir]);
        }
    }
}

/// Whether `pid` has not finished exiting (it is neither gone nor a zombie).
fn is_alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

/// Whether every thread of `pid` is stopped by a signal (state `T`), per `/proc/PID/task`.
fn is_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('T')))
    })
}

/// Why this machine cannot run the brokers, if it cannot.
fn missing_tools() -> Option<String> {
    let missing: Vec<&str> = ["java", "mvn"]
        .into_iter()
        .filter(|tool| !Command::new(tool).arg("-version").output().is_ok_and(|o| o.status.success()))
        .collect();
    match missing[..] {
        [] => None,
        _ => Some(format!(
            "Apache Kafka brokers need Java 17+ and Maven, and this machine lacks {}",
            missing.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(" and ")
        )),
    }
}

/// Runs `scripts/kafka.sh` with `args`; returns its standard output, passes its report on.
fn run_script(args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kafka.sh");
    let output = Command::new("bash").arg(&script).args(args).output().expect("run bash scripts/kafka.sh");
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        panic!("scripts/kafka.sh {} failed ({}):\n{stderr}", args.join(" "), output.status);
    }
    if !stderr.trim().is_empty() {
        eprintln!("{}", stderr.trim_end());
    }
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines().filter_map(|line| line.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

/// Clusters and port blocks handed out by this process (each its own directory and ports).
static STARTED: AtomicU32 = AtomicU32::new(0);

/// A base port under Linux's ephemeral range whose 10 ports per broker are all free now.
/// Every call of a process starts from its own slot, so clusters started at once by one test
/// binary do not pick the same block before either has bound it.
pub fn free_base_port(brokers: u32) -> u16 {
    let n = STARTED.fetch_add(1, Ordering::Relaxed);
    let seed = std::process::id().wrapping_mul(7919).wrapping_add(n.wrapping_mul(50));
    for attempt in 0..200u32 {
        let slot = seed.wrapping_add(attempt.wrapping_mul(104_729)) % 1_100;
        let base = 20_000 + slot * 10;
        let free = (0..10 * brokers).all(|offset| TcpListener::bind(("127.0.0.1", (base + offset) as u16)).is_ok());
        if free {
            return base as u16;
        }
    }
    panic!("no free block of {} ports on 127.0.0.1 between 20000 and 31000", 10 * brokers);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A malformed `--broker-property` is refused before anything starts, with a message
    /// that names it.
    #[test]
    fn a_malformed_broker_property_is_refused_by_name() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kafka.sh");
        let dir = std::env::temp_dir().join(format!("stagger-kafka-refused-{}", std::process::id()));
        for bad in ["Max.Rate=1", "no-value=", "spaced=a b", "novalue"] {
            let output = Command::new("bash")
                .arg(&script)
                .args(["start", "--dir", &dir.to_string_lossy(), "--broker-property", bad])
                .output()
                .expect("run bash scripts/kafka.sh");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(!output.status.success(), "{bad}: {stderr}");
            assert!(stderr.contains("--broker-property needs KEY=VALUE") && stderr.contains(bad), "{bad}: {stderr}");
        }
        assert!(!dir.exists(), "nothing was started");
    }

    /// A malformed `--advertise-plaintext` or `--advertise-sasl-ssl` (not exactly one
    /// host:port per broker) is refused before anything starts, with a message that names
    /// the flag and the list.
    #[test]
    fn a_malformed_advertised_list_is_refused_by_name() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kafka.sh");
        let dir = std::env::temp_dir().join(format!("stagger-kafka-refused-advertised-{}", std::process::id()));
        let bad = [
            "127.0.0.1:1,127.0.0.1:2",
            "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3,127.0.0.1:4",
            "127.0.0.1:1,127.0.0.1:2,127.0.0.1",
            "127.0.0.1:1,,127.0.0.1:3",
            "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3,",
            "127.0.0.1:1,127.0.0.1:2,127.0.0.1:x",
        ];
        for flag in ["--advertise-plaintext", "--advertise-sasl-ssl"] {
            for list in bad {
                let output = Command::new("bash")
                    .arg(&script)
                    .args(["start", "--brokers", "3", "--dir", &dir.to_string_lossy(), flag, list])
                    .output()
                    .expect("run bash scripts/kafka.sh");
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert!(!output.status.success(), "{flag} {list}: {stderr}");
                let named = format!("{flag} needs one host:port per broker (3)");
                assert!(stderr.contains(&named) && stderr.contains(list), "{flag} {list}: {stderr}");
            }
        }
        assert!(!dir.exists(), "nothing was started");
    }
}
