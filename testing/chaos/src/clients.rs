//! The clients under chaos: tokio clients as tasks of one runtime, blocking clients on
//! threads of their own, each polling `metadata()` and tracking how old its copy is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stagger::{ClusterConfig, Metadata};
use stagger_kafka_fixture::netns::NetCluster;

use crate::{chaos, Report, Resources, Soak};

/// What every poller adds to.
#[derive(Default)]
struct Tally {
    max_age: Duration,
    failed_reads: u64,
    give_ups: Vec<String>,
}

/// One client's view: the copy it holds and when it changed.
struct Age {
    held: Option<Arc<Metadata>>,
    since: Instant,
}

impl Age {
    fn new() -> Age {
        Age { held: None, since: Instant::now() }
    }

    /// Records one read; a new copy (a refresh happened) resets the age.
    fn read<E: std::fmt::Display>(&mut self, read: Result<Arc<Metadata>, E>, tally: &Mutex<Tally>) {
        let now = Instant::now();
        let mut tally = tally.lock().unwrap();
        match read {
            Ok(m) => {
                if !self.held.as_ref().is_some_and(|h| Arc::ptr_eq(h, &m)) {
                    self.held = Some(m);
                    self.since = now;
                }
            }
            Err(e) => {
                tally.failed_reads += 1;
                tally.give_ups.push(e.to_string());
            }
        }
        tally.max_age = tally.max_age.max(now - self.since);
    }
}

pub(crate) fn run(soak: &Soak, cluster: &NetCluster) -> Report {
    let seeds = cluster.seeds();
    let mut config = ClusterConfig { refresh_interval: soak.refresh_interval, ..ClusterConfig::default() };
    config.refresh.deadline = soak.deadline;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let tally = Arc::new(Mutex::new(Tally::default()));
    let stop = Arc::new(AtomicBool::new(false));

    let tokio_clients: Vec<_> = (0..soak.tokio_clients)
        .map(|i| {
            let mut config = config;
            config.refresh.seed = i as u64 + 1;
            let _enter = runtime.enter();
            Arc::new(stagger_tokio::Client::new(config, &seeds, Default::default()).expect("tokio client"))
        })
        .collect();
    let blocking_clients: Vec<_> = (0..soak.blocking_clients)
        .map(|i| {
            let mut config = config;
            config.refresh.seed = 10_000 + i as u64;
            Arc::new(stagger_blocking::Client::new(config, &seeds, Default::default()).expect("blocking client"))
        })
        .collect();
    for client in &tokio_clients {
        runtime.block_on(client.metadata()).expect("first metadata (tokio client)");
    }
    for client in &blocking_clients {
        client.metadata().expect("first metadata (blocking client)");
    }

    let mut pollers = Vec::new();
    for client in &tokio_clients {
        let (client, tally, stop, poll) = (Arc::clone(client), Arc::clone(&tally), Arc::clone(&stop), soak.poll);
        pollers.push(runtime.spawn(async move {
            let mut age = Age::new();
            while !stop.load(Ordering::Relaxed) {
                age.read(client.metadata().await, &tally);
                tokio::time::sleep(poll).await;
            }
        }));
    }
    let threads: Vec<_> = blocking_clients
        .iter()
        .map(|client| {
            let (client, tally, stop, poll) = (Arc::clone(client), Arc::clone(&tally), Arc::clone(&stop), soak.poll);
            std::thread::spawn(move || {
                let mut age = Age::new();
                while !stop.load(Ordering::Relaxed) {
                    age.read(client.metadata(), &tally);
                    std::thread::sleep(poll);
                }
            })
        })
        .collect();
    std::thread::sleep(soak.poll * 2);
    let tasks = || runtime.metrics().num_alive_tasks();
    let start = Resources::now(tasks());

    let began = Instant::now();
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (sampling, step) = (Arc::clone(&sampling), soak.step);
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            while sampling.load(Ordering::Relaxed) {
                samples.push((began.elapsed(), Resources::now(0).rss_kib));
                std::thread::sleep(step);
            }
            samples
        })
    };
    let actions = chaos::run(cluster, soak.seed, soak.step, soak.duration, began);
    sampling.store(false, Ordering::Relaxed);
    let rss_samples = sampler.join().expect("RSS sampler");

    // Healed: every client reads fresh metadata again (a refresh may need a retry while a
    // restarted broker settles).
    for client in &tokio_clients {
        let fresh = (0..3).any(|_| runtime.block_on(client.refresh()).is_ok());
        assert!(fresh, "a tokio client found no metadata after the chaos healed");
    }
    for client in &blocking_clients {
        let fresh = (0..3).any(|_| client.refresh().is_ok());
        assert!(fresh, "a blocking client found no metadata after the chaos healed");
    }
    // Connections the fixture still carries for clients that went away behind a blackhole
    // end by keepalive within seconds; give them that long.
    let mut end = Resources::now(tasks());
    let settle = Instant::now();
    while end.fds > start.fds + 16 && settle.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(500));
        end = Resources::now(tasks());
    }

    stop.store(true, Ordering::Relaxed);
    for poller in pollers {
        runtime.block_on(poller).expect("poller");
    }
    for thread in threads {
        thread.join().expect("poller thread");
    }
    let (mut refreshes, mut attempts) = (0u64, 0u64);
    for stats in tokio_clients.iter().map(|c| c.stats()).chain(blocking_clients.iter().map(|c| c.stats())) {
        refreshes += u64::from(stats.refreshes);
        attempts += stats.attempts;
    }
    for client in tokio_clients {
        if let Ok(client) = Arc::try_unwrap(client) {
            runtime.block_on(client.close());
        }
    }
    drop(blocking_clients);
    let tally = std::mem::take(&mut *tally.lock().unwrap());
    Report {
        actions,
        max_age: tally.max_age,
        refreshes,
        attempts,
        give_ups: tally.give_ups,
        failed_reads: tally.failed_reads,
        start,
        end,
        rss_samples,
    }
}
