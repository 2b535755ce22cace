//! The JSON file `fleet_real` writes and `fleet_fit` reads: one real fleet's settings, the
//! cluster's calibration, the prices fitted from it, and every scenario × strategy run.
//!
//! Field names are the file's keys. What only SASL_SSL runs measure is in the `secured` parts
//! (their keys sit beside the others and are absent over PLAINTEXT); a count a SASL_SSL run
//! cannot make is `null` (`None`). The committed runs in `docs/performance/real/` are parsed
//! by this module's tests.

mod calibration;
mod fit;

pub use calibration::{Burst, Calibration, Churn, Fresh, HandshakeTimes, Idle, SecuredCalibration, Spread, ThreadCpu};
pub use fit::{Fit, SecuredFit};

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use stagger_sim::fleet::Percentiles;

/// Everything one `fleet_real` invocation measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetFile {
    /// The listener the fleet connected through: `plaintext` or `sasl_ssl`.
    #[serde(default = "plaintext")]
    pub listener: String,
    /// The machine: cores and memory, e.g. `2 cores, 24 GiB`.
    #[serde(default)]
    pub machine: String,
    /// The Apache Kafka version the cluster ran.
    #[serde(default)]
    pub kafka_version: String,
    /// Brokers in the cluster.
    pub brokers: u32,
    /// Clients in the fleet.
    pub clients: u32,
    /// Calm refreshes per client before each scenario (a fixed stagger uses at most 2).
    pub warmup_refreshes: u32,
    /// Mean time between a client's warm-up refreshes (ms).
    pub warmup_spacing_ms: f64,
    /// Pause between the warm-up and the incident (ms).
    pub settle_ms: f64,
    /// Window the `healthy` and `one_hung` refreshes are spread over (ms).
    pub request_window_ms: f64,
    /// Window the `failover_storm` refreshes are spread over (ms).
    pub storm_window_ms: f64,
    /// Sliding window of the peak request count (ms).
    pub peak_window_ms: f64,
    /// Seed of the clients' randomness and the schedules.
    pub seed: u64,
    /// The broker (node id, from 1) hung or killed.
    pub failed_node: u32,
    /// `KEY=VALUE` lines every broker ran with beside the defaults (`--broker-property`): a
    /// broker protection under test, such as KIP-612's `max.connection.creation.rate`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broker_properties: Vec<String>,
    /// KIP-612's connection creation rate every broker ran with while each storm ran
    /// (`--storm-connection-rate`; none: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storm_connection_rate: Option<f64>,
    /// The CPUs the brokers ran on (`--broker-cpus`, a `taskset -c` list; none: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_cpus: Option<String>,
    /// The CPUs the clients and forwarders could run on (this process's
    /// `Cpus_allowed_list`), when they were fewer than the machine's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpus: Option<String>,
    /// Whether each client's bootstrap said a failover was likely (`--gentle-bootstrap`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gentle_bootstrap: bool,
    /// Over SASL_SSL: what counted the requests and connections (a sentence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_counted_by: Option<String>,
    /// What the calibration measured before the runs.
    pub calibration: Calibration,
    /// The simulator's prices fitted from the calibration and the runs' warm-ups.
    pub fit: Fit,
    /// One per scenario × strategy, in the order they ran.
    pub runs: Vec<Run>,
    /// The whole invocation's time, cluster start included (s).
    pub took_s: f64,
}

fn plaintext() -> String {
    "plaintext".into()
}

impl FleetFile {
    /// Reads and parses the file at `path`.
    pub fn read(path: &Path) -> Result<FleetFile, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// The `fleet_real` files kept in `docs/performance/real/`, sorted by name (for the tests of
/// the programs that write and read them).
pub fn committed() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/performance/real");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
}

/// One scenario under one strategy: a fresh fleet's warm-up, the incident, every client's
/// refresh, and what the brokers received.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// `healthy`, `one_hung` or `failover_storm`.
    pub scenario: String,
    /// The refresh strategy, e.g. `adaptive` or `sequential`.
    pub strategy: String,
    /// Window the measured refreshes were spread over (ms).
    pub window_ms: f64,
    /// Calm refreshes per client before the incident.
    pub warmup_refreshes: u32,
    /// Warm-up refreshes that failed or gave up, over all clients.
    pub warmup_failed: u32,
    /// Measured refreshes (one per client).
    pub refreshes: usize,
    /// Measured refreshes that failed or gave up (after 90 s).
    pub failed: usize,
    /// The first few failures' messages.
    pub errors: Vec<String>,
    /// Time to metadata, from the call to its return (ms; `None` where a percentile lands
    /// on a refresh that failed).
    #[serde(flatten)]
    pub time_to_metadata: Percentiles,
    /// Attempts of the measured refreshes (`Client::stats`), over all clients.
    pub attempts: u64,
    /// `attempts` per refresh.
    pub attempts_per_refresh: f64,
    /// The fleet's Metadata requests the brokers received during the run.
    pub requests: usize,
    /// `requests` per refresh.
    pub requests_per_refresh: f64,
    /// The most Metadata requests one broker received within any 100 ms (sliding).
    pub peak_requests: usize,
    /// The broker (node id, from 1) that received `peak_requests`; 0 if none did.
    pub peak_broker: usize,
    /// The most Metadata requests one broker received within a fixed 100 ms bucket.
    pub peak_requests_fixed_buckets: u32,
    /// The fleet's Metadata requests per broker (node order).
    pub requests_per_broker: Vec<usize>,
    /// The fleet's ApiVersions requests per broker; `None` over SASL_SSL, where the
    /// pre-authentication ones are not logged.
    pub api_versions_per_broker: Option<Vec<usize>>,
    /// Connections the forwarders accepted per broker.
    pub connections_per_broker: Vec<usize>,
    /// Requests never answered per broker (a hung broker's); `None` over SASL_SSL, where a
    /// broker logs only what it answered.
    pub unanswered_requests_per_broker: Option<Vec<usize>>,
    /// Each broker's time per Metadata request of the fleet during the run (µs).
    pub broker_metadata_time: Vec<Spread>,
    /// Each broker's time per ApiVersions request of the fleet during the run (µs).
    pub broker_api_versions_time: Vec<Spread>,
    /// Each broker's time per Metadata request of the fleet during the calm warm-up (µs).
    pub warmup_broker_metadata_time: Vec<Spread>,
    /// Each broker's time per ApiVersions request of the fleet during the calm warm-up (µs).
    pub warmup_broker_api_versions_time: Vec<Spread>,
    /// Per broker, the fleet's Metadata requests in each fixed 100 ms bucket from the start.
    pub metadata_per_100ms: Vec<Vec<u32>>,
    /// Every measured refresh, by client.
    pub refresh_list: Vec<RefreshEntry>,
    /// Beside each of `refresh_list`, in its order: why it ran, what it opened and where its
    /// winner's time went; absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_details: Option<Vec<RefreshDetail>>,
    /// Over SASL_SSL: what the forwarders saw of TLS and the request logs of ApiVersions.
    #[serde(flatten)]
    pub secured: Option<SecuredCounts>,
    /// Per broker, the clients whose kept connection was to it when the incident came.
    pub kept_before_per_broker: Vec<usize>,
    /// Per broker, the clients whose kept connection led there after their bootstrap (read
    /// before their second warm-up refresh); absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leads_after_bootstrap_per_broker: Option<Vec<usize>>,
    /// Clients whose lead was their first seed: after the bootstrap, and when the incident
    /// came; absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leads_on_first_seed: Option<[usize; 2]>,
    /// Whether each client's lead stayed on the broker its bootstrap tried first (its own
    /// choice, seeds shuffled or not); absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_first_choice: Option<FirstChoiceCounts>,
    /// Per broker, those of `kept_before_per_broker` that also held a spare connection
    /// (`ClientStats::kept_connections` > 1); absent in files written before it was counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spares_by_lead_before: Option<Vec<usize>>,
    /// Spare connections the warm-up left, over all clients (`ClientStats::spares_kept`):
    /// connections of losing attempts kept beside the winner's.
    pub spares_kept_before: u64,
    /// Connections every client held when the incident came, over all clients
    /// (`ClientStats::kept_connections`: the lead's and the spares); absent in files written
    /// before it was counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_connections_before: Option<u64>,
    /// Attempts that reused a kept connection during the run (`ClientStats::connections_reused`).
    pub connections_reused_during: u64,
    /// The machine's 1-minute load average before the refreshes.
    pub loadavg_before: Option<f64>,
    /// The machine's 1-minute load average after the refreshes.
    pub loadavg_after: Option<f64>,
    /// Share of the machine's cores busy during the refreshes (0 to 1; everyone's work).
    pub cpu_busy: Option<f64>,
    /// Each broker's own CPU time (user + system, from `/proc`) while the fleet refreshed,
    /// from just before the first refresh to the end of the grace after the last (ms); a
    /// killed broker's while it ran. Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_cpu_ms: Option<Vec<f64>>,
    /// Each broker's most CPU time within any 100 ms of the same span (ms; read every 10 ms,
    /// the kernel's tick). Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_cpu_peak_ms_per_100ms: Option<Vec<f64>>,
    /// Each broker's CPU time over the same span by the kind of thread that spent it (ms, from
    /// the threads' `schedstat`; zeros for a broker not running at either end). Absent in
    /// older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_threads_cpu_ms: Option<Vec<ThreadCpu>>,
    /// Each broker's CPU by the kind of thread over the fleet's cold start: from the
    /// warm-up's start until one second after the last client's first refresh began (ms;
    /// some clients' second refreshes, calm ones on kept connections, fall in it too). What
    /// the bootstrap's handshakes cost the brokers, the JIT's work included. Absent in older
    /// files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_start_broker_threads_cpu_ms: Option<Vec<ThreadCpu>>,
    /// New connections the clients opened over the same span (`ClientStats::connections_opened`).
    /// Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_start_connections: Option<u64>,
    /// The p50 and p99 of the clients' bootstraps (their first refresh, in the warm-up), in
    /// ms, over those answered. Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_ms: Option<[f64; 2]>,
    /// CPU time of the process that ran the clients (and, in `fleet_real`, the forwarders
    /// relaying their bytes) from just before the first refresh to the last one's end (ms):
    /// what the clients' side took from the cores the brokers share. Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_ms: Option<f64>,
    /// The seed this turn's clients, warm-up and schedule drew from, when it is not the
    /// file's (`fleet_real --reseed-turns`: each turn draws its own placement and choices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// Where the clients' leads stood against the broker each client's bootstrap tried first:
/// a client whose first choice's handshake was merely queued should stay there
/// (`Cluster::keep_first_choice`), so the fleet stays spread as its seeds were.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FirstChoiceCounts {
    /// Bootstraps that tried more than one broker.
    pub bootstraps_hedged: usize,
    /// Leads on the first choice after the bootstrap: `[one broker tried, more tried]`.
    pub on_choice_after_bootstrap: [usize; 2],
    /// The same when the incident came.
    pub on_choice_before_incident: [usize; 2],
    /// The clients off their first choice when the incident came, by how many brokers their
    /// bootstrap tried and how its first attempt ended; absent in the first files that
    /// counted first choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_choice_before_incident: Option<std::collections::BTreeMap<String, usize>>,
    /// Leads the warm-up's calm refreshes moved (the broker kept after a refresh not the
    /// one kept before it), by the refresh's number in the warm-up (the bootstrap is 0), how
    /// many attempts it started, how the attempt on the lead it left ended, how the winner
    /// reached its broker and whether the lead left was the bootstrap's; and the clients
    /// found back on the bootstrap's lead before a refresh, after one had moved them away
    /// (a drained home's late answer). Absent in files written before they were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_moves: Option<std::collections::BTreeMap<String, usize>>,
}

/// One measured refresh: `[client, asked_us, took_us, attempts]` in the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RefreshEntry(
    /// The client's index in the fleet.
    pub usize,
    /// When the application asked, after the measurement's start (µs).
    pub u64,
    /// Time to metadata (µs); `None` if the refresh failed or gave up.
    pub Option<u64>,
    /// Attempts the refresh started.
    pub u64,
);

/// Why one measured refresh ran and where its time went: tells apart, within one run, the
/// clients that reconnected from those that asked on a kept connection.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RefreshDetail {
    /// The cause the client gave (`RefreshCause::name`).
    pub cause: String,
    /// Connections the client opened during the refresh.
    pub opened: u64,
    /// The winning attempt, if one answered: whether it ran on a kept connection, and when
    /// (µs after the refresh started) it started, connected, first answered and ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<WinnerTimes>,
}

/// The winning attempt of a refresh, from `Client::last_refresh`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WinnerTimes {
    /// The broker it ran on (node id, from 1); absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    /// Whether it ran on a connection kept from an earlier refresh.
    pub reused: bool,
    /// When it started (µs after the refresh started).
    pub started_us: u64,
    /// When its transport came up (a kept connection's: when it started).
    pub connected_us: Option<u64>,
    /// When its broker first answered (over TLS on a fresh connection: the handshake done).
    pub answered_us: Option<u64>,
    /// When it ended with the metadata.
    pub ended_us: Option<u64>,
}

/// Per broker, over SASL_SSL: TLS handshakes as the forwarders saw them, and the ApiVersions
/// the request logs show.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SecuredCounts {
    /// ApiVersions requests in the broker's request log: those of kept connections, not the
    /// pre-authentication one of each fresh connection.
    pub api_versions_logged_per_broker: Vec<usize>,
    /// ClientHellos the broker answered (it did the key exchange).
    pub tls_handshakes_per_broker: Vec<usize>,
    /// Handshakes established (the broker sent something after the client's Finished).
    pub tls_established_per_broker: Vec<usize>,
    /// ClientHellos the broker never answered (a stopped broker's).
    pub tls_unanswered_per_broker: Vec<usize>,
}

#[cfg(test)]
mod tests;
