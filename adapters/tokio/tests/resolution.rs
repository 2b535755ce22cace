//! Seeds given by name, resolved through the core (issue 16, item 5), against a DNS server
//! on loopback (hickory-server, `common/dns.rs`): every address of a name is a candidate
//! the fan-out staggers over, a name that does not exist fails as `Dns`, and a resolver
//! that never answers is an attempt error bounded by the attempt timeout, not a hang.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use stagger::{ErrorKind, RefreshConfig};
use stagger_test_faults::mock::Mock;
use stagger_tokio::{refresh_with, AttemptOutcome, DnsOptions, Error, RefreshOptions, Resolver};

#[path = "common/dns.rs"]
mod dns;
use dns::{Blackhole, DnsServer, SilentDns};

fn options(name_server: SocketAddr, attempt_timeout: Duration) -> RefreshOptions {
    let mut config = RefreshConfig { attempt_timeout, ..RefreshConfig::default() };
    config.retry.retries = 0;
    let dns = DnsOptions { name_servers: vec![name_server], ..DnsOptions::default() };
    RefreshOptions { config, resolver: Resolver::Dns(dns), ..RefreshOptions::default() }
}

const LIVE: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const DEAD: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_whose_first_address_is_blackholed_gets_metadata_from_the_second_without_waiting() {
    let mock = Mock::start(1, &[("alpha", 1)]);
    let port = mock.ports()[0];
    let _hole = Blackhole::start(SocketAddr::new(DEAD, port)).await;
    let dns = DnsServer::start("test.", &[("kafka.test.", DEAD), ("kafka.test.", LIVE)]).await;
    let seeds = [format!("kafka.test:{port}")];
    let started = Instant::now();
    let outcome = refresh_with(&options(dns.address, Duration::from_secs(10)), &seeds, |_| {}).await.expect("metadata");
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}: the blackholed address was waited out");
    assert_eq!(outcome.winner, format!("127.0.0.1:{port}"));
    let resolved = &outcome.attempts[0];
    assert_eq!(resolved.broker, seeds[0]);
    let AttemptOutcome::Resolved(addresses) = &resolved.outcome else { panic!("{resolved:?}") };
    let both = [SocketAddr::new(DEAD, port), SocketAddr::new(LIVE, port)];
    assert_eq!(addresses[..], both, "both A records, in the server's order");
    let tried: Vec<&str> = outcome.attempts[1..].iter().map(|a| a.broker.as_str()).collect();
    assert_eq!(tried, [format!("127.0.0.2:{port}"), format!("127.0.0.1:{port}")], "{:#?}", outcome.attempts);
    assert!(matches!(outcome.attempts[1].outcome, AttemptOutcome::Cancelled(_)), "{:?}", outcome.attempts[1]);
    assert_eq!(outcome.attempts[2].outcome, AttemptOutcome::Won);
}

#[tokio::test]
async fn a_name_that_does_not_exist_fails_as_dns() {
    let dns = DnsServer::start("test.", &[("kafka.test.", LIVE)]).await;
    let started = Instant::now();
    let error = refresh_with(&options(dns.address, Duration::from_secs(10)), &["missing.test:9092"], |_| {})
        .await
        .expect_err("no such name");
    assert!(started.elapsed() < Duration::from_secs(5), "NXDOMAIN is an answer, not a timeout");
    let Error::Refresh { error, attempts, .. } = error else { panic!("{error}") };
    let (_, _, last) = error.last_error.clone().expect("a last error");
    assert_eq!(last.kind, ErrorKind::Dns, "{error}");
    assert!(matches!(&attempts[0].outcome, AttemptOutcome::Failed(e) if e.kind == ErrorKind::Dns), "{attempts:?}");
}

#[tokio::test]
async fn a_resolver_that_never_answers_is_an_attempt_error_bounded_by_the_attempt_timeout() {
    let silent = SilentDns::start().await;
    let mut options = options(silent.address, Duration::from_secs(1));
    // The resolver itself would wait far longer: the core's attempt timeout decides.
    options.resolver =
        Resolver::Dns(DnsOptions { name_servers: vec![silent.address], timeout: Duration::from_secs(30), attempts: 1 });
    let started = Instant::now();
    let error = refresh_with(&options, &["kafka.test:9092"], |_| {}).await.expect_err("no answer");
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(4), "took {elapsed:?}");
    let Error::Refresh { error, .. } = error else { panic!("{error}") };
    let (_, _, last) = error.last_error.clone().expect("a last error");
    assert_eq!(last.kind, ErrorKind::Dns, "{error}");
    assert!(silent.queries() > 0, "the resolver was asked");
}

/// The system resolver stays the default: `localhost` resolves through it, each address a
/// candidate of its own.
#[tokio::test]
async fn the_system_resolver_is_the_default() {
    let mock = Mock::start(1, &[("alpha", 1)]);
    let port = mock.ports()[0];
    let seeds = [format!("localhost:{port}")];
    let outcome = refresh_with(&RefreshOptions::default(), &seeds, |_| {}).await.expect("metadata");
    assert!(matches!(outcome.attempts[0].outcome, AttemptOutcome::Resolved(_)), "{:?}", outcome.attempts);
    assert!(outcome.winner.ends_with(&format!(":{port}")) && !outcome.winner.starts_with("localhost"));
}
