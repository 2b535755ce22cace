//! Building a fleet, its calm warm-up, and one measured scenario run on a copy of it.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::time::Duration;

use super::placement::{give_spares, place_leads, top_up_failing_spares};
use super::{broker_of, fleet_metadata, mix, Broker, Client, Engine, Ev, Mode, Tally, WarmFleet, REFRESH_INTERVAL};
use crate::fleet::stats::{busiest_window, cdf_points, peak_in_window, Percentiles};
use crate::fleet::{FleetConfig, FleetScenario, ScenarioResult, Strategy};
use stagger::duration_micros;
use stagger::test_util::numbered_seeds;
use stagger::{BrokerBook, Cluster, ClusterConfig, Instant, RefreshCause, Rng};

impl WarmFleet {
    /// Builds `config.clients` clients running `strategy` and lets each refresh
    /// [`FleetConfig::warmup_for`] times against a calm, healthy cluster.
    pub fn new(config: &FleetConfig, strategy: &Strategy) -> Self {
        let warmup = config.warmup_for(strategy);
        // Three seed brokers per client, rotating, as a config management tool would hand
        // out; the rest are learned from metadata.
        let mut engine = Engine::build(config, strategy, warmup, |i, k, brokers| (i + k) % brokers);
        // The warm-up schedule comes from its own stream, so it is the same for every
        // strategy: strategies differ only in what their clients do.
        let mut schedule = Rng::new(mix(config.seed, 0x5C));
        let spacing = engine.warm_spacing_us;
        if warmup > 0 && matches!(strategy, Strategy::Core { .. }) {
            for i in 0..engine.clients.len() {
                let at = (schedule.unit() * spacing as f64) as u64;
                engine.push(at, Ev::Request { client: i as u32, measured: false });
            }
        }
        engine.horizon =
            spacing.saturating_mul(warmup as u64 + 2).saturating_add(duration_micros(Duration::from_secs(3600)));
        engine.run();
        engine.heap.clear();
        give_spares(&mut engine, config);
        for c in &mut engine.clients {
            c.timer_at = None;
            c.timer_gen = c.timer_gen.wrapping_add(1);
        }
        WarmFleet { config: config.clone(), strategy: strategy.clone(), strategy_name: strategy.name().into(), engine }
    }

    /// Runs `scenario` on a copy of the warmed fleet and reports it — except the cold
    /// start, which builds a fleet that knows nothing yet (every client given the same
    /// three seeds, no warm-up) and ignores the warm one.
    pub fn run(&self, scenario: FleetScenario) -> ScenarioResult {
        if scenario == FleetScenario::ColdStart {
            let mut e = Engine::build(&self.config, &self.strategy, 0, |_, k, _| k);
            e.now = 0;
            return self.measure(e, scenario);
        }
        self.measure(self.engine.clone(), scenario)
    }

    fn measure(&self, mut e: Engine, scenario: FleetScenario) -> ScenarioResult {
        let config = &self.config;
        let n_brokers = e.brokers.len();
        let t0 = e.now.saturating_add(duration_micros(config.settle));
        // Which brokers fail, and when clients ask, come from a stream of their own: the
        // same for every strategy, so strategies face exactly the same incident.
        let mut schedule = Rng::new(mix(config.seed, 0x100 + scenario as u64));
        let mut order: Vec<usize> = (0..n_brokers).collect();
        schedule.shuffle(&mut order);
        let (failing, mode) = match scenario {
            FleetScenario::Healthy | FleetScenario::ColdStart => (0, Mode::Healthy),
            FleetScenario::OneHung => (1, Mode::Hung),
            FleetScenario::ThirdHung => ((n_brokers / 3).max(1), Mode::Hung),
            FleetScenario::FailoverStorm => (1, Mode::Dead),
        };
        for &b in order.iter().take(failing.min(n_brokers.saturating_sub(1))) {
            e.brokers[b].mode = mode;
        }
        if mode == Mode::Hung {
            e.slow_down(config.hung_slowdown);
        }
        place_leads(&mut e, config, &order);
        top_up_failing_spares(&mut e, config, scenario);
        let spares_before: u64 = e
            .clients
            .iter()
            .filter_map(|c| c.cluster.as_ref())
            .map(|c| c.kept_brokers().len().saturating_sub(1) as u64)
            .sum();
        if mode == Mode::Dead {
            // The dead broker's kept connections close: their clients learn of it at once,
            // and refresh because that connection was lost, naming its broker; every other
            // client refreshes because its requests for the dead broker's partitions now
            // answer NOT_LEADER (`lab/src/bin/fleet_real` tells its real clients the same).
            let dead: Vec<usize> = (0..n_brokers).filter(|&b| e.brokers[b].mode == Mode::Dead).collect();
            for c in &mut e.clients {
                if let Some(cluster) = &mut c.cluster {
                    let on_dead = |k| broker_of(cluster.book().address(k)).is_some_and(|b| dead.contains(&b));
                    c.cause = match cluster.kept().filter(|&k| on_dead(k)) {
                        Some(kept) => {
                            cluster.connection_closed(kept);
                            (RefreshCause::ConnectionLost, Some(kept))
                        }
                        None => (RefreshCause::StaleMetadata, None),
                    };
                    if !config.storm_causes {
                        c.cause = (RefreshCause::Requested, None);
                    }
                }
            }
        }
        let window = match scenario {
            FleetScenario::FailoverStorm | FleetScenario::ColdStart => config.storm_window,
            _ => config.request_window,
        };
        let window_us = duration_micros(window) as f64;
        for i in 0..e.clients.len() {
            let at = t0 + (schedule.unit() * window_us) as u64;
            e.push(at, Ev::Request { client: i as u32, measured: true });
        }
        e.tally = Some(Tally {
            t0,
            spares_before,
            arrivals: alloc::vec![Vec::new(); n_brokers],
            work: alloc::vec![Vec::new(); n_brokers],
            outstanding: e.clients.len() as u32,
            ..Tally::default()
        });
        e.horizon = t0.saturating_add(duration_micros(Duration::from_secs(3600)));
        e.run();
        let overflow = e.overflow;
        let tally = e.tally.take().unwrap_or_default();
        result(config, scenario, &self.strategy_name, tally, overflow)
    }

    /// The config this fleet was built with.
    pub fn config(&self) -> &FleetConfig {
        &self.config
    }

    /// Whole hedge tokens each client holds after the warm-up (for reports and tests).
    pub fn hedge_tokens(&self) -> Vec<u32> {
        self.engine.clients.iter().filter_map(|c| c.cluster.as_ref().map(Cluster::hedge_tokens)).collect()
    }

    /// Each client's core view after the warm-up (`None` for oracle clients): tests inspect
    /// estimators, books and budgets through it.
    pub fn clusters(&self) -> impl Iterator<Item = Option<&Cluster>> {
        self.engine.clients.iter().map(|c| c.cluster.as_ref())
    }
}

impl Engine {
    /// A fleet of `config.clients` clients running `strategy`, each to refresh `warmup`
    /// times; client `i`'s `k`-th of three seeds is broker `seed_of(i, k, brokers)`.
    fn build(
        config: &FleetConfig,
        strategy: &Strategy,
        warmup: u32,
        seed_of: impl Fn(usize, usize, usize) -> usize,
    ) -> Engine {
        let brokers = config.brokers.clamp(1, u16::MAX as u32) as usize;
        let addresses = numbered_seeds(brokers);
        let mut clients = Vec::with_capacity(config.clients as usize);
        for i in 0..config.clients as usize {
            let cluster = match strategy {
                Strategy::Oracle => None,
                Strategy::Core { cluster, .. } => {
                    let seeds = (0..3.min(brokers)).map(|k| addresses[seed_of(i, k, brokers)].as_str());
                    let book = BrokerBook::new(seeds).ok();
                    let cfg = ClusterConfig {
                        refresh: cluster.refresh.with_seed(mix(config.seed, 1 + i as u64)),
                        refresh_interval: REFRESH_INTERVAL,
                        ..*cluster
                    };
                    book.and_then(|b| Cluster::new(cfg, b, Instant::ZERO).ok())
                }
            };
            clients.push(Client {
                cluster,
                live: Vec::with_capacity(4),
                awaiting_metadata: Vec::new(),
                draining: Vec::new(),
                timer_at: None,
                timer_gen: 0,
                warm_left: warmup,
                keys_derived: false,
                measured: None,
                draws: 0,
                cause: (RefreshCause::Requested, None),
            });
        }
        Engine {
            brokers: alloc::vec![Broker { mode: Mode::Healthy, free_at: 0, network_free_at: [0; super::NETWORK_THREADS], promised_until: 0 }; brokers],
            clients,
            heap: BinaryHeap::with_capacity(config.clients as usize * 2),
            seq: 0,
            rng: Rng::new(mix(config.seed, 0xB0)),
            seed: config.seed,
            metadata: fleet_metadata(brokers),
            now: 0,
            horizon: 0,
            rtt_us: duration_micros(config.rtt) as f64,
            service_us: duration_micros(config.service_time) as f64,
            api_us: micros_u32(config.api_versions_time),
            accept_us: micros_u32(config.accept_time),
            tls_us: config.security.tls_time.map(micros_u32),
            sasl_round_trips: config.security.sasl_round_trips,
            sasl_us: micros_u32(config.security.sasl_time),
            latency_us: [config.latency.metadata, config.latency.api_versions, config.latency.tls, config.latency.sasl]
                .map(|d| micros_u32(d) as u64),
            host_delay: (config.host_delay.share.clamp(0.0, 1.0), duration_micros(config.host_delay.mean) as f64),
            machine: (config.shared_cores > 0).then(|| {
                let cores = config.shared_cores.min(1024) as usize;
                super::machine::Machine::new(cores, brokers, config.client_work.threads.min(1024))
            }),
            network_threads: config.network_threads.min(FleetConfig::MAX_NETWORK_THREADS) as u8,
            client_work_us: (
                micros_u32(config.client_work.per_message),
                micros_u32(config.client_work.tls),
                micros_u32(config.client_work.relay),
                micros_u32(config.client_work.key_derivation),
            ),
            background_us: (
                micros_u32(config.broker_background.accept),
                micros_u32(config.broker_background.tls),
                micros_u32(config.broker_background.request),
            ),
            count_reads: config.count_reads,
            warm_spacing_us: duration_micros(config.warmup_spacing).max(1),
            tally: None,
            scratch: Vec::with_capacity(16),
            events: 0,
            overflow: false,
        }
    }
}

/// `d` in whole µs, saturated to `u32` (the engine's unit for one piece of broker work).
fn micros_u32(d: Duration) -> u32 {
    duration_micros(d).min(u32::MAX as u64) as u32
}

fn result(
    config: &FleetConfig,
    scenario: FleetScenario,
    strategy: &str,
    mut tally: Tally,
    overflow: bool,
) -> ScenarioResult {
    // Refreshes that never finished (only after an event overflow) count as failed.
    let unfinished = if overflow { tally.outstanding } else { 0 };
    for _ in 0..unfinished {
        tally.times.push(u64::MAX);
    }
    tally.times.sort_unstable();
    let refreshes = tally.times.len() as u32;
    let per = |x: u64| if refreshes == 0 { 0.0 } else { x as f64 / refreshes as f64 };
    let window = duration_micros(config.peak_window).min(u32::MAX as u64) as u32;
    let (mut peak, mut peak_broker) = (0, 0);
    for (b, arrivals) in tally.arrivals.iter().enumerate() {
        let p = peak_in_window(arrivals, window);
        if p > peak {
            peak = p;
            peak_broker = b as u32;
        }
    }
    let peak_busy = tally.work.iter_mut().map(|w| busiest_window(w, window)).max().unwrap_or(0);
    // Counted as the brokers read them (`count_reads`), a request a hung broker never reads
    // is not one, as in a broker's request log.
    let requests =
        if config.count_reads { tally.arrivals.iter().map(|a| a.len() as u64).sum() } else { tally.requests_sent };
    ScenarioResult {
        scenario,
        strategy: strategy.into(),
        refreshes,
        failed: tally.failed + unfinished,
        time_to_metadata: Percentiles::of_sorted(&tally.times),
        attempts: tally.attempts,
        attempts_per_refresh: per(tally.attempts),
        hedges: tally.hedges,
        connections: tally.reached,
        reused: tally.reused,
        tls_handshakes: tally.tls_handshakes,
        api_versions: tally.api_versions,
        requests,
        requests_per_refresh: per(requests),
        refused: tally.refused,
        cancelled_before_handshake: tally.cancelled_before_handshake,
        peak_requests: peak,
        peak_broker,
        peak_busy_us: peak_busy,
        requests_per_broker: tally.arrivals.iter().map(|a| a.len() as u64).collect(),
        core_started: tally.core_started,
        spares_before: tally.spares_before,
        cdf: cdf_points(&tally.times),
        times_us: tally.times,
    }
}
