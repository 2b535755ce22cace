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
  stagger demo --web              # also serve the web demo, its Live view wired to the cluster")]
    Demo(DemoArgs),
    /// Bridge WebSockets to a Kafka broker's TCP port (for browsers; websockify-compatible).
    #[command(after_help = "Examples:
  stagger bridge --listen 127.0.0.1:9100 --to 127.0.0.1:9092")]
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
    /// Address to accept WebSocket connections on.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9100")]
    listen: std::net::SocketAddr,
    /// The broker (host:port) each WebSocket is connected to.
    #[arg(long, value_name = "HOST:PORT")]
    to: String,
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
    let cli = Cli::parse();
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
                print!("{}", output::table(&outcome.metadata, &outcome.winner));
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
    let config = args.policy.to_config().map_err(Failure::usage)?;
    let cluster = DemoCluster::start(args.brokers, args.hung, args.down).await.map_err(Failure::usage)?;
    println!("stagger demo: a {}-broker Kafka cluster (librdkafka's mock) on loopback", args.brokers);
    for (id, address, role) in &cluster.brokers {
        println!("  broker {id}  {address:<22} {}", role.describe());
    }
    let seeds = cluster.seeds();
    println!("seed list, worst first: {}", seeds.join(","));
    if args.serve || args.web {
        return serve(&cluster, &args).await;
    }
    let live = live_enabled(false);
    let name = args.policy.preset.clone().unwrap_or_else(|| "adaptive (default)".into());
    println!("\nRefreshing with {name}:");
    let fast = run(&config, &seeds, live).await?;
    print!("\n{}", output::table(&fast.metadata, &fast.winner));
    if args.no_compare {
        return Ok(());
    }
    let mut sequential = RefreshConfig::sequential();
    sequential.attempt_timeout = args.sequential_timeout;
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
/// `--web`) until Ctrl-C.
async fn serve(cluster: &DemoCluster, args: &DemoArgs) -> Result<(), Failure> {
    let mut bridges = Vec::new();
    for (_, address, _) in &cluster.brokers {
        let listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let bridge = stagger_bridge::Bridge::bind(listen, address.clone())
            .await
            .map_err(|e| Failure::refresh(format!("could not open a WebSocket bridge: {e}")))?;
        bridges.push(bridge.spawn());
    }
    let ws: Vec<String> = bridges.iter().map(|b| b.url()).collect();
    println!("\nbootstrap (TCP):       {}", cluster.seeds().join(","));
    println!("bootstrap (WebSocket): {}", ws.join(","));
    if args.web {
        let port = web::serve(web::dist_dir(), args.port).map_err(Failure::usage)?;
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
    let bridge = stagger_bridge::Bridge::bind(args.listen, args.to.clone())
        .await
        .map_err(|e| Failure::usage(format!("could not listen on {}: {e}", args.listen)))?;
    println!("bridging {} -> {} until Ctrl-C", bridge.url(), args.to);
    let running = bridge.spawn();
    let _ = tokio::signal::ctrl_c().await;
    let _ = running.shutdown().await;
    Ok(())
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
