//! Resource hygiene: the deadline holds with every broker hung, load leaves nothing behind,
//! and dropping a refresh or a client closes its sockets promptly.
//!
//! Everything is checked by counting — open descriptors (`/proc/self/fd`), this process's
//! sockets to given ports (`stagger_test_faults::sockets`), the runtime's alive tasks
//! (`RuntimeMetrics::num_alive_tasks`) and scheduler yields — never by sleeping and hoping.
//! Where the other end (the in-process mock brokers) closes on its own schedule, the test
//! waits for the count to come back, bounded by the test's 60 s limit. Timing and memory
//! numbers are printed by stagger-lab's `deadline_overshoot` and `load_hygiene`
//! (`cargo run --release -p stagger-lab --bin load_hygiene`).

use std::time::{Duration, Instant};

use stagger::{CancelReason, ClusterConfig, ErrorKind, GiveUpReason, RefreshConfig, Stagger};
use stagger_test_faults::bounded;
use stagger_test_faults::fake::{FakeBroker, Script};
use stagger_test_faults::mock::Mock;
use stagger_test_faults::sockets::{describe_sockets_to, open_fds, sockets_to, Refusing, Unanswered};
use stagger_tokio::{refresh_with, AttemptOutcome, Client, ClientOptions, Error, EventKind, RefreshOptions};
use tokio::task::JoinSet;

/// Tasks alive in the current runtime.
fn alive_tasks() -> usize {
    tokio::runtime::Handle::current().metrics().num_alive_tasks()
}

/// Waits (yielding, then briefly sleeping) until `count()` is at most `target`; the test's
/// bound turns "never" into a failure. Returns the final count.
async fn settles(what: &str, target: usize, count: impl Fn() -> usize) -> usize {
    let mut rounds = 0u32;
    loop {
        let now = count();
        if now <= target {
            return now;
        }
        rounds += 1;
        if rounds.is_multiple_of(1000) {
            eprintln!("{what}: {now}, waiting for {target}");
        }
        if rounds < 100 {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// A cluster of healthy (2, 3) and hung (1) mock brokers, the same again as scripted fake
/// brokers, plus a refusing port and a listener that never answers a connect.
///
/// The fakes serve the concurrent runs: librdkafka's mock listens with a backlog of 5
/// (`rdkafka_mock.c`: `listen(listen_s, 5)`), so hundreds of simultaneous connects to one
/// mock broker overflow its accept queue and wait for SYN retransmits (≥ 1 s) — a limit of
/// the mock, not of the client — while the fakes listen with the OS default.
struct Lab {
    mock: Mock,
    fakes: [FakeBroker; 3],
    refusing: Refusing,
    unanswered: Unanswered,
}

impl Lab {
    /// The lab's own tasks once its fakes serve no connection: one accept loop per fake.
    const TASKS: usize = 3;

    async fn start() -> Lab {
        let mock = Mock::start(3, &[("alpha", 3)]);
        mock.hang(1);
        let fakes = [
            FakeBroker::start(Script::Silent).await,
            FakeBroker::start(Script::Healthy).await,
            FakeBroker::start(Script::Healthy).await,
        ];
        Lab { mock, fakes, refusing: Refusing::new(), unanswered: Unanswered::new() }
    }

    /// Our sockets to any broker of the lab (the never-answering listener's queue excepted).
    fn our_sockets(&self) -> usize {
        let mut ports = self.mock.ports();
        ports.extend(self.fakes.iter().map(FakeBroker::port));
        ports.push(self.unanswered.port());
        sockets_to(&ports) - self.unanswered.fillers
    }

    /// Our sockets to the lab, described (for failure messages).
    fn describe(&self) -> String {
        let mut ports = self.mock.ports();
        ports.extend(self.fakes.iter().map(FakeBroker::port));
        ports.push(self.unanswered.port());
        format!("{} (fillers: {})", describe_sockets_to(&ports), self.unanswered.fillers)
    }

    /// Hung, healthy, healthy: on the mock, or on the fakes.
    fn brokers(&self, fakes: bool) -> [String; 3] {
        if fakes {
            self.fakes.each_ref().map(|f| f.address.clone())
        } else {
            [1, 2, 3].map(|id| self.mock.address(id))
        }
    }

    /// The `i`-th refresh of a load run: mostly a hung broker, a refused one, then healthy
    /// ones (success); every 10th a connect that is never answered before a healthy broker
    /// (success); every 10th only hung brokers and a 20 ms deadline (deadline exceeded).
    fn scenario(&self, i: usize, fakes: bool) -> (RefreshOptions, Vec<String>, bool) {
        let mut config = RefreshConfig::default();
        config.fanout.stagger = Stagger::Fixed(Duration::from_millis(2));
        config.fanout.jitter = 0.0;
        // Generous: under 200 concurrent refreshes on a busy machine an answer can take a
        // while, and this run is about what is left behind, not about latency.
        config.attempt_timeout = Duration::from_secs(5);
        config.retry.retries = 0;
        let [hung, a, b] = self.brokers(fakes);
        let healthy = if i.is_multiple_of(2) { a } else { b };
        let (seeds, succeeds) = match i % 10 {
            8 => (vec![self.unanswered.address.clone(), healthy], true),
            9 => {
                config.deadline = Duration::from_millis(20);
                (vec![hung, self.unanswered.address.clone()], false)
            }
            _ => (vec![hung, self.refusing.address.clone(), healthy], true),
        };
        (RefreshOptions { config, ..RefreshOptions::default() }, seeds, succeeds)
    }
}

async fn run_scenario(options: RefreshOptions, seeds: Vec<String>, succeeds: bool) {
    let result = refresh_with(&options, &seeds, |_| {}).await;
    match (result, succeeds) {
        (Ok(_), true) => {}
        (Err(Error::Refresh { error, .. }), false) => assert_eq!(error.reason, GiveUpReason::DeadlineExceeded),
        (other, _) => panic!("unexpected result for {seeds:?}: {other:?}"),
    }
}

/// With every broker hung — connected but silent, or never even connected — `refresh` gives
/// up with `DeadlineExceeded` (not after the much longer attempt timeout), every attempt is
/// cancelled for the deadline, each broker's error says how far it got, and every socket is
/// closed when it returns.
#[tokio::test]
async fn every_broker_hung_gives_deadline_exceeded() {
    bounded(async {
        let lab = Lab::start().await;
        lab.mock.hang(2);
        lab.mock.hang(3);
        let mut config = RefreshConfig::all_at_once();
        config.deadline = Duration::from_millis(300);
        config.attempt_timeout = Duration::from_secs(30);
        let options = RefreshOptions { config, ..RefreshOptions::default() };
        let seeds = [lab.mock.address(1), lab.mock.address(2), lab.unanswered.address.clone()];
        let started = Instant::now();
        let error = refresh_with(&options, &seeds, |_| {}).await.expect_err("every broker is hung");
        assert!(started.elapsed() >= config.deadline, "it cannot end before the deadline with no answer");
        let Error::Refresh { error: core, attempts, .. } = &error else { panic!("{error}") };
        assert_eq!(core.reason, GiveUpReason::DeadlineExceeded, "{error}");
        assert!(error.to_string().contains("deadline exceeded"), "{error}");
        assert_eq!(attempts.len(), 3);
        for a in attempts {
            assert_eq!(a.outcome, AttemptOutcome::Cancelled(CancelReason::Deadline), "{a:?}");
        }
        for b in &core.brokers {
            let kind = if *b.address == lab.unanswered.address {
                ErrorKind::ConnectTimeout
            } else {
                ErrorKind::ResponseTimeout
            };
            let last = b.last_error.as_ref().expect("an error per broker");
            assert_eq!(last.kind, kind, "{}: {last}", b.address);
            assert!(last.detail.contains("deadline"), "{last}");
        }
        assert_eq!(lab.our_sockets(), 0, "every socket closed when refresh returns");
    })
    .await;
}

/// 1,000 refreshes one after another: every refresh closes all its sockets before it
/// returns, no task is left, and the descriptors come back to the baseline.
#[tokio::test]
async fn a_thousand_sequential_refreshes_leave_nothing_behind() {
    bounded(async {
        let lab = Lab::start().await;
        // Warm up (lazily created runtime and mock descriptors), then take the baseline.
        for i in 0..10 {
            let (options, seeds, succeeds) = lab.scenario(i, false);
            run_scenario(options, seeds, succeeds).await;
        }
        settles("our sockets", 0, || lab.our_sockets()).await;
        let fds = open_fds();
        let tasks = alive_tasks();
        for i in 0..1000 {
            let (options, seeds, succeeds) = lab.scenario(i, false);
            run_scenario(options, seeds, succeeds).await;
            let left = lab.our_sockets();
            assert_eq!(left, 0, "refresh {i} left a socket open: {}", lab.describe());
        }
        assert_eq!(alive_tasks(), tasks, "no task left running");
        let settled = settles("open descriptors", fds, open_fds).await;
        assert!(settled <= fds, "descriptors back to the baseline {fds}: {settled}");
    })
    .await;
}

/// 200 refreshes at once, each its own spawned task, on a multi-threaded runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_refreshes_leave_nothing_behind() {
    bounded(async {
        let lab = Lab::start().await;
        let (options, seeds, succeeds) = lab.scenario(0, true);
        run_scenario(options, seeds, succeeds).await;
        settles("our sockets", 0, || lab.our_sockets()).await;
        let tasks = settles("alive tasks", Lab::TASKS, alive_tasks).await;
        let fds = open_fds();
        for round in 0..2 {
            let mut set = JoinSet::new();
            for i in 0..200 {
                let (options, seeds, succeeds) = lab.scenario(i, true);
                set.spawn(run_scenario(options, seeds, succeeds));
            }
            while let Some(joined) = set.join_next().await {
                joined.expect("a refresh task panicked");
            }
            assert_eq!(lab.our_sockets(), 0, "round {round}: every socket closed");
            settles("alive tasks", tasks, alive_tasks).await;
        }
        let settled = settles("open descriptors", fds, open_fds).await;
        assert!(settled <= fds, "descriptors back to the baseline {fds}: {settled}");
    })
    .await;
}

/// A long-lived client under load: sequential and concurrent (single-flight) refreshes;
/// only the kept connections stay open (the winner's and at most `spare_connections`
/// spares, counting a cold start's first choice finishing its exchange), and closing the
/// client leaves nothing.
#[tokio::test]
async fn a_client_under_load_leaves_nothing_behind() {
    bounded(async {
        let lab = Lab::start().await;
        let fds = open_fds();
        let tasks = alive_tasks();
        let (options, seeds, _) = lab.scenario(0, false);
        let mut config = ClusterConfig { refresh: options.config, ..ClusterConfig::default() };
        // A stagger a loaded machine's answers fit in: a fixed stagger does not double, and
        // out of hedge budget a 2 ms one would replace every slow broker in place until the
        // single pass ran out. This test is about what is left behind, not about latency.
        config.refresh.fanout.stagger = Stagger::Fixed(Duration::from_millis(50));
        let client = std::sync::Arc::new(Client::new(config, &seeds, ClientOptions::default()).unwrap());
        let kept = 1 + config.spare_connections as usize;
        assert_eq!(alive_tasks(), tasks + 1, "the client's background task");
        for _ in 0..100 {
            client.refresh().await.expect("refresh");
            assert!(lab.our_sockets() <= kept, "only the kept connections stay open");
        }
        for _ in 0..10 {
            let mut set = JoinSet::new();
            for _ in 0..20 {
                let client = client.clone();
                set.spawn(async move { client.refresh().await.map(|_| ()) });
            }
            while let Some(joined) = set.join_next().await {
                joined.unwrap().expect("refresh");
            }
            assert!(lab.our_sockets() <= kept);
        }
        let stats = client.stats();
        // 300 calls; each batch of 20 concurrent callers shares (about) one refresh.
        assert!(stats.refreshes < 200, "concurrent callers shared refreshes: {stats:?}");
        let client = std::sync::Arc::try_unwrap(client).expect("no other handle");
        client.close().await;
        assert_eq!(lab.our_sockets(), 0);
        settles("alive tasks", tasks, alive_tasks).await;
        let settled = settles("open descriptors", fds, open_fds).await;
        assert!(settled <= fds, "descriptors back to the baseline {fds}: {settled}");
    })
    .await;
}

/// Dropping a refresh closes every socket it opened *during the drop*: connected ones and
/// ones still waiting for a TCP handshake that will never complete.
#[tokio::test]
async fn dropping_a_refresh_closes_connected_and_connecting_sockets() {
    bounded(async {
        let lab = Lab::start().await;
        let options = RefreshOptions { config: RefreshConfig::all_at_once(), ..RefreshOptions::default() };
        let seeds = [lab.mock.address(1), lab.unanswered.address.clone()];
        let (tx, connected) = tokio::sync::oneshot::channel();
        let mut tx = Some(tx);
        let mut refresh = Box::pin(refresh_with(&options, &seeds, move |e| {
            if matches!(e.kind, EventKind::Connected { .. }) {
                let _ = tx.take().map(|tx| tx.send(()));
            }
        }));
        tokio::select! {
            result = &mut refresh => panic!("a refresh against hung brokers ended: {result:?}"),
            _ = connected => {}
        }
        assert_eq!(sockets_to(&[lab.mock.ports()[0]]), 1, "the hung broker's connection is up");
        assert_eq!(
            sockets_to(&[lab.unanswered.port()]),
            lab.unanswered.fillers + 1,
            "the other connect is still in SYN-SENT"
        );
        drop(refresh);
        assert_eq!(lab.our_sockets(), 0, "both closed by the drop itself");
    })
    .await;
}

/// Dropping a client in the middle of a refresh closes its sockets promptly: before the
/// dropping task has yielded to the scheduler a handful of times (no clock involved), and
/// its background task is gone.
#[tokio::test]
async fn dropping_a_client_mid_refresh_closes_its_sockets_promptly() {
    bounded(async {
        let lab = Lab::start().await;
        let config = ClusterConfig { refresh: RefreshConfig::all_at_once(), ..ClusterConfig::default() };
        let seeds = [lab.mock.address(1), lab.unanswered.address.clone()];
        let client = std::sync::Arc::new(Client::new(config, &seeds, ClientOptions::default()).unwrap());
        let tasks = alive_tasks();
        let waiting = tokio::spawn({
            let client = client.clone();
            async move { client.refresh().await }
        });
        // Both attempts under way: one connected to the hung broker, one connecting.
        settles("connections", 0, || 1usize.saturating_sub(sockets_to(&[lab.mock.ports()[0]]))).await;
        let connecting = lab.unanswered.fillers + 1;
        settles("connects", 0, || connecting.saturating_sub(sockets_to(&[lab.unanswered.port()]))).await;
        assert_eq!(lab.our_sockets(), 2);

        // The waiting caller holds a handle too: closing happens when the last one drops, so
        // abort the caller first (as an application shutting down would), then drop ours.
        waiting.abort();
        assert!(waiting.await.unwrap_err().is_cancelled());
        drop(std::sync::Arc::try_unwrap(client).expect("the last handle"));
        let mut yields = 0;
        while lab.our_sockets() > 0 {
            assert!(yields < 10, "sockets still open after {yields} yields");
            tokio::task::yield_now().await;
            yields += 1;
        }
        settles("alive tasks", tasks - 1, alive_tasks).await;
    })
    .await;
}
