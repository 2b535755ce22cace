//! The browser tests' fixture: a real Kafka-protocol cluster behind one WebSocket bridge per
//! broker, all on 127.0.0.1.
//!
//! ```text
//! cargo run -p stagger-bridge --example testbed -- [--brokers N] [--hung K] [--down K] [--topics a:3,b:1]
//!     [--allow-origin ORIGIN]… [--allow-any-origin] [--token TOKEN]
//! ```
//!
//! Starts librdkafka's mock cluster in-process (through the `rdkafka` crate) with brokers
//! `1..=N` (default 4) and the topics (default `orders:3,payments:1`); brokers `1..=K` are
//! made hung (`--hung K`: connections accepted, requests read, answers held for an hour) and
//! the next `--down K` are taken down (`broker_down`: new connections refused). Then it opens
//! one bridge per broker and prints one JSON line on stdout. The bridges have the default
//! options (metadata requests only), so a browser page can only use them when its origin is
//! given with `--allow-origin` (repeatable; e.g. the test server's `http://127.0.0.1:PORT`),
//! or with `--allow-any-origin`. With `--token`, every bridge requires it, and `ws` is the
//! URL with the token (`url` the one without):
//!
//! ```text
//! {"brokers":[{"id":1,"tcp":"127.0.0.1:p","ws":"ws://127.0.0.1:q","url":"ws://127.0.0.1:q","state":"hung","target":"127.0.0.1:p"},…],
//!  "topics":[{"name":"orders","partitions":3},…]}
//! ```
//!
//! It serves until stdin closes, `quit` is read, or SIGTERM/SIGINT arrives. Each `stats` line
//! on stdin is answered by one JSON line with every bridge's counters (`open` is the number
//! of WebSocket connections being served right now), which lets a test prove that a browser
//! really closed its sockets.
//!
//! On the wire, `broker_down` (librdkafka 2.12) closes the broker's listener and keeps the
//! port bound but not listening, so a TCP connect is refused at once and the bridge fails the
//! WebSocket upgrade with 502. The testbed checks that at startup: should a down broker
//! still accept TCP, its bridge is pointed at a closed loopback port instead (`target` in
//! the JSON says where each bridge goes), so the browser always sees a real refusal.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::types::RDKafkaApiKey;
use rdkafka::ClientConfig;
use serde_json::json;
use stagger_bridge::{Bridge, BridgeOptions, EventSink, OriginPolicy, RunningBridge, Token};
use tokio::io::AsyncBufReadExt;

/// What the command line asks for.
struct Args {
    brokers: i32,
    hung: i32,
    down: i32,
    topics: Vec<(String, i32)>,
    origins: OriginPolicy,
    token: Option<Token>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        brokers: 4,
        hung: 0,
        down: 0,
        topics: vec![("orders".into(), 3), ("payments".into(), 1)],
        origins: OriginPolicy::new(),
        token: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<i32>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--brokers" => args.brokers = number(value()?)?,
            "--hung" => args.hung = number(value()?)?,
            "--down" => args.down = number(value()?)?,
            "--topics" => {
                args.topics = value()?
                    .split(',')
                    .filter(|t| !t.is_empty())
                    .map(|t| match t.split_once(':') {
                        Some((name, n)) => n.parse().map(|n| (name.to_owned(), n)).map_err(|e| format!("{t}: {e}")),
                        None => Ok((t.to_owned(), 1)),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--allow-origin" => {
                args.origins = std::mem::take(&mut args.origins).allow(&value()?).map_err(|e| format!("{flag}: {e}"))?
            }
            "--allow-any-origin" => args.origins = OriginPolicy::any(),
            "--token" => args.token = Some(Token::new(&value()?).map_err(|e| format!("{flag}: {e}"))?),
            "-h" | "--help" => {
                return Err("usage: testbed [--brokers N] [--hung K] [--down K] [--topics name:partitions,…] \
                            [--allow-origin ORIGIN]… [--allow-any-origin] [--token TOKEN]"
                    .into())
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.brokers < 1 || args.hung < 0 || args.down < 0 || args.hung + args.down > args.brokers {
        return Err("need --brokers ≥ 1 and --hung + --down ≤ --brokers".into());
    }
    Ok(args)
}

/// `(node id, "host:port")` of every broker, as librdkafka's own client sees the cluster.
fn broker_addresses(bootstrap: &str) -> Vec<(i32, String)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("log_level", "3")
        .create()
        .expect("librdkafka consumer");
    let metadata = consumer.fetch_metadata(None, Duration::from_secs(10)).expect("metadata from the mock cluster");
    let mut brokers: Vec<(i32, String)> =
        metadata.brokers().iter().map(|b| (b.id(), format!("{}:{}", b.host(), b.port()))).collect();
    brokers.sort();
    brokers
}

/// Whether a TCP connect to `address` is refused (what a down broker must do).
fn refuses(address: &str) -> bool {
    let addr: SocketAddr = address.parse().expect("mock brokers listen on IP addresses");
    matches!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)), Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").to_string()
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("testbed: {message}");
            std::process::exit(2);
        }
    };
    let cluster = MockCluster::new(args.brokers).expect("mock cluster");
    // librdkafka 2.12's mock appends a stray tagged-fields byte to flexible (v9+) Metadata
    // responses, which the core's exchange rightly rejects; v8 keeps the mock standard (the
    // tokio adapter's tests do the same).
    cluster.apiversion(RDKafkaApiKey::Metadata, Some(0), Some(8)).expect("cap Metadata at v8");
    for (name, partitions) in &args.topics {
        cluster.create_topic(name, *partitions, args.brokers.min(3)).expect("create topic");
    }
    let addresses = broker_addresses(&cluster.bootstrap_servers());
    assert_eq!(addresses.len(), args.brokers as usize, "librdkafka sees every mock broker");

    let mut plan = Vec::new();
    for (id, tcp) in &addresses {
        let (state, target) = if *id <= args.hung {
            cluster.broker_round_trip_time(*id, Duration::from_secs(3600)).expect("hang broker");
            ("hung", tcp.clone())
        } else if *id <= args.hung + args.down {
            cluster.broker_down(*id).expect("take broker down");
            let target = if refuses(tcp) { tcp.clone() } else { closed_port() };
            ("down", target)
        } else {
            ("healthy", tcp.clone())
        };
        plan.push((*id, tcp.clone(), state, target));
    }

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(async {
        let mut bridges: Vec<RunningBridge> = Vec::new();
        for (_, _, _, target) in &plan {
            let options = BridgeOptions {
                origins: args.origins.clone(),
                token: args.token.clone(),
                // Refusals on stderr, where a failing test's output shows them.
                events: Some(EventSink::new(|event| eprintln!("testbed: bridge {event}"))),
                ..BridgeOptions::default()
            };
            let bridge =
                Bridge::bind_with("127.0.0.1:0".parse().unwrap(), target.clone(), options).await.expect("bind bridge");
            bridges.push(bridge.spawn());
        }
        let brokers: Vec<_> = plan
            .iter()
            .zip(&bridges)
            .map(|((id, tcp, state, target), bridge)| {
                json!({
                    "id": id, "tcp": tcp, "ws": bridge.url_with_token(), "url": bridge.url(),
                    "state": state, "target": target,
                })
            })
            .collect();
        let topics: Vec<_> =
            args.topics.iter().map(|(name, partitions)| json!({ "name": name, "partitions": partitions })).collect();
        say(&json!({ "brokers": brokers, "topics": topics }));

        serve(&bridges).await;
        for bridge in bridges {
            let _ = bridge.shutdown().await;
        }
    });
    drop(cluster);
}

/// Answers `stats` lines until stdin closes, `quit`, or SIGTERM/SIGINT.
async fn serve(bridges: &[RunningBridge]) {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    loop {
        tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(line)) => match line.trim() {
                    "stats" => {
                        let stats: Vec<_> = bridges
                            .iter()
                            .map(|b| {
                                let s = b.stats().snapshot();
                                json!({
                                    "ws": b.url(), "open": s.open, "accepted": s.accepted, "upgraded": s.upgraded,
                                    "target_failures": s.target_failures, "text_rejected": s.text_rejected,
                                    "origin_refused": s.origin_refused, "token_refused": s.token_refused,
                                    "requests_refused": s.requests_refused,
                                })
                            })
                            .collect();
                        say(&json!({ "stats": stats }));
                    }
                    "quit" => return,
                    "" => {}
                    other => eprintln!("testbed: unknown command {other:?} (try `stats` or `quit`)"),
                },
                _ => return,
            },
            _ = term.recv() => return,
            _ = tokio::signal::ctrl_c() => return,
        }
    }
}

/// Prints one JSON line and flushes, so a parent reading line by line sees it at once.
fn say(value: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}
