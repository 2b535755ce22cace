//! The simulator's prices `fleet_real` fits from its calibration and its runs' warm-ups (the
//! `fit` block; how each is derived: `fit`, `fit_secured` and `fit_rest` in
//! `lab/src/bin/fleet_real/main.rs`).

use serde::{Deserialize, Serialize};

/// The fitted prices (µs unless said otherwise).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// The round trip a fleet request pays on top of the broker's own time: the loopback
    /// connect plus what a forwarder adds (µs).
    pub rtt_us: f64,
    /// Median TCP connect to a broker, straight (µs).
    pub loopback_connect_us: f64,
    /// What a forwarder adds to a Metadata round trip (µs).
    pub forwarder_relay_us: f64,
    /// A broker's time per Metadata request from the calibration's probe at rest (µs).
    pub metadata_probe_rest_us: f64,
    /// A broker's time per ApiVersions request from the calibration's probe at rest (µs).
    pub api_versions_probe_rest_us: f64,
    /// `api_versions_probe_rest_us / metadata_probe_rest_us`.
    pub api_ratio_probe_rest: f64,
    /// A broker's time per Metadata request, saturated: 1 / the answers per second of the
    /// storm's two survivors driven together through their forwarders (µs).
    pub metadata_saturated_us: f64,
    /// The same for ApiVersions (µs).
    pub api_versions_saturated_us: f64,
    /// `api_versions_saturated_us / metadata_saturated_us` (0 without a Metadata price).
    pub api_ratio_saturated: f64,
    /// A broker's time per Metadata request, saturated alone and straight (µs).
    pub metadata_saturated_alone_direct_us: f64,
    /// A broker's time per Metadata request with all saturated at once, straight (µs).
    pub metadata_saturated_all_direct_us: f64,
    /// `(metadata_saturated_us + api_versions_saturated_us) / 1.05`: the whole work of an
    /// attempt in one `service_time` (µs).
    pub service_saturated_us: f64,
    /// A fresh attempt's cost to a saturated broker: connect, ApiVersions, Metadata, close
    /// (µs; over SASL_SSL with TLS and SASL).
    pub fresh_attempt_saturated_us: f64,
    /// `fresh_attempt_saturated_us` less its two requests: the connection's own cost (µs).
    pub connection_saturated_us: f64,
    /// A broker's time per Metadata request at rest: the median of the runs' calm warm-ups
    /// (µs).
    pub metadata_rest_us: f64,
    /// The same as a mean (µs).
    pub metadata_rest_mean_us: f64,
    /// A broker's time per ApiVersions request at rest, as `metadata_rest_us` (µs); `None`
    /// over SASL_SSL when no warm-up ApiVersions was logged.
    pub api_versions_rest_us: Option<f64>,
    /// The same as a mean (µs).
    pub api_versions_rest_mean_us: Option<f64>,
    /// `api_versions_rest_us / metadata_rest_us`.
    pub api_ratio_rest: Option<f64>,
    /// `(metadata_rest_us + api_versions_rest_us) / 1.05` (µs).
    pub service_rest_us: Option<f64>,
    /// Over SASL_SSL: the prices of TLS and SASL.
    #[serde(flatten)]
    pub secured: Option<SecuredFit>,
}

/// What TLS and SASL cost, fitted over SASL_SSL (µs unless said otherwise).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SecuredFit {
    /// `fresh_attempt_saturated_us` of the raw-frame PLAINTEXT loops (µs).
    pub fresh_attempt_raw_plaintext_saturated_us: f64,
    /// `connection_saturated_us` of the raw-frame PLAINTEXT loops (µs).
    pub connection_raw_plaintext_saturated_us: f64,
    /// 1 / the fresh PLAINTEXT refreshes per second each survivor answered in closed loops
    /// (µs).
    pub fresh_refresh_plaintext_saturated_us: f64,
    /// `fresh_refresh_plaintext_saturated_us` less its two requests: a PLAINTEXT
    /// connection's own cost, measured beside the SASL_SSL one (µs).
    pub plaintext_connection_saturated_us: f64,
    /// What TLS and SASL add to a fresh refresh, saturated (µs).
    pub tls_sasl_saturated_us: f64,
    /// The surviving brokers' own CPU time per fresh SASL_SSL refresh (µs).
    pub fresh_refresh_broker_cpu_us: f64,
    /// The same per fresh PLAINTEXT refresh (µs).
    pub fresh_refresh_plaintext_broker_cpu_us: f64,
    /// Their difference: the brokers' CPU time for TLS and SASL (µs).
    pub tls_sasl_broker_cpu_us: f64,
    /// The TLS handshake a client sees at rest: TCP up to handshake done (µs).
    pub tls_rest_us: f64,
    /// What the rest of a SASL_SSL exchange takes at rest beyond a PLAINTEXT one's
    /// ApiVersions and Metadata (µs).
    pub sasl_rest_us: f64,
    /// Round trips of the TLS handshake before the first request.
    pub tls_round_trips: u32,
    /// Round trips of the SASL exchange (SaslHandshake, two SaslAuthenticate).
    pub sasl_round_trips: u32,
}
