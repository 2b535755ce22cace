//! The calibration block of a `fleet_real` file: what the cluster charged before the runs,
//! measured by `lab/src/bin/fleet_real/calibrate.rs` (raw request frames over PLAINTEXT) and,
//! over SASL_SSL, `secured.rs` (one-shot refreshes through both listeners).

use serde::{Deserialize, Serialize};

/// What the calibration measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Size of the replayed ApiVersions request frame (bytes).
    pub api_versions_request_bytes: usize,
    /// Size of the replayed Metadata request frame (bytes).
    pub metadata_request_bytes: usize,
    /// Size of the Metadata response, with its size prefix (bytes).
    pub metadata_response_bytes: usize,
    /// Pause between the round trips measured at rest (ms).
    pub idle_gap_ms: f64,
    /// Per broker, round trips at rest straight to its PLAINTEXT port.
    pub idle_direct: Vec<Idle>,
    /// Per broker, the same through its counting forwarder.
    pub idle_forwarded: Vec<Idle>,
    /// Per broker, Metadata answered per second when it alone is saturated.
    pub burst_metadata_alone: Vec<Burst>,
    /// Metadata answered per second with every broker saturated at once.
    pub burst_metadata_all: Burst,
    /// Metadata answered per second by the storm's two surviving brokers saturated together.
    pub burst_metadata_two: Burst,
    /// `burst_metadata_all` through the forwarders.
    pub burst_metadata_all_forwarded: Burst,
    /// `burst_metadata_two` through the forwarders.
    pub burst_metadata_two_forwarded: Burst,
    /// ApiVersions answered per second with every broker saturated at once.
    pub burst_api_versions_all: Burst,
    /// ApiVersions answered per second by the two survivors through the forwarders.
    pub burst_api_versions_two_forwarded: Burst,
    /// Fresh connections (connect, ApiVersions, Metadata, close) answered per second by the
    /// two survivors through the forwarders.
    pub churn_two_forwarded: Burst,
    /// Over SASL_SSL: TLS and SASL measured with one-shot refreshes.
    #[serde(flatten)]
    pub secured: Option<SecuredCalibration>,
    /// The machine's 1-minute load average when the calibration ended.
    pub loadavg_after: Option<f64>,
}

/// What TLS and SASL cost a fresh connection, beside the same over PLAINTEXT.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SecuredCalibration {
    /// One-shot refreshes per broker at rest.
    pub fresh_rest_count: usize,
    /// Pause between them (ms).
    pub fresh_rest_gap_ms: f64,
    /// Per broker, fresh refreshes at rest over SASL_SSL, by phase.
    pub fresh_rest_sasl_ssl: Vec<Fresh>,
    /// Per broker, fresh refreshes at rest over PLAINTEXT, by phase.
    pub fresh_rest_plaintext: Vec<Fresh>,
    /// Per broker, the TLS handshakes of `fresh_rest_sasl_ssl` as its forwarder saw them.
    pub tls_handshakes_rest: Vec<HandshakeTimes>,
    /// Fresh SASL_SSL refreshes in closed loops against the two survivors, saturated.
    pub churn_refresh_sasl_ssl_two_forwarded: Churn,
    /// The same over PLAINTEXT.
    pub churn_refresh_plaintext_two_forwarded: Churn,
}

/// Summary of a set of durations (µs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// How many.
    pub n: usize,
    /// Mean (µs).
    pub mean_us: f64,
    /// The mean of the values up to the 99th percentile (µs; a stalled thread's outliers cut).
    pub trimmed_mean_us: f64,
    /// Median (µs, nearest rank).
    pub p50_us: f64,
    /// 90th percentile (µs).
    pub p90_us: f64,
    /// 99th percentile (µs).
    pub p99_us: f64,
}

impl Spread {
    /// The summary of `v` (µs); all zero for none.
    pub fn of(mut v: Vec<f64>) -> Spread {
        if v.is_empty() {
            return Spread::default();
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        let p99 = q(0.99);
        let kept: Vec<f64> = v.iter().copied().filter(|&x| x <= p99).collect();
        Spread {
            n: v.len(),
            mean_us: v.iter().sum::<f64>() / v.len() as f64,
            trimmed_mean_us: kept.iter().sum::<f64>() / kept.len().max(1) as f64,
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: p99,
        }
    }
}

/// Round trips measured one at a time on one connection, a gap apart (a broker at rest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Idle {
    /// TCP connects (µs).
    pub connect: Spread,
    /// ApiVersions round trips (µs).
    pub api_versions: Spread,
    /// Metadata round trips (µs).
    pub metadata: Spread,
}

/// Requests answered per second by each target, all driven at once, each by closed-loop
/// connections with one request outstanding each.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Burst {
    /// The targets' addresses.
    pub targets: Vec<String>,
    /// What each loop sends: `metadata`, `api_versions`, or a fresh connection's steps.
    pub api: String,
    /// Closed loops per target.
    pub connections: usize,
    /// Requests (or fresh connections) per target per repetition.
    pub requests_per_target: usize,
    /// Answers per second, per target (the median over the repetitions).
    pub per_second: Vec<f64>,
    /// Every repetition's answers per second, per target.
    pub repetitions: Vec<Vec<f64>>,
    /// 1 / answers per second (µs): the mean time per request of a saturated server.
    pub service_us: Vec<f64>,
    /// CPU time (user + system, `/proc`) every broker process used per answered request
    /// (µs; the median over the repetitions): what a request costs the brokers, apart from
    /// the machine time it waited for; in fresh-connection loops, per connection. Absent in
    /// older files and in the SASL_SSL loops (`Churn` counts those).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brokers_cpu_per_request_us: Option<f64>,
    /// CPU time this process (the driving loops, and the forwarders where they relay) used
    /// per answered request (µs; the median over the repetitions). Absent as above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_cpu_per_request_us: Option<f64>,
    /// `brokers_cpu_per_request_us` by the kind of thread that spent it (µs per answered
    /// request, each kind the median over the repetitions). Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brokers_threads_cpu_per_request_us: Option<ThreadCpu>,
}

/// A broker process's CPU time by the kind of thread that spent it (µs), read from each
/// thread's `/proc/PID/task/TID/schedstat` (nanoseconds, where `/proc/PID/stat` counts 10 ms
/// ticks). Only `request_path` is work a request waits for: the JIT compiles and the
/// collector runs beside it, on the same cores, but no answer waits for them to finish.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadCpu {
    /// Kafka's network threads and request handlers (`data-plane-kafka-*`): accepts, TLS and
    /// SASL, reading requests, answering them.
    pub request_path: f64,
    /// The JVM's JIT compiler threads (`C1`/`C2 CompilerThread`).
    pub compiler: f64,
    /// The garbage collector (the `VM Thread`, which runs the serial collector's pauses, and
    /// any `GC`/`G1` threads).
    pub gc: f64,
    /// Everything else: the controller, replication, schedulers, logging.
    pub other: f64,
}

impl ThreadCpu {
    /// All kinds together.
    pub fn total(&self) -> f64 {
        self.request_path + self.compiler + self.gc + self.other
    }

    /// Each kind's `f` of the kinds in `all` (the median, say), kind by kind.
    pub fn each(all: &[ThreadCpu], f: impl Fn(Vec<f64>) -> f64) -> ThreadCpu {
        let kind = |k: fn(&ThreadCpu) -> f64| f(all.iter().map(k).collect());
        ThreadCpu {
            request_path: kind(|t| t.request_path),
            compiler: kind(|t| t.compiler),
            gc: kind(|t| t.gc),
            other: kind(|t| t.other),
        }
    }

    /// This minus `before`, kind by kind, scaled by `scale`. A thread that ended between
    /// the two readings takes its CPU with it, so a kind never goes below zero.
    pub fn since(&self, before: &ThreadCpu, scale: f64) -> ThreadCpu {
        let d = |after: f64, before: f64| (after - before).max(0.0) * scale;
        ThreadCpu {
            request_path: d(self.request_path, before.request_path),
            compiler: d(self.compiler, before.compiler),
            gc: d(self.gc, before.gc),
            other: d(self.other, before.other),
        }
    }
}

/// Fresh-connection refreshes in closed loops, saturated.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Churn {
    /// Refreshes answered per second per target, and 1 / that (`service_us`).
    #[serde(flatten)]
    pub rate: Burst,
    /// CPU time (user + system) each target broker's process used per refresh it answered
    /// (µs; the median over the repetitions). Includes the broker's background work
    /// (replication, the controller), a small share at these rates.
    pub broker_cpu_us: Vec<f64>,
    /// CPU time this process used per refresh (µs): the clients' TLS, PBKDF2 and driver, and
    /// the forwarders' relaying.
    pub client_cpu_us: f64,
    /// The target brokers' CPU per refresh by the kind of thread that spent it (µs; the
    /// mean over the targets, each kind the median over the repetitions). Absent in older
    /// files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_threads_cpu_us: Option<ThreadCpu>,
    /// Refreshes that failed (not counted in the rates).
    pub failed: usize,
}

/// The phases of fresh one-shot refreshes to one broker at rest (µs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fresh {
    /// The broker's (forwarder's) address.
    pub target: String,
    /// The refresh's start until its TCP connection was up (µs).
    pub connect: Spread,
    /// TCP up until the broker's first answer (µs): over TLS the handshake done, over
    /// plaintext the ApiVersions answer.
    pub first_answer: Spread,
    /// The first answer until the Metadata answer (µs): over SASL_SSL ApiVersions,
    /// SaslHandshake, SaslAuthenticate twice and Metadata; over plaintext Metadata.
    pub after_first_answer: Spread,
    /// TCP up until the Metadata answer (µs; everything but the TCP handshake).
    pub exchange: Spread,
    /// The refresh's start until its win (µs).
    pub total: Spread,
}

/// The TLS handshakes a forwarder saw, timed from each ClientHello passing it (µs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HandshakeTimes {
    /// ClientHellos.
    pub n: usize,
    /// Handshakes the broker answered.
    pub answered: usize,
    /// Handshakes established.
    pub established: usize,
    /// Until the broker's ServerHello passed back (µs): the forwarder's hop to the broker
    /// and back, and the broker's work up to its ServerHello (its key share).
    pub server_hello: Spread,
    /// Until the client's Finished passed (µs): the broker's whole first flight
    /// (certificate, signature, Finished) and the client's checking it.
    pub client_finished: Spread,
    /// Until the broker sent something after the client's Finished (µs).
    pub established_after: Spread,
}
