//! `stagger`: Kafka cluster metadata with staggered refresh.
//!
//! Subcommands: `metadata` (list brokers, topics and partitions like `kcat -L`, with a live
//! per-broker view on a terminal), `demo` (an embedded real cluster with hung and
//! refusing brokers, refreshed with the default policy and with Sarama's sequential one),
//! `bridge`, and `knobs` (the policy's schema, which `--set` and `--policy` follow).

mod demo;
mod live;
mod output;
mod policy;
mod settings;
mod web;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use stagger::RefreshConfig;
use stagger_tokio::{Error, ExchangeConfig, RefreshOptions};

use crate::demo::{DemoCluster, Role};
use crate::live::LiveView;
use crate::output::ms;
use crate::policy::PolicyArgs;
use crate::settings::ConnectionArgs;

const EXAMPLES: &str = "\
Examples:
  stagger demo                                   # embedded cluster, 2 hung + 1 down broker
  stagger metadata -b 127.0.0.1:9092,127.0.0.1:9093
  stagger metadata -b kafka-1:9092 -t orders --json
  stagger metadata -b kafka-1:9092 --preset staggered --max-in-flight 2 --trace refresh.json
  stagger metadata -b kafka-1:9092 --set fanout.max_in_flight=2 --set fanout.tuning.spread_ticks=false
  stagger metadata -b kafka-1:9092 --policy policy.json
  stagger metadata -F client.properties          # your Java or librdkafka client config
  stagger knobs                                  # every knob --set and --policy take";

/// Kafka metadata, fast even when brokers hang.
#[derive(Parser)]
#[command(name = "stagger", version, about, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Fetch and print cluster metadata (brokers, topics, partitions).
    #[command(after_help = "Examples:
  stagger metadata -b 127.0.0.1:9092
  stagger metadata -b a:9092,b:9092 -t orders -t payments --json
  stagger metadata -b a:9092 --tls --ca ca.pem
  stagger metadata -F client.properties -X client.id=me
  stagger metadata -b a:9093 --ca ca.pem --sasl-mechanism SCRAM-SHA-512 --sasl-username alice --sasl-password-file pw
  stagger metadata -b a:9092 --stagger 100ms --jitter 0 --seed 7 --trace refresh.json

Connection settings come from, lowest to highest: $STAGGER_CONFIG, or else
$XDG_CONFIG_HOME/stagger/stagger.conf (~/.config/stagger/stagger.conf) when it exists;
then each -F FILE; then each -X KEY=VALUE; then the flags. The files are librdkafka/kcat
or Java client.properties files: bootstrap.servers, security.protocol, sasl.mechanism,
sasl.username, sasl.password, sasl.jaas.config, sasl.oauthbearer.token(.file),
ssl.ca.location, ssl.truststore.location (PEM), ssl.certificate.location,
ssl.key.location, socket.connection.setup.timeout.ms, client.id; other keys are ignored
with a warning.")]
    Metadata(MetadataArgs),
    /// Start an embedded mock Kafka cluster with hung and refusing brokers and refresh it.
    #[command(after_help = "Examples:
  stagger demo
  stagger demo --brokers 9 --hung 4 --down 2
  stagger demo --serve            # keep the cluster up; print TCP and ws:// addresses until Ctrl-C
  stagger demo --serve --allow-origin http://127.0.0.1:3000   # bridges your own page may use
  stagger demo --web              # also serve the web demo, its Live view wired to the cluster

The bridges of --serve and --web check origins and requests as `stagger bridge` does; --web
allows exactly the origin of the page it serves (http://127.0.0.1:PORT).")]
    Demo(DemoArgs),
    /// Bridge WebSockets to a Kafka broker's TCP port (for browsers; websockify-compatible),
    /// letting through only the pages and the requests it is told to.
    #[command(after_help = "Examples:
  stagger bridge --to 127.0.0.1:9092 --allow-origin http://127.0.0.1:8080
  stagger bridge --to 127.0.0.1:9092 --allow-origin https://app.example --generate-token
  stagger bridge --listen 0.0.0.0:9100 --to kafka-1:9092 --token-file bridge.token --allow-origin https://app.example

By default the bridge listens on 127.0.0.1:9100, refuses every web page (browsers send their
page's origin; allow each with --allow-origin) with HTTP 403, lets through clients that send
no Origin (non-browser tools, which could reach the broker directly anyway; --require-origin
refuses them too), and forwards only the Kafka requests a metadata refresh needs
(ApiVersions, SaslHandshake, SaslAuthenticate, Metadata that creates no topics): any other
request closes the connection. With a token, clients must open ws://HOST:PORT/?token=TOKEN
(401 otherwise). Refusals are reported on stderr, without the token.")]
    Bridge(BridgeArgs),
    /// List every policy knob (for --set PATH=VALUE and --policy FILE.json): path, syntax,
    /// default, what it does.
    #[command(after_help = "Examples:
  stagger knobs
  stagger knobs --json            # the core's schema, as the web demo reads it")]
    Knobs(KnobsArgs),
}

#[derive(Args)]
struct KnobsArgs {
    /// Print the schema as JSON (`[{path, scope, kind, doc, default}]`).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct BridgeArgs {
    /// Address to accept WebSocket connections on (loopback unless told otherwise; any
    /// other address is reachable from other machines, and a warning says so).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9100")]
    listen: std::net::SocketAddr,
    /// The broker (host:port) each WebSocket is connected to.
    #[arg(long, value_name = "HOST:PORT")]
    to: String,
    /// Require TOKEN in the URL (ws://HOST:PORT/?token=TOKEN): 16 to 256 characters of
    /// A-Z a-z 0-9 - . _ ~. Other users may see command lines: prefer --token-file.
    #[arg(long, value_name = "TOKEN", conflicts_with_all = ["token_file", "generate_token"])]
    token: Option<String>,
    /// Require the token in FILE (its first line).
    #[arg(long, value_name = "FILE", conflicts_with = "generate_token")]
    token_file: Option<PathBuf>,
    /// Require a fresh random token; the URL to open, with it, is printed once on stdout.
    #[arg(long)]
    generate_token: bool,
    #[command(flatten)]
    access: BridgeAccessArgs,
}

/// Who may use a WebSocket bridge and what it forwards (`stagger bridge`, and the bridges of
/// `stagger demo --serve` / `--web`).
#[derive(Args)]
#[command(next_help_heading = "Bridge access")]
struct BridgeAccessArgs {
    /// Let web pages of ORIGIN (scheme://host or scheme://host:port, e.g. http://127.0.0.1:8080) connect
    /// (repeatable). No page may by default: a page of any other origin gets HTTP 403.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// Let every web page connect, whatever its origin (only with a token, or for a broker
    /// with nothing to protect).
    #[arg(long, conflicts_with = "allow_origin")]
    allow_any_origin: bool,
    /// Refuse clients that send no Origin header as well (non-browser clients, let through
    /// by default: browsers always send one).
    #[arg(long)]
    require_origin: bool,
    /// Forward every Kafka request, unparsed (a plain tunnel, like websockify). By default
    /// only ApiVersions, SaslHandshake, SaslAuthenticate and Metadata (when it may create no
    /// topic) go through, and any other request closes the connection.
    #[arg(long)]
    forward_all_apis: bool,
    /// Largest Kafka request forwarded, in bytes (without --forward-all-apis).
    #[arg(long, value_name = "BYTES", default_value_t = stagger_bridge::DEFAULT_MAX_FRAME_SIZE)]
    max_frame_size: usize,
}

impl BridgeAccessArgs {
    /// The bridge options these flags ask for, with `extra_origins` allowed too; refusals are
    /// printed on stderr prefixed with `who`.
    fn options(&self, extra_origins: &[String], who: &'static str) -> Result<stagger_bridge::BridgeOptions, Failure> {
        use stagger_bridge::{ApiPolicy, BridgeOptions, EventSink, OriginPolicy};
        let mut origins = if self.allow_any_origin { OriginPolicy::any() } else { OriginPolicy::new() };
        for origin in self.allow_origin.iter().chain(extra_origins) {
            origins = origins.allow(origin).map_err(|e| Failure::usage(format!("--allow-origin: {e}")))?;
        }
        if self.max_frame_size < 8 {
            return Err(Failure::usage("--max-frame-size must be at least 8 bytes (a Kafka request header)"));
        }
        Ok(BridgeOptions {
            origins: origins.require_origin(self.require_origin),
            apis: if self.forward_all_apis { ApiPolicy::All } else { ApiPolicy::MetadataRefresh },
            max_frame_size: self.max_frame_size,
            events: Some(EventSink::new(move |event| eprintln!("{who}: {event}"))),
            ..BridgeOptions::default()
        })
    }
}

/// One line saying what a bridge with `options` lets through.
fn describe_access(options: &stagger_bridge::BridgeOptions) -> String {
    let pages = if options.origins.allows_any() {
        "every web page (any origin)".to_owned()
    } else if options.origins.allowed().is_empty() {
        "no web page (add --allow-origin ORIGIN)".to_owned()
    } else {
        format!("pages of {}", options.origins.allowed().join(", "))
    };
    let tools = if options.origins.requires_origin() { "" } else { " and clients without Origin" };
    let token = if options.token.is_some() { ", with the token" } else { "" };
    let apis = match options.apis {
        stagger_bridge::ApiPolicy::MetadataRefresh => "metadata requests only",
        _ => "every request",
    };
    format!("accepting {pages}{tools}{token}; forwarding {apis}")
}

#[derive(Args)]
struct MetadataArgs {
    // Boxed so `Command`'s variants stay about the same size (clippy::large_enum_variant).
    #[command(flatten)]
    connection: Box<ConnectionArgs>,
    /// Only these topics (repeatable); default: all topics.
    #[arg(short = 't', long = "topic", value_name = "TOPIC")]
    topics: Vec<String>,
    /// Print one JSON object instead of a listing.
    #[arg(long)]
    json: bool,
    /// Write the core's trace (config, inputs, commands) to FILE, for replay in the web demo.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    #[command(flatten)]
    policy: PolicyArgs,
}

#[derive(Args)]
struct DemoArgs {
    /// Brokers in the embedded cluster.
    #[arg(long, default_value_t = 6)]
    brokers: usize,
    /// Brokers that accept TCP but never answer (placed first in the seed list).
    #[arg(long, default_value_t = 2)]
    hung: usize,
    /// Brokers that refuse connections (placed next).
    #[arg(long, default_value_t = 1)]
    down: usize,
    /// Attempt timeout for the sequential comparison run (each hung broker costs this much).
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = policy::parse_duration)]
    sequential_timeout: Duration,
    /// Skip the sequential comparison.
    #[arg(long)]
    no_compare: bool,
    /// Keep the cluster running and print its addresses (TCP and ws://) until Ctrl-C.
    #[arg(long)]
    serve: bool,
    /// Like --serve, and also serve the web demo (web-demo/dist) with Live mode wired up.
    #[arg(long)]
    web: bool,
    /// Port for --web.
    #[arg(long, default_value_t = 8080)]
    port: u16,
    #[command(flatten)]
    policy: PolicyArgs,
    #[command(flatten)]
    access: BridgeAccessArgs,
}

/// A failure to report: one paragraph, and the exit code.
struct Failure {
    message: String,
    code: u8,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Self {
        Failure { message: message.into(), code: 2 }
    }
    fn refresh(message: impl Into<String>) -> Self {
        Failure { message: message.into(), code: 1 }
    }
}

fn main() -> ExitCode {
    // A reader that stops early (`stagger knobs --json | head`) ends the output quietly, as
    // with any Unix filter, instead of a panic in `println!` on a broken pipe.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let command = policy::document_defaults(<Cli as clap::CommandFactory>::command());
    let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit());
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Metadata(args) => metadata(args).await,
            Command::Demo(args) => demo(args).await,
            Command::Bridge(args) => bridge(args).await,
            Command::Knobs(args) => {
                match args.json {
                    true => println!("{}", serde_json::to_string_pretty(stagger::knobs()).unwrap_or_default()),
                    false => print!("{}", policy::knobs_table()),
                }
                Ok(())
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

fn live_enabled(json: bool) -> bool {
    !json && std::io::stderr().is_terminal() && std::io::stdout().is_terminal()
}

async fn metadata(args: MetadataArgs) -> Result<(), Failure> {
    let connection = args.connection.resolve().map_err(Failure::usage)?;
    let config = settings::policy_with(&args.policy, &connection).to_config().map_err(Failure::usage)?;
    let exchange = ExchangeConfig {
        topics: (!args.topics.is_empty()).then(|| args.topics.clone()),
        client_id: connection.client_id.clone().unwrap_or_else(|| ExchangeConfig::default().client_id),
        sasl: connection.sasl.clone(),
        ..ExchangeConfig::default()
    };
    let record_trace = args.trace.is_some();
    let options =
        RefreshOptions { config, exchange, tls: connection.tls.clone(), record_trace, ..RefreshOptions::default() };
    let seeds = &connection.seeds;
    let view = LiveView::new(seeds, live_enabled(args.json));
    let result = with_live_view(view, |observer| stagger_tokio::refresh_with(&options, seeds, observer)).await;
    let trace = match &result {
        Ok(outcome) => outcome.trace.clone(),
        Err(Error::Refresh { trace, .. }) => trace.as_deref().cloned(),
        Err(_) => None,
    };
    if let (Some(path), Some(trace)) = (&args.trace, trace) {
        let json = serde_json::to_string_pretty(&trace).map_err(|e| Failure::refresh(format!("trace: {e}")))?;
        std::fs::write(path, json)
            .map_err(|e| Failure::refresh(format!("could not write the trace to {}: {e}", path.display())))?;
    }
    match result {
        Ok(outcome) => {
            if args.json {
                let doc = output::json(&outcome);
                println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
            } else {
                print!("{}", output::table(&outcome.metadata, &outcome.winner, &args.topics));
                println!(
                    "\nrefresh: {:.1} ms, {} attempts, winner {}",
                    ms(outcome.elapsed),
                    outcome.attempts.len(),
                    outcome.winner
                );
                print!("{}", output::attempts(&outcome.attempts));
            }
            Ok(())
        }
        Err(Error::Config(e)) => Err(Failure::usage(e.to_string())),
        Err(e @ Error::Refresh { .. }) => {
            if args.json {
                let doc = serde_json::json!({ "error": e.to_string(), "refresh": e.report() });
                println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
            }
            Err(Failure::refresh(e.to_string()))
        }
        Err(e) => Err(Failure::refresh(e.to_string())),
    }
}

async fn demo(args: DemoArgs) -> Result<(), Failure> {
    let mut config = args.policy.to_config().map_err(Failure::usage)?;
    // Both policies ask in the order listed, misbehaving brokers first: the worst case, the
    // same for both, rather than whichever order a shuffle drew this time.
    config.shuffle_seeds = false;
    let cluster = DemoCluster::start(args.brokers, args.hung, args.down).await.map_err(Failure::usage)?;
    println!("stagger demo: a {}-broker Kafka cluster (librdkafka's mock) on loopback", args.brokers);
    for (id, address, role) in &cluster.brokers {
        println!("  broker {id}  {address:<22} {}", role.describe());
    }
    let seeds = cluster.seeds();
    println!("seed list, worst first, asked in this order (shuffle_seeds=false): {}", seeds.join(","));
    if args.serve || args.web {
        return serve(&cluster, &args).await;
    }
    let live = live_enabled(false);
    let name = args.policy.preset.clone().unwrap_or_else(|| "adaptive (default)".into());
    println!("\nRefreshing with {name}:");
    let fast = run(&config, &seeds, live).await?;
    print!("\n{}", output::table(&fast.metadata, &fast.winner, &[]));
    if args.no_compare {
        return Ok(());
    }
    let mut sequential = RefreshConfig::sequential();
    sequential.attempt_timeout = args.sequential_timeout;
    sequential.shuffle_seeds = false;
    let bad = cluster.brokers.iter().filter(|b| b.2 != Role::Healthy).count();
    println!(
        "\nNow the way most clients refresh today: one broker at a time (preset `sequential`, {} attempt timeout; expect about {:.0?}):",
        humantime::format_duration(args.sequential_timeout),
        args.sequential_timeout * args.hung as u32
    );
    let slow = run(&sequential, &seeds, live).await?;
    println!("\n  {:<26} {:>16} {:>9} {:>12}", "policy", "time to metadata", "attempts", "connections");
    for (label, o) in [(name.as_str(), &fast), ("sequential", &slow)] {
        println!("  {:<26} {:>13.1} ms {:>9} {:>12}", label, ms(o.elapsed), o.attempts.len(), o.connections_opened());
    }
    let ratio = slow.elapsed.as_secs_f64() / fast.elapsed.as_secs_f64().max(1e-6);
    println!("  {name} got metadata {ratio:.0}× sooner past {bad} misbehaving brokers.");
    Ok(())
}

async fn run(config: &RefreshConfig, seeds: &[String], live: bool) -> Result<stagger_tokio::RefreshOutcome, Failure> {
    let options = RefreshOptions { config: *config, ..RefreshOptions::default() };
    let view = LiveView::new(seeds, live);
    let outcome = with_live_view(view, |observer| stagger_tokio::refresh_with(&options, seeds, observer))
        .await
        .map_err(|e| Failure::refresh(e.to_string()))?;
    if !live {
        print!("{}", output::attempts(&outcome.attempts));
    }
    println!("  got metadata from {} in {:.1} ms", outcome.winner, ms(outcome.elapsed));
    Ok(outcome)
}

/// Keeps the demo cluster up with one WebSocket bridge per broker (and the web demo for
/// `--web`, whose page's origin the bridges allow) until Ctrl-C.
async fn serve(cluster: &DemoCluster, args: &DemoArgs) -> Result<(), Failure> {
    // The page's origin must be known before the bridges start: serve it first.
    let web_port = match args.web {
        true => Some(web::serve(web::dist_dir(), args.port).map_err(Failure::usage)?),
        false => None,
    };
    let page_origin: Vec<String> = web_port.map(|port| format!("http://127.0.0.1:{port}")).into_iter().collect();
    let options = args.access.options(&page_origin, "stagger demo: bridge")?;
    let mut bridges = Vec::new();
    for (_, address, _) in &cluster.brokers {
        let listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let bridge = stagger_bridge::Bridge::bind_with(listen, address.clone(), options.clone())
            .await
            .map_err(|e| Failure::refresh(format!("could not open a WebSocket bridge: {e}")))?;
        bridges.push(bridge.spawn());
    }
    let ws: Vec<String> = bridges.iter().map(|b| b.url()).collect();
    println!("\nbootstrap (TCP):       {}", cluster.seeds().join(","));
    println!("bootstrap (WebSocket): {}", ws.join(","));
    println!("bridges {}", describe_access(&options));
    if let Some(port) = web_port {
        println!("\nweb demo: http://127.0.0.1:{port}/?live={}#view=live", ws.join(","));
    }
    println!("serving until Ctrl-C");
    let _ = tokio::signal::ctrl_c().await;
    for b in bridges {
        let _ = b.shutdown().await;
    }
    Ok(())
}

async fn bridge(args: BridgeArgs) -> Result<(), Failure> {
    let mut options = args.access.options(&[], "stagger bridge")?;
    options.token = bridge_token(&args)?;
    let generated = args.generate_token;
    let bridge = stagger_bridge::Bridge::bind_with(args.listen, args.to.clone(), options)
        .await
        .map_err(|e| Failure::usage(format!("could not listen on {}: {e}", args.listen)))?;
    println!("bridging {} -> {} until Ctrl-C", bridge.url(), args.to);
    println!("{}", describe_access(bridge.options()));
    if generated {
        // The one place the token is shown: the URL the user must give the page.
        println!("connect to {}", bridge.url_with_token());
    }
    if !args.listen.ip().is_loopback() {
        let unguarded = if bridge.options().token.is_none() {
            "; without a token, anyone who can reach it can use the broker through it (--token-file, --generate-token)"
        } else {
            ""
        };
        eprintln!("warning: {} is reachable from other machines, not just this one{unguarded}", args.listen);
    }
    if bridge.options().origins.allows_any() && bridge.options().token.is_none() {
        eprintln!("warning: --allow-any-origin without a token: every web page opened in a browser on this machine can use the bridge");
    }
    let running = bridge.spawn();
    let _ = tokio::signal::ctrl_c().await;
    let _ = running.shutdown().await;
    Ok(())
}

/// The token `stagger bridge` requires, from --token, --token-file or --generate-token.
fn bridge_token(args: &BridgeArgs) -> Result<Option<stagger_bridge::Token>, Failure> {
    use stagger_bridge::Token;
    if args.generate_token {
        return Token::generate().map(Some).map_err(|e| Failure::refresh(format!("--generate-token: {e}")));
    }
    if let Some(path) = &args.token_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::usage(format!("--token-file: could not read {}: {e}", path.display())))?;
        let first = text.lines().next().unwrap_or_default();
        return Token::new(first)
            .map(Some)
            .map_err(|e| Failure::usage(format!("--token-file {}: {e}", path.display())));
    }
    match &args.token {
        Some(text) => Token::new(text).map(Some).map_err(|e| Failure::usage(format!("--token: {e}"))),
        None => Ok(None),
    }
}

/// Runs `refresh` with `view` observing its events and redrawing every 100 ms, so the
/// "for …" counters of waiting brokers keep moving between events.
async fn with_live_view<F, Fut, T>(view: LiveView, refresh: F) -> T
where
    F: FnOnce(Box<dyn FnMut(&stagger_tokio::Event) + Send>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let view = std::sync::Arc::new(std::sync::Mutex::new(view));
    let ticker = {
        let view = view.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(Duration::from_millis(100));
            loop {
                interval.tick().await;
                if let Ok(mut v) = view.lock() {
                    v.tick();
                }
            }
        })
    };
    let observer_view = view.clone();
    let observer = Box::new(move |e: &stagger_tokio::Event| {
        if let Ok(mut v) = observer_view.lock() {
            v.on_event(e);
        }
    });
    let result = refresh(observer).await;
    ticker.abort();
    if let Ok(mut v) = view.lock() {
        v.tick();
    }
    result
}
