//! DNS faults against a DNS server on loopback (hickory-server, `common/dns.rs`, its
//! behaviour set per name and changed while it runs): NXDOMAIN, SERVFAIL, a name with no
//! address, a server that never answers (over UDP, and over TCP after a truncated answer),
//! a name whose addresses change under a long-lived client, and a name of which only some
//! addresses work. Each failure is an attempt error of kind `Dns` whose detail says which
//! failure it was, bounded by the attempt timeout and the refresh's deadline; another seed
//! that answers still makes the refresh succeed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use stagger::{ClusterConfig, ErrorKind, GiveUpReason, RefreshConfig, RefreshError};
use stagger_kafka_fixture::Forwarder;
use stagger_test_faults::bounded;
use stagger_test_faults::mock::{Mock, View};
use stagger_tokio::{
    refresh_with, AttemptOutcome, AttemptReport, Client, ClientOptions, DnsOptions, Error, RefreshOptions, Resolver,
};

#[path = "common/dns.rs"]
mod dns;
use dns::{Behaviour, Blackhole, DnsServer, Refusing, SilentDns};

const LIVE: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const HOLE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const SHUT: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
const SHUT6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

/// The attempt timeout of the tests that must not wait one out: whatever they wait for
/// instead has to finish well under it.
const PATIENT: Duration = Duration::from_secs(20);

/// Generous: the DNS answers of these tests come from loopback in microseconds.
const PROMPT: Duration = Duration::from_secs(5);

fn dns_options(name_servers: Vec<SocketAddr>, timeout: Duration, attempts: usize) -> DnsOptions {
    DnsOptions { name_servers, timeout, attempts }
}

/// One pass (no retries), attempt timeout `attempt_timeout`, the seeds in the order given,
/// resolved by `dns`.
fn options(dns: DnsOptions, attempt_timeout: Duration) -> RefreshOptions {
    let mut config = RefreshConfig { attempt_timeout, shuffle_seeds: false, ..RefreshConfig::default() };
    config.retry.retries = 0;
    RefreshOptions { config, resolver: Resolver::Dns(dns), ..RefreshOptions::default() }
}

/// [`options`] asking only `server`, with the default resolver timeouts.
fn asking(server: &DnsServer) -> RefreshOptions {
    options(DnsOptions { name_servers: vec![server.address], ..DnsOptions::default() }, PATIENT)
}

fn failed(report: &AttemptReport) -> &stagger::AttemptError {
    match &report.outcome {
        AttemptOutcome::Failed(e) => e,
        other => panic!("{} did not fail: {other}", report.broker),
    }
}

/// The core's verdict and the attempts of a refresh that gave up.
fn gave_up(result: Result<stagger_tokio::RefreshOutcome, Error>) -> (RefreshError, Vec<AttemptReport>) {
    match result {
        Err(Error::Refresh { error, attempts, .. }) => (error, attempts),
        Err(other) => panic!("not a refresh error: {other}"),
        Ok(outcome) => panic!("metadata from {}", outcome.winner),
    }
}

/// Every broker of `error` failed last with kind `Dns` and a detail containing `detail`.
fn every_broker_failed_with(error: &RefreshError, detail: &str) {
    assert!(!error.brokers.is_empty(), "{error}");
    for broker in &error.brokers {
        let last = broker.last_error.as_ref().unwrap_or_else(|| panic!("{}: no error: {error}", broker.address));
        assert_eq!(last.kind, ErrorKind::Dns, "{error}");
        assert!(last.detail.contains(detail), "{}: {last}, not {detail:?}", broker.address);
    }
}

// 1. NXDOMAIN.

#[tokio::test]
async fn nxdomain_for_a_seed_name_is_a_dns_error_and_another_seed_answers() {
    bounded(async {
        let mock = Mock::start(1, &[("alpha", 1)]);
        let port = mock.ports()[0];
        let dns = DnsServer::start("test.", &[("kafka.test.", LIVE)]).await;
        dns.set("missing.test.", Behaviour::NxDomain);
        let seeds = [format!("missing.test:{port}"), format!("kafka.test:{port}")];
        let started = Instant::now();
        let outcome = refresh_with(&asking(&dns), &seeds, |_| {}).await.expect("metadata from the second seed");
        assert!(started.elapsed() < PROMPT, "took {:?}: NXDOMAIN is an answer", started.elapsed());
        assert_eq!(outcome.winner, format!("127.0.0.1:{port}"));
        let missing = outcome.attempts.iter().find(|a| a.broker == seeds[0]).expect("the missing name was tried");
        let error = failed(missing);
        assert_eq!(error.kind, ErrorKind::Dns, "{error}");
        assert!(error.detail.contains("no such name (NXDOMAIN)"), "{error}");
        assert!(dns.udp_queries("missing.test.") > 0);
    })
    .await;
}

#[tokio::test]
async fn nxdomain_for_every_seed_gives_up_with_it_in_every_brokers_errors() {
    bounded(async {
        let dns = DnsServer::start("test.", &[]).await;
        dns.set_ttl(0);
        let mut options = asking(&dns);
        options.config.retry.retries = 1;
        options.config.retry.initial = Duration::from_millis(50);
        let seeds = ["missing.test:9092", "gone.test:9092"];
        let started = Instant::now();
        let (error, attempts) = gave_up(refresh_with(&options, &seeds, |_| {}).await);
        assert!(started.elapsed() < PROMPT, "took {:?}: NXDOMAIN is an answer", started.elapsed());
        assert_eq!(error.reason, GiveUpReason::AllFailed { passes: 2 }, "{error}");
        every_broker_failed_with(&error, "no such name (NXDOMAIN)");
        assert!(error.brokers.iter().all(|b| b.attempts == 2), "each name once per pass: {error}");
        let (_, _, last) = error.last_error.as_ref().expect("a last error");
        assert!(last.detail.contains("NXDOMAIN"), "{error}");
        assert_eq!(attempts.len(), 4, "{attempts:#?}");
        for attempt in &attempts {
            let e = failed(attempt);
            assert!(e.kind == ErrorKind::Dns && e.detail.contains("no such name (NXDOMAIN)"), "{e}");
        }
    })
    .await;
}

// 2. SERVFAIL.

#[tokio::test]
async fn servfail_is_a_dns_error_and_another_seed_answers() {
    bounded(async {
        let mock = Mock::start(1, &[("alpha", 1)]);
        let port = mock.ports()[0];
        let dns = DnsServer::start("test.", &[("kafka.test.", LIVE)]).await;
        dns.set("broken.test.", Behaviour::ServFail);

        // Alone, it gives up with SERVFAIL as every broker's error.
        let alone = [format!("broken.test:{port}")];
        let started = Instant::now();
        let (error, attempts) = gave_up(refresh_with(&asking(&dns), &alone, |_| {}).await);
        assert!(started.elapsed() < PROMPT, "took {:?}: SERVFAIL is an answer", started.elapsed());
        every_broker_failed_with(&error, "resolver failure (SERVFAIL)");
        assert!(failed(&attempts[0]).detail.contains("SERVFAIL"), "{attempts:?}");

        // With a seed that resolves, the refresh succeeds from it.
        let seeds = [format!("broken.test:{port}"), format!("kafka.test:{port}")];
        let outcome = refresh_with(&asking(&dns), &seeds, |_| {}).await.expect("metadata from the second seed");
        assert_eq!(outcome.winner, format!("127.0.0.1:{port}"));
        let broken = outcome.attempts.iter().find(|a| a.broker == seeds[0]).expect("the broken name was tried");
        let error = failed(broken);
        assert!(error.kind == ErrorKind::Dns && error.detail.contains("resolver failure (SERVFAIL)"), "{error}");
    })
    .await;
}

/// A name that exists with no A or AAAA record (NOERROR, no data) is "no addresses".
#[tokio::test]
async fn a_name_without_addresses_is_a_dns_error() {
    bounded(async {
        let dns = DnsServer::start("test.", &[]).await;
        dns.set("empty.test.", Behaviour::Answer(Vec::new()));
        let (error, _) = gave_up(refresh_with(&asking(&dns), &["empty.test:9092"], |_| {}).await);
        every_broker_failed_with(&error, "no addresses");
    })
    .await;
}

// 3. A DNS server that never answers.

/// The resolver's own timeout and tries, set well under the attempt timeout, are what ends
/// the lookup: each query waits `timeout`, each is asked `attempts` times (A and AAAA).
#[tokio::test]
async fn dropped_queries_fail_as_a_resolver_timeout_after_the_resolvers_tries() {
    bounded(async {
        let dns = DnsServer::start("test.", &[]).await;
        dns.set("dropped.test.", Behaviour::Drop);
        let timeout = Duration::from_millis(300);
        let options = options(dns_options(vec![dns.address], timeout, 2), PATIENT);
        let started = Instant::now();
        let (error, attempts) = gave_up(refresh_with(&options, &["dropped.test:9092"], |_| {}).await);
        let elapsed = started.elapsed();
        assert!(elapsed >= 2 * timeout, "took {elapsed:?}: two tries of {timeout:?} each were not waited");
        assert!(elapsed < PATIENT / 2, "took {elapsed:?}: the resolver's timeout was not honoured");
        every_broker_failed_with(&error, "resolver timed out");
        assert!(failed(&attempts[0]).detail.contains("resolver timed out"), "{attempts:?}");
        assert_eq!(dns.udp_queries("dropped.test."), 4, "2 tries, each of A and AAAA");
        assert_eq!(dns.tcp_queries("dropped.test."), 0, "a timeout is not retried over TCP");
    })
    .await;
}

/// A resolver that would wait far longer than the attempt timeout is cut off by it.
#[tokio::test]
async fn a_resolver_that_never_answers_is_cut_off_by_the_attempt_timeout() {
    bounded(async {
        let silent = SilentDns::start().await;
        let attempt_timeout = Duration::from_secs(1);
        let options = options(dns_options(vec![silent.address], Duration::from_secs(30), 1), attempt_timeout);
        let started = Instant::now();
        let (error, attempts) = gave_up(refresh_with(&options, &["kafka.test:9092"], |_| {}).await);
        let elapsed = started.elapsed();
        assert!(elapsed >= attempt_timeout && elapsed < attempt_timeout + PROMPT, "took {elapsed:?}");
        // The core's detail: the lookup did not finish within the attempt timeout.
        every_broker_failed_with(&error, "no answer from the resolver within the attempt timeout");
        // The attempt's report says what the core's error says.
        assert_eq!(failed(&attempts[0]), &stagger::AttemptError::timed_out(true, false), "{attempts:?}");
        assert!(silent.queries() > 0, "the resolver was asked");
    })
    .await;
}

/// The refresh's deadline, shorter than both the attempt and the resolver's timeout, ends
/// a lookup that never finishes.
#[tokio::test]
async fn a_resolver_that_never_answers_is_cut_off_by_the_deadline() {
    bounded(async {
        let silent = SilentDns::start().await;
        let mut options = options(dns_options(vec![silent.address], Duration::from_secs(30), 1), PATIENT);
        options.config.deadline = Duration::from_secs(1);
        let started = Instant::now();
        let (error, _) = gave_up(refresh_with(&options, &["kafka.test:9092"], |_| {}).await);
        let elapsed = started.elapsed();
        assert!(elapsed >= options.config.deadline && elapsed < PATIENT / 2, "took {elapsed:?}");
        assert_eq!(error.reason, GiveUpReason::DeadlineExceeded, "{error}");
    })
    .await;
}

/// A truncated answer over UDP sends the resolver to TCP; a TCP server that never answers
/// is a resolver timeout too, bounded the same way.
#[tokio::test]
async fn a_truncated_answer_then_silence_over_tcp_fails_as_a_resolver_timeout() {
    bounded(async {
        let dns = DnsServer::start("test.", &[]).await;
        dns.set("big.test.", Behaviour::Truncated(Box::new(Behaviour::Drop)));
        let timeout = Duration::from_millis(300);
        let options = options(dns_options(vec![dns.address], timeout, 2), PATIENT);
        let started = Instant::now();
        let (error, _) = gave_up(refresh_with(&options, &["big.test:9092"], |_| {}).await);
        let elapsed = started.elapsed();
        assert!(elapsed >= 2 * timeout && elapsed < PATIENT / 2, "took {elapsed:?}");
        every_broker_failed_with(&error, "resolver timed out");
        assert_eq!(dns.tcp_queries("big.test."), 4, "asked again over TCP, 2 tries of A and AAAA");
        assert_eq!(dns.udp_queries("big.test."), 4, "each try starts over UDP");
    })
    .await;
}

/// The TCP path works: a truncated answer is asked again over TCP, and its addresses are
/// the candidates.
#[tokio::test]
async fn a_truncated_answer_is_asked_again_over_tcp() {
    bounded(async {
        let mock = Mock::start(1, &[("alpha", 1)]);
        let port = mock.ports()[0];
        let dns = DnsServer::start("test.", &[]).await;
        dns.set("big.test.", Behaviour::Truncated(Box::new(Behaviour::Answer(vec![LIVE]))));
        let outcome = refresh_with(&asking(&dns), &[format!("big.test:{port}")], |_| {}).await.expect("metadata");
        assert_eq!(outcome.winner, format!("127.0.0.1:{port}"));
        assert!(dns.tcp_queries("big.test.") > 0);
    })
    .await;
}

/// Of two name servers, the first never answering, the second answers the lookup: it does
/// not wait out the first's timeout.
#[tokio::test]
async fn a_name_server_that_never_answers_is_not_waited_out_when_another_answers() {
    bounded(async {
        let mock = Mock::start(1, &[("alpha", 1)]);
        let port = mock.ports()[0];
        let silent = SilentDns::start().await;
        let dns = DnsServer::start("test.", &[("kafka.test.", LIVE)]).await;
        let timeout = Duration::from_secs(15);
        let options = options(dns_options(vec![silent.address, dns.address], timeout, 1), PATIENT);
        let started = Instant::now();
        let outcome = refresh_with(&options, &[format!("kafka.test:{port}")], |_| {}).await.expect("metadata");
        assert!(started.elapsed() < timeout / 2, "took {:?}", started.elapsed());
        assert_eq!(outcome.winner, format!("127.0.0.1:{port}"));
    })
    .await;
}

// 4. A name whose addresses change between refreshes.

/// A long-lived client resolves its seed name again when a refresh reaches it (and the
/// resolver caches answers no longer than their TTL, here 0): when the name moves from
/// broker A to broker B and A stops, the next refresh follows the name to B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_follows_a_seed_name_to_its_new_address() {
    bounded(async {
        let (a, b) = (Mock::start(1, &[("alpha", 1)]), Mock::start(1, &[("beta", 1)]));
        // The name's two addresses share a port (a seed's port is its name's): forwarders
        // on 127.0.0.2 and 127.0.0.3 in front of each mock broker.
        let front_a = Forwarder::bind(SocketAddr::new(HOLE, 0), &a.address(1)).await;
        let port: u16 = front_a.address().rsplit_once(':').unwrap().1.parse().unwrap();
        let front_b = Forwarder::bind(SocketAddr::new(SHUT, port), &b.address(1)).await;
        let dns = DnsServer::start("test.", &[("kafka.test.", HOLE)]).await;
        dns.set_ttl(0);
        let mut config = ClusterConfig::default();
        config.refresh.attempt_timeout = PATIENT;
        let resolver = Resolver::Dns(DnsOptions { name_servers: vec![dns.address], ..DnsOptions::default() });
        let seeds = [format!("kafka.test:{port}")];
        let client = Client::new(config, &seeds, ClientOptions { resolver, ..ClientOptions::default() }).unwrap();

        let first = client.refresh().await.expect("metadata from A");
        assert_eq!(View::of(&first).brokers, a.view.brokers);
        assert_eq!(client.stats().kept.as_deref(), Some(front_a.address()));

        // The name moves to B; A stops (its address and the broker it advertised refuse).
        dns.set("kafka.test.", Behaviour::Answer(vec![SHUT]));
        let asked = dns.udp_queries("kafka.test.");
        drop(front_a);
        a.down(1);
        let started = Instant::now();
        let second = client.refresh().await.expect("metadata from B");
        assert!(started.elapsed() < PATIENT / 2, "took {:?}", started.elapsed());
        assert_eq!(View::of(&second).brokers, b.view.brokers, "the client followed the name");
        assert!(dns.udp_queries("kafka.test.") > asked, "the name was looked up again");
        assert_eq!(client.stats().kept.as_deref(), Some(front_b.address()));
        client.close().await;
    })
    .await;
}

// 5. A name of which only some addresses work.

/// A name with a refusing address (and, with IPv6, a refusing AAAA record), a blackholed
/// one (connect never completes) and a live one, the live one last: metadata comes from
/// the live one without waiting out the attempt timeout on the blackholed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_of_which_only_one_address_works_gets_metadata_from_it_without_waiting() {
    bounded(async {
        let mock = Mock::start(1, &[("alpha", 1)]);
        let port = mock.ports()[0];
        let live = SocketAddr::new(LIVE, port);
        let refusing = Refusing::new(SocketAddr::new(SHUT, port)).expect("127.0.0.3 on loopback");
        let refusing6 = Refusing::new(SocketAddr::new(SHUT6, port));
        let hole = Blackhole::start(SocketAddr::new(HOLE, port)).await;
        let mut records = vec![("kafka.test.", refusing.address.ip()), ("kafka.test.", HOLE), ("kafka.test.", LIVE)];
        records.extend(refusing6.as_ref().map(|r| ("kafka.test.", r.address.ip())));
        let dns = DnsServer::start("test.", &records).await;
        let seeds = [format!("kafka.test:{port}")];
        let started = Instant::now();
        let outcome = refresh_with(&asking(&dns), &seeds, |_| {}).await.expect("metadata");
        let elapsed = started.elapsed();
        assert!(elapsed < PATIENT / 2, "took {elapsed:?}: an attempt timeout was waited out");
        assert_eq!(outcome.winner, live.to_string());

        let AttemptOutcome::Resolved(addresses) = &outcome.attempts[0].outcome else { panic!("{outcome:?}") };
        assert_eq!(addresses.len(), records.len(), "every record: {addresses:?}");
        let of = |address: SocketAddr| outcome.attempts.iter().find(|a| a.broker == address.to_string());
        // The IPv4 addresses are tried in the server's order (RFC 8305 interleaves the
        // families, keeping each one's order): the live one only past the refusing and the
        // blackholed ones.
        let position = |address: SocketAddr| outcome.attempts.iter().position(|a| a.broker == address.to_string());
        let order = [refusing.address, hole.address, live].map(position);
        assert!(order.iter().all(Option::is_some) && order.is_sorted(), "{:#?}", outcome.attempts);
        let shut = of(refusing.address).expect("the refusing address was tried");
        assert_eq!(failed(shut).kind, ErrorKind::Refused, "{shut:?}");
        if let Some(r) = &refusing6 {
            let shut6 = of(r.address).expect("the refusing IPv6 address was tried");
            assert_eq!(failed(shut6).kind, ErrorKind::Refused, "{shut6:?}");
        }
        let stuck = of(hole.address).expect("the blackholed address was tried");
        assert!(matches!(stuck.outcome, AttemptOutcome::Cancelled(_)), "{stuck:?}");
        assert!(stuck.connected.is_none(), "{stuck:?}");
        assert_eq!(of(live).expect("the live address").outcome, AttemptOutcome::Won);
    })
    .await;
}
