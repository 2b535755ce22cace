//! The JavaScript API: `refresh()`, `presets()`, `knobs()`, `defaultConfig()`, `validateConfig()`,
//! and the TypeScript types that describe them.

use js_sys::{Array, Function, Promise, Reflect};
use stagger::kafka::ExchangeConfig;
use stagger::{ConfigError, RefreshConfig};
use wasm_bindgen::prelude::*;
use web_sys::AbortSignal;

use super::convert::{config_error, config_from_js, sasl_from_js, string_list};
use super::driver::{self, Plan};
use super::to_js::to_js;
use crate::options::{bad, Seeds};

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &'static str = r#"
/** A duration, as serde writes Rust's `core::time::Duration`. */
export interface Duration { secs: number; nanos: number }

/** Adaptive stagger (the default): hedge against silence, not slowness. Connecting: wait `cold`; connected but
 *  silent: `clamp(multiple × max(broker pace, handshake), floor, ceiling)` after the handshake, the broker pace
 *  being the first answers seen (`silent`, or `silent_tls` over TLS, until one is); answering: `patience` × what an answer normally takes,
 *  from the attempt's start. */
export interface AdaptiveStagger {
  cold: Duration; multiple: number; floor: Duration; ceiling: Duration; patience: number;
  /** The broker pace (handshake to first answer) assumed until a first answer is seen. */
  silent: Duration;
  /** The same, when the first answer ends a TLS handshake (`Input::Connected`'s `tls`). */
  silent_tls: Duration;
  /** The longest a silent wait grows by superseding silent brokers. */
  pace: Duration;
}
export type Stagger = { fixed: Duration } | { adaptive: AdaptiveStagger };
export type Growth = { linear: number } | { exponential: number };
/** Rules of the fan-out that are on by default (`fanout.tuning`). */
export interface Tuning {
  /** A fast failure (refused) starts the next attempt at once. */
  next_on_failure: boolean;
  /** At a stagger tick with the throttle full, cancel the newest silent attempt for the next broker. */
  replace_when_full: boolean;
  /** When one broker starts answering, cancel every attempt whose broker has said nothing (`overtaken`). */
  cancel_silent_on_answer: boolean;
  /** Start a tick's attempts one by one, delay / n apart, dropping the rest once a broker answers (on fast networks). */
  spread_ticks: boolean;
  /** When an attempt connects, cancel older ones still connecting well past its handshake (`outrun`). */
  cancel_outrun: boolean;
}
export interface Fanout {
  initial: number; stagger: Stagger; growth: Growth; max_in_flight: number; jitter: number; tuning: Tuning;
}
export interface Backoff { retries: number; initial: Duration; multiplier: number; cap: Duration }
/** The refresh policy; `defaultConfig()` returns a complete one to start from, `knobs()` describes every field. */
export interface RefreshConfig {
  fanout: Fanout; attempt_timeout: Duration; deadline: Duration; retry: Backoff; seed: number; shuffle_seeds: boolean;
}
/** What a knob takes: `knobs()` lists every knob with one of these. */
export type KnobKind =
  | { kind: "duration" | "u32" | "u64" | "f64" | "bool" }
  | { kind: "choice"; choices: { name: string; param: KnobKind | null }[] };
/** One knob of the core's schema: its dotted path in the config's JSON, what it takes, one line of doc, and its
 *  default as text, in the syntax setting it takes (a duration such as `1.5s`, `linear:N`, `adaptive`). `cluster` knobs belong to a long-lived client only. */
export interface Knob { path: string; scope: "refresh" | "cluster"; kind: KnobKind; doc: string; default: string | null }
export type PresetName = "adaptive" | "sequential" | "all-at-once" | "staggered";

/** Options of `refresh()`. */
export interface RefreshOptions {
  /** WebSocket URLs (`ws://` or `wss://`) of bridges to the seed brokers, tried in this order. */
  bootstrap: string[];
  /** A complete RefreshConfig, a preset name, or RefreshConfig JSON text. Default: `defaultConfig()`. */
  config?: RefreshConfig | PresetName | string;
  /** Topics to describe; absent or null for all topics, [] for brokers only. */
  topics?: string[] | null;
  /** Kafka `client.id` (default "stagger"). */
  clientId?: string;
  /** SASL after ApiVersions, as the broker's listener requires (the bridge only carries bytes). The
   *  secret never appears in events or errors. A `token` function is called as the refresh starts. */
  sasl?: SaslOptions;
  /** Called with each of the core's live events as it happens. */
  onEvent?: (event: RefreshEvent) => void;
  /** Aborting closes every socket and rejects the promise with the signal's reason (an AbortError). */
  signal?: AbortSignal;
}

/** SASL credentials. TLS (and a client certificate, for mTLS) is the browser's business: use a
 *  `wss://` bridge URL; the browser presents certificates from its own store. */
export type SaslOptions =
  | { mechanism: "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512"; username: string; password: string }
  | { mechanism: "OAUTHBEARER"; token: string | (() => string) };

export interface BrokerMetadata { node_id: number; host: string; port: number; rack: string | null }
export interface PartitionMetadata { id: number; error_code: number; leader: number; replicas: number[]; isr: number[] }
export interface TopicMetadata { name: string; error_code: number; is_internal: boolean; partitions: PartitionMetadata[] }
/** The cluster's metadata, as the winning broker answered it. */
export interface Metadata {
  cluster_id: string | null; controller_id: number; error_code: number; brokers: BrokerMetadata[]; topics: TopicMetadata[];
}

export type ErrorKind =
  | { kind: "dns" | "refused" | "connect_timeout" | "response_timeout" | "closed" | "protocol" | "frame_too_large"
      | "no_brokers" | "tls" | "authentication" | "authorization" | "io" }
  | { kind: "broker_error"; code: number };
export interface AttemptError { kind: ErrorKind; detail?: string }
export type GiveUpReason = { all_failed: { passes: number } } | "deadline_exceeded" | "fatal";
export interface BrokerFailure { broker: number; address: string; attempts: number; last_error: AttemptError | null; cancelled?: CancelReason }
/** The core's structured error: why, the last error, and every broker's last error. */
export interface RefreshErrorInfo {
  reason: GiveUpReason; last_error: [attempt: AttemptId, broker: number, error: AttemptError] | null; brokers: BrokerFailure[];
}
/** One broker of a failed refresh, by URL. */
export interface BrokerSummary {
  url: string; address: string; attempts: number; kind: string | null; error: string | null;
  /** Why the core cancelled its latest attempt, if it did (then `kind` and `error` are null). */
  cancelled: CancelReason | null;
  /** What happened to it, in the core's words: "not tried", "cancelled: another broker's failure was fatal", "connection refused", … */
  story: string;
}
/** What `refresh()` rejects with when the core gives up (`name === "RefreshError"`): also every
 *  attempt's report and the refresh's trace. */
export interface RefreshFailure extends Error {
  refreshError: RefreshErrorInfo; brokers: BrokerSummary[]; refresh: RefreshReport; trace: Trace | null;
}
/** What `refresh()` rejects with (or `validateConfig()` throws) for bad options (`name === "ConfigError"`). */
export interface ConfigFailure extends Error { field: string; problem: string }

/** One attempt: its refresh's epoch and its number within that refresh (two numbers, so no precision is
 *  lost; compare both, e.g. by `${epoch}.${number}`). */
export interface AttemptId { epoch: number; number: number }
export type CancelReason = "lost" | "timed_out" | "deadline" | "fatal" | "rejected" | "superseded" | "overtaken" | "outrun";
export type TimerKind = "stagger" | "spread" | "attempt_timeout" | "backoff" | "deadline";

/** What happened during a refresh, as it happened: the core's live events (`stagger::report::Event`),
 *  the very ones the CLI's live view and the Rust adapters report. `elapsed_ms` counts from the
 *  start of the refresh; `broker` is the bridge's `host:port` (the bootstrap URL's). A refresh's
 *  last event is `won` when it succeeded, `gave_up` when it failed (then the promise rejects). */
export type RefreshEvent = { elapsed_ms: number } & (
  /** The policy started an attempt; then `connected` (the socket opened), `answered` (the broker's
   *  first answer, ApiVersions: it is alive), and one of `won`, `failed`, `cancelled`. */
  | { event: "started" | "connected" | "answered" | "won"; attempt: AttemptId; broker: string }
  | { event: "failed"; attempt: AttemptId; broker: string; error: AttemptError }
  | { event: "cancelled"; attempt: AttemptId; broker: string; reason: CancelReason }
  | { event: "resolved"; attempt: AttemptId; broker: string; addresses: string[] }
  /** One of the policy's timers fired; what follows is what the policy did about it. */
  | { event: "timer"; timer: TimerKind }
  /** The refresh gave up, and why: its last event. */
  | { event: "gave_up"; reason: GiveUpReason });

/** One attempt, start to end (`stagger::report::AttemptReport`, the CLI's `--json` attempt rows):
 *  times in ms since the refresh started. */
export interface AttemptReport {
  attempt: number; broker: string; started_ms: number; connected_ms: number | null; answered_ms: number | null;
  ended_ms: number | null; outcome: "won" | "failed" | "cancelled" | "in_flight" | "resolved";
  /** For `failed`: the error as text, and its kind. */
  error?: string; error_kind?: ErrorKind;
  /** For `cancelled`: why. */
  reason?: CancelReason;
  addresses?: string[];
}
/** A refresh's summary (the CLI's `--json` `refresh`): time to the win and the winner (null when it
 *  gave up), and every attempt in start order. */
export interface RefreshReport { elapsed_ms: number | null; winner: string | null; attempts: AttemptReport[] }

export type Command =
  | { connect: { attempt: AttemptId; broker: number } }
  | { resolve: { attempt: AttemptId; broker: number } }
  | { cancel: { attempt: AttemptId; reason: CancelReason } }
  | { done: { attempt: AttemptId; broker: number; metadata: Metadata } }
  | { give_up: RefreshErrorInfo };
export type Input =
  | { connected: { attempt: AttemptId; tls?: boolean } }
  /** The broker's first answer on this attempt (ApiVersions, even an error one): it is alive. */
  | { first_frame: { attempt: AttemptId } }
  | { response: { attempt: AttemptId; metadata: Metadata } }
  | { failed: { attempt: AttemptId; error: AttemptError } }
  | { resolved: { attempt: AttemptId; addresses: string[] } };
/** One timed step of a trace (`at` in µs from the trace's clock). */
export type TraceEvent =
  | { type: "command"; at: number; command: Command }
  | { type: "input"; at: number; input: Input }
  | { type: "timeout"; at: number; timer: TimerKind | null };
/** The policy's record of a refresh (`stagger::Trace`): it replays to the same commands, e.g. in the
 *  web demo's Replay view or with `Trace::replay`. */
export interface Trace {
  version: number; recorder: string; config: RefreshConfig; book: unknown; started_at: number;
  recent_response_time: Duration | null; events: TraceEvent[]; context?: unknown;
}
/** What `refreshWith()` resolves with. */
export interface RefreshResult { metadata: Metadata; refresh: RefreshReport; trace: Trace }
"#;

#[wasm_bindgen]
extern "C" {
    /// `RefreshOptions` (see the TypeScript definitions).
    #[wasm_bindgen(typescript_type = "RefreshOptions")]
    pub type RefreshOptions;
    /// A promise of the cluster's `Metadata`.
    #[wasm_bindgen(typescript_type = "Promise<Metadata>")]
    pub type MetadataPromise;
    /// A promise of the cluster's `Metadata` with the refresh's report and trace.
    #[wasm_bindgen(typescript_type = "Promise<RefreshResult>")]
    pub type RefreshResultPromise;
    /// A `RefreshConfig` object.
    #[wasm_bindgen(typescript_type = "RefreshConfig")]
    pub type RefreshConfigObject;
    /// What `validateConfig` accepts.
    #[wasm_bindgen(typescript_type = "RefreshConfig | PresetName | string")]
    pub type ConfigInput;
    /// The preset names.
    #[wasm_bindgen(typescript_type = "PresetName[]")]
    pub type PresetNames;
    /// The knob schema.
    #[wasm_bindgen(typescript_type = "Knob[]")]
    pub type KnobList;
}

/// Fetches cluster metadata through WebSocket bridges, the stagger way: one attempt, another
/// after a (adaptive) stagger delay if none answered, throttled and jittered, the first good
/// answer wins and the others are closed, with retries and an overall deadline.
///
/// Resolves with the winner's `Metadata`. Rejects with a `RefreshFailure` (name
/// `RefreshError`; `message` is the core's report, `refreshError` and `brokers` the
/// structured per-broker errors) when every broker failed or the deadline passed, with a
/// `ConfigFailure` for bad options, and with the signal's reason (an `AbortError`) when
/// aborted.
#[wasm_bindgen]
pub fn refresh(options: RefreshOptions) -> MetadataPromise {
    run(options.into(), false).unchecked_into()
}

/// As `refresh()`, resolving with `{ metadata, refresh, trace }`: the metadata, the
/// refresh's report (time to the win, the winner, every attempt) and the policy's trace,
/// which replays to the same commands — what the Rust adapters' `refresh_with` returns.
#[wasm_bindgen(js_name = refreshWith)]
pub fn refresh_with(options: RefreshOptions) -> RefreshResultPromise {
    run(options.into(), true).unchecked_into()
}

/// The promise of one refresh; `report` resolves with the report and trace too.
fn run(options: JsValue, report: bool) -> Promise {
    let mut executor = |resolve: Function, reject: Function| {
        let started = read_options(&options, report)
            .map_err(|e| config_error(&e))
            .and_then(|plan| driver::start(plan, resolve, reject.clone()));
        if let Err(error) = started {
            let _ = reject.call1(&JsValue::UNDEFINED, &error);
        }
    };
    Promise::new(&mut executor)
}

/// The names of the policy presets, for pickers.
#[wasm_bindgen]
pub fn presets() -> PresetNames {
    RefreshConfig::PRESETS.iter().map(|name| JsValue::from_str(name)).collect::<Array>().unchecked_into()
}

/// Every knob of the policy, from the core's schema (`stagger::knobs`): what a
/// settings form lists instead of keeping its own copy.
#[wasm_bindgen]
pub fn knobs() -> KnobList {
    to_js(stagger::knobs()).unchecked_into()
}

/// The default policy (adaptive stagger), a complete `RefreshConfig` to edit.
#[wasm_bindgen(js_name = defaultConfig)]
pub fn default_config() -> RefreshConfigObject {
    to_js(&RefreshConfig::default()).unchecked_into()
}

/// Checks a config (object, preset name or JSON text) as `refresh()` would and returns it
/// as a complete `RefreshConfig` object; throws a `ConfigFailure` naming the bad field.
#[wasm_bindgen(js_name = validateConfig)]
pub fn validate_config(config: ConfigInput) -> Result<RefreshConfigObject, JsValue> {
    let config = config_from_js(&config.into()).map_err(|e| config_error(&e))?;
    Ok(to_js(&config).unchecked_into())
}

/// Reads and checks `refresh()`'s options.
fn read_options(options: &JsValue, report: bool) -> Result<Plan, ConfigError> {
    if !options.is_object() {
        return Err(bad("options", "must be an object like { bootstrap: [\"ws://127.0.0.1:9092\"] }"));
    }
    let get = |key: &str| Reflect::get(options, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED);
    let urls = string_list(&get("bootstrap"), "bootstrap")?
        .ok_or_else(|| bad("bootstrap", "is required: the ws:// URLs of bridges to the seed brokers"))?;
    let seeds = Seeds::new(&urls)?;
    let config = config_from_js(&get("config"))?;
    let mut exchange = ExchangeConfig { topics: string_list(&get("topics"), "topics")?, ..ExchangeConfig::default() };
    let client_id = get("clientId");
    if !(client_id.is_undefined() || client_id.is_null()) {
        exchange.client_id = client_id.as_string().ok_or_else(|| bad("clientId", "must be a string"))?;
    }
    exchange.sasl = sasl_from_js(&get("sasl"))?;
    let on_event = match get("onEvent") {
        f if f.is_undefined() || f.is_null() => None,
        f => Some(f.dyn_into::<Function>().map_err(|_| bad("onEvent", "must be a function"))?),
    };
    let signal = match get("signal") {
        s if s.is_undefined() || s.is_null() => None,
        s => Some(s.dyn_into::<AbortSignal>().map_err(|_| bad("signal", "must be an AbortSignal"))?),
    };
    Ok(Plan { config, seeds, exchange, on_event, signal, report })
}
