//! The fleet's event loop: one priority queue of timed events for every client and broker.
//!
//! Why one queue: clients interact only through the brokers' queues, so a single totally
//! ordered stream of events (time, then insertion order) is both the simplest faithful model
//! and deterministic. Each client is a real [`Cluster`]; the engine carries out its
//! `Connect`/`Cancel` events against simulated brokers and feeds the results back, exactly as
//! an adapter would.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Ordering;
use core::time::Duration;

use super::stats::{cdf_points, peak_in_window, Percentiles};
use super::{math, FleetConfig, FleetScenario, ScenarioResult, Strategy};
use crate::Scenario;
use stagger::brokers::numbered_seeds;
use stagger::time::duration_micros;
use stagger::{
    AttemptError, AttemptId, BrokerBook, Cluster, ClusterConfig, ClusterEvent, ErrorKind, Input, Instant, Metadata, Rng,
};

/// Upper bound on events one phase may process: a core livelock must end the run, not hang it.
const MAX_EVENTS: u64 = 400_000_000;

/// Periodic refreshes are switched off (well, pushed a day away): the simulation asks for
/// every refresh itself, so what is measured is exactly the scenario's requests.
const REFRESH_INTERVAL: Duration = Duration::from_secs(24 * 3600);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Healthy,
    Hung,
    Dead,
}

#[derive(Clone, Copy, Debug)]
struct Broker {
    mode: Mode,
    /// When the broker finishes the last request queued so far (µs).
    free_at: u64,
    /// When it would finish if every request the oracle has sent it, including those
    /// still on the wire, were queued already: what the all-knowing oracle balances on.
    promised_until: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    /// The application asks client `client` for fresh metadata.
    Request { client: u32, measured: bool },
    /// The client's core asked to be woken now (stale unless `gen` is current).
    Timer { client: u32, gen: u32 },
    /// The TCP handshake of `attempt` completed; the client sends ApiVersions.
    Connected { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// The ApiVersions request reaches the broker.
    ApiArrive { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// The ApiVersions answer reaches the client, which sends the Metadata request.
    ApiAnswer { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// The Metadata request reaches the broker.
    MetaArrive { client: u32, attempt: AttemptId, broker: u16, draw: Draw },
    /// The broker's metadata answer reaches the client.
    Response { client: u32, attempt: AttemptId },
    /// The broker refused `attempt`'s connection.
    Refused { client: u32, attempt: AttemptId },
}

/// The random parts of one attempt: its connection's round trip and the broker time its
/// request takes (both µs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Draw {
    rtt: u32,
    service: u32,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed, so `BinaryHeap` (a max-heap) pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Clone, Copy, Debug)]
struct Measured {
    requested_at: u64,
    epoch: u32,
    done: bool,
}

#[derive(Clone, Debug)]
struct Client {
    /// `None` for an oracle client.
    cluster: Option<Cluster>,
    /// Attempts started and neither cancelled nor answered.
    live: Vec<AttemptId>,
    timer_at: Option<u64>,
    timer_gen: u32,
    warm_left: u32,
    measured: Option<Measured>,
    /// Attempts drawn so far in the measurement (picks each attempt's random stream).
    draws: u32,
}

/// Counters of the measurement phase.
#[derive(Clone, Debug, Default)]
struct Tally {
    t0: u64,
    arrivals: Vec<Vec<u32>>,
    attempts: u64,
    reached: u64,
    requests_sent: u64,
    refused: u64,
    cancelled_before_handshake: u64,
    hedges: u64,
    core_started: u64,
    times: Vec<u64>,
    failed: u32,
    outstanding: u32,
}

#[derive(Clone, Debug)]
struct Engine {
    brokers: Vec<Broker>,
    clients: Vec<Client>,
    heap: BinaryHeap<Entry>,
    seq: u64,
    rng: Rng,
    seed: u64,
    metadata: Metadata,
    now: u64,
    horizon: u64,
    rtt_us: f64,
    service_us: f64,
    warm_spacing_us: u64,
    tally: Option<Tally>,
    scratch: Vec<ClusterEvent>,
    events: u64,
    overflow: bool,
}

/// A fleet after its calm warm-up, ready to run scenarios.
///
/// Why separate from running: the warm-up (up to 64 refreshes per client) costs more than a
/// scenario, and every scenario starts from the same warmed state, so one warm-up per
/// strategy serves all four scenarios (each run works on a copy).
#[derive(Clone, Debug)]
pub struct WarmFleet {
    config: FleetConfig,
    strategy_name: alloc::string::String,
    engine: Engine,
}

/// Mixes a seed with a stream number (SplitMix64's finaliser), for independent streams.
fn mix(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What every healthy broker answers: the standard simulated cluster's brokers, no topics.
///
/// Why no topics: a client learns brokers from metadata, which is all the fleet measures;
/// topic lists would only add allocations to each of the millions of simulated answers.
fn fleet_metadata(brokers: usize) -> Metadata {
    Metadata { topics: Vec::new(), ..Scenario::standard_metadata(brokers) }
}

/// `broker-i:9092` → `i` (the simulated cluster's addresses), without allocating.
fn broker_of(address: &str) -> Option<usize> {
    address.strip_prefix("broker-")?.strip_suffix(":9092")?.parse().ok()
}

impl WarmFleet {
    /// Builds `config.clients` clients running `strategy` and lets each refresh
    /// [`FleetConfig::warmup_for`] times against a calm, healthy cluster.
    pub fn new(config: &FleetConfig, strategy: &Strategy) -> Self {
        let brokers = config.brokers.clamp(1, u16::MAX as u32) as usize;
        let addresses = numbered_seeds(brokers);
        let warmup = config.warmup_for(strategy);
        let mut clients = Vec::with_capacity(config.clients as usize);
        for i in 0..config.clients as usize {
            let cluster = match strategy {
                Strategy::Oracle => None,
                Strategy::Core { refresh, .. } => {
                    // Three seed brokers per client, rotating, as a config management tool
                    // would hand out; the rest are learned from metadata.
                    let seeds = (0..3.min(brokers)).map(|k| addresses[(i + k) % brokers].as_str());
                    let book = BrokerBook::new(seeds).ok();
                    let cfg = ClusterConfig {
                        refresh: refresh.with_seed(mix(config.seed, 1 + i as u64)),
                        refresh_interval: REFRESH_INTERVAL,
                        rebootstrap: true,
                    };
                    book.and_then(|b| Cluster::new(cfg, b, Instant::ZERO).ok())
                }
            };
            clients.push(Client {
                cluster,
                live: Vec::with_capacity(4),
                timer_at: None,
                timer_gen: 0,
                warm_left: warmup,
                measured: None,
                draws: 0,
            });
        }
        let mut engine = Engine {
            brokers: alloc::vec![Broker { mode: Mode::Healthy, free_at: 0, promised_until: 0 }; brokers],
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
            warm_spacing_us: duration_micros(config.warmup_spacing).max(1),
            tally: None,
            scratch: Vec::with_capacity(16),
            events: 0,
            overflow: false,
        };
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
        for c in &mut engine.clients {
            c.timer_at = None;
            c.timer_gen = c.timer_gen.wrapping_add(1);
        }
        WarmFleet { config: config.clone(), strategy_name: strategy.name().into(), engine }
    }

    /// Runs `scenario` on a copy of the warmed fleet and reports it.
    pub fn run(&self, scenario: FleetScenario) -> ScenarioResult {
        let config = &self.config;
        let mut e = self.engine.clone();
        let n_brokers = e.brokers.len();
        let t0 = e.now.saturating_add(duration_micros(config.settle));
        // Which brokers fail, and when clients ask, come from a stream of their own: the
        // same for every strategy, so strategies face exactly the same incident.
        let mut schedule = Rng::new(mix(config.seed, 0x100 + scenario as u64));
        let mut order: Vec<usize> = (0..n_brokers).collect();
        schedule.shuffle(&mut order);
        let (failing, mode) = match scenario {
            FleetScenario::Healthy => (0, Mode::Healthy),
            FleetScenario::OneHung => (1, Mode::Hung),
            FleetScenario::ThirdHung => ((n_brokers / 3).max(1), Mode::Hung),
            FleetScenario::FailoverStorm => (1, Mode::Dead),
        };
        for &b in order.iter().take(failing.min(n_brokers.saturating_sub(1))) {
            e.brokers[b].mode = mode;
        }
        if mode == Mode::Dead {
            // The dead broker's kept connections close: their clients learn of it at once.
            let dead: Vec<usize> = (0..n_brokers).filter(|&b| e.brokers[b].mode == Mode::Dead).collect();
            for c in &mut e.clients {
                if let Some(cluster) = &mut c.cluster {
                    let closed: Vec<_> = cluster
                        .book()
                        .iter()
                        .filter(|(_, entry)| {
                            entry.connected && broker_of(&entry.address).is_some_and(|b| dead.contains(&b))
                        })
                        .map(|(i, _)| i)
                        .collect();
                    for i in closed {
                        cluster.connection_closed(i);
                    }
                }
            }
        }
        let window = match scenario {
            FleetScenario::FailoverStorm => config.storm_window,
            _ => config.request_window,
        };
        let window_us = duration_micros(window) as f64;
        for i in 0..e.clients.len() {
            let at = t0 + (schedule.unit() * window_us) as u64;
            e.push(at, Ev::Request { client: i as u32, measured: true });
        }
        e.tally = Some(Tally {
            t0,
            arrivals: alloc::vec![Vec::new(); n_brokers],
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
        requests: tally.requests_sent,
        requests_per_refresh: per(tally.requests_sent),
        refused: tally.refused,
        cancelled_before_handshake: tally.cancelled_before_handshake,
        peak_requests: peak,
        peak_broker,
        requests_per_broker: tally.arrivals.iter().map(|a| a.len() as u64).collect(),
        core_started: tally.core_started,
        cdf: cdf_points(&tally.times),
        times_us: tally.times,
    }
}

impl Engine {
    fn push(&mut self, at: u64, ev: Ev) {
        self.heap.push(Entry { at, seq: self.seq, ev });
        self.seq += 1;
    }

    /// The next attempt's round trip (`rtt · [0.8, 1.2]`) and service time (exponential,
    /// mean `service_time`).
    ///
    /// During a measurement the `k`-th attempt of client `i` draws from a stream of its own
    /// (common random numbers): under every strategy, client `i`'s first attempt meets the
    /// same network and the same broker work, so strategies differ only by what they do.
    fn draw(&mut self, ci: usize) -> Draw {
        let c = &mut self.clients[ci];
        let mut own;
        let rng = if self.tally.is_some() && c.measured.is_some() {
            own = Rng::new(mix(mix(self.seed, 0xC0 + ci as u64), c.draws as u64));
            c.draws += 1;
            &mut own
        } else {
            &mut self.rng
        };
        let rtt = (self.rtt_us * (0.8 + 0.4 * rng.unit())) as u64;
        let service = -math::ln(1.0 - rng.unit()) * self.service_us;
        Draw { rtt: rtt.clamp(1, u32::MAX as u64) as u32, service: (service as u64).min(u32::MAX as u64) as u32 }
    }

    fn run(&mut self) {
        while let Some(Entry { at, ev, .. }) = self.heap.pop() {
            self.events += 1;
            if self.events > MAX_EVENTS {
                self.overflow = true;
                return;
            }
            self.now = self.now.max(at);
            let now = self.now;
            match ev {
                Ev::Request { client, measured } => self.on_request(client as usize, measured),
                Ev::Timer { client, gen } => {
                    let c = &mut self.clients[client as usize];
                    if c.timer_gen == gen {
                        c.timer_at = None;
                        if let Some(cluster) = &mut c.cluster {
                            cluster.handle_timeout(Instant::from_micros(now));
                        }
                        self.drain(client as usize);
                    }
                }
                Ev::Connected { client, attempt, broker, draw } => {
                    self.on_connected(client as usize, attempt, broker, draw)
                }
                Ev::ApiArrive { client, attempt, broker, draw } => {
                    // ApiVersions is cheap but waits in the same queue as everything else;
                    // a hung broker never answers it.
                    let api = (self.service_us / 20.0) as u32;
                    if let Some(done) = self.serve(broker as usize, api) {
                        let at = done + (draw.rtt / 2) as u64;
                        self.push(at, Ev::ApiAnswer { client, attempt, broker, draw });
                    }
                }
                Ev::ApiAnswer { client, attempt, broker, draw } => {
                    // The Metadata request goes out only if the attempt is still wanted.
                    let ci = client as usize;
                    if self.is_live(ci, attempt) {
                        if self.is_measured(ci, attempt) {
                            self.tally_mut(|t| t.requests_sent += 1);
                        }
                        self.push(now + (draw.rtt / 2) as u64, Ev::MetaArrive { client, attempt, broker, draw });
                        if self.clients[ci].cluster.is_some() {
                            self.deliver(ci, Input::Answered { attempt });
                        }
                    }
                }
                Ev::MetaArrive { client, attempt, broker, draw } => {
                    let b = broker as usize;
                    if let Some(t) = &mut self.tally {
                        t.arrivals[b].push(now.saturating_sub(t.t0).min(u32::MAX as u64) as u32);
                    }
                    if let Some(done) = self.serve(b, draw.service) {
                        self.push(done + (draw.rtt / 2) as u64, Ev::Response { client, attempt });
                    }
                }
                Ev::Response { client, attempt } => {
                    let ci = client as usize;
                    if self.clients[ci].cluster.is_none() {
                        self.finish_measured(ci, true);
                    } else if self.take_live(ci, attempt) {
                        let input = Input::Response { attempt, metadata: self.metadata.clone() };
                        self.deliver(ci, input);
                    }
                }
                Ev::Refused { client, attempt } => {
                    let ci = client as usize;
                    let counted = self.is_measured(ci, attempt);
                    if self.take_live(ci, attempt) {
                        if counted {
                            self.tally_mut(|t| t.refused += 1);
                        }
                        let error = AttemptError::with_detail(ErrorKind::Refused, "simulated: broker is down");
                        self.deliver(ci, Input::Failed { attempt, error });
                    } else if counted {
                        self.tally_mut(|t| t.cancelled_before_handshake += 1);
                    }
                }
            }
        }
    }

    fn tally_mut(&mut self, f: impl FnOnce(&mut Tally)) {
        if let Some(t) = &mut self.tally {
            f(t);
        }
    }

    /// Whether `attempt` belongs to client `ci`'s measured refresh (during a measurement).
    fn is_measured(&self, ci: usize, attempt: AttemptId) -> bool {
        let c = &self.clients[ci];
        self.tally.is_some() && c.measured.is_some_and(|m| c.cluster.is_none() || m.epoch == attempt.epoch())
    }

    /// Whether the client still wants `attempt` (an oracle client always does).
    fn is_live(&self, ci: usize, attempt: AttemptId) -> bool {
        let c = &self.clients[ci];
        c.cluster.is_none() || c.live.contains(&attempt)
    }

    fn take_live(&mut self, ci: usize, attempt: AttemptId) -> bool {
        let c = &mut self.clients[ci];
        if c.cluster.is_none() {
            return true;
        }
        match c.live.iter().position(|&a| a == attempt) {
            Some(i) => {
                c.live.swap_remove(i);
                true
            }
            None => false,
        }
    }

    fn on_request(&mut self, ci: usize, measured: bool) {
        let now = self.now;
        if !measured {
            let c = &mut self.clients[ci];
            if c.warm_left > 0 {
                c.warm_left -= 1;
            }
            if c.warm_left > 0 {
                let gap = (self.warm_spacing_us as f64 * (0.5 + self.rng.unit())) as u64;
                self.push(now + gap.max(1), Ev::Request { client: ci as u32, measured: false });
            }
        }
        let c = &mut self.clients[ci];
        match &mut c.cluster {
            Some(cluster) => {
                let epoch = cluster.request_refresh(Instant::from_micros(now));
                if measured {
                    c.measured = Some(Measured { requested_at: now, epoch, done: false });
                }
                self.drain(ci);
            }
            None => {
                if !measured {
                    return;
                }
                c.measured = Some(Measured { requested_at: now, epoch: 0, done: false });
                self.tally_mut(|t| t.attempts += 1);
                let draw = self.draw(ci);
                match self.least_loaded(draw) {
                    Some(b) => {
                        let ev = Ev::Connected { client: ci as u32, attempt: AttemptId(0), broker: b as u16, draw };
                        self.push(now + draw.rtt as u64, ev);
                    }
                    None => self.finish_measured(ci, false),
                }
            }
        }
    }

    /// The oracle's pick: the healthy broker whose queue empties first, counting the work
    /// of requests already sent to it but still on the wire (without that, every oracle
    /// client asking within one round trip would herd onto the same idle broker). Ties are
    /// broken from a random starting point so equal brokers share the load.
    fn least_loaded(&mut self, draw: Draw) -> Option<usize> {
        let n = self.brokers.len();
        let start = self.rng.below(n);
        let now = self.now;
        let mut best: Option<(u64, usize)> = None;
        for k in 0..n {
            let b = (start + k) % n;
            let broker = &self.brokers[b];
            if broker.mode != Mode::Healthy {
                continue;
            }
            let free = broker.free_at.max(broker.promised_until).max(now);
            if best.is_none_or(|(f, _)| free < f) {
                best = Some((free, b));
            }
        }
        let (free, b) = best?;
        let work = draw.service as u64 + (self.service_us / 20.0) as u64;
        self.brokers[b].promised_until = free + work;
        Some(b)
    }

    /// A request taking `service` µs joins broker `b`'s queue now. Returns when it is
    /// served (`None` for a broker that never answers).
    fn serve(&mut self, b: usize, service: u32) -> Option<u64> {
        let now = self.now;
        let broker = &mut self.brokers[b];
        match broker.mode {
            Mode::Healthy => {
                let done = broker.free_at.max(now) + service as u64;
                broker.free_at = done;
                Some(done)
            }
            Mode::Hung | Mode::Dead => None,
        }
    }

    fn on_connected(&mut self, ci: usize, attempt: AttemptId, broker: u16, draw: Draw) {
        let counted = self.is_measured(ci, attempt);
        if !self.is_live(ci, attempt) {
            if counted {
                self.tally_mut(|t| t.cancelled_before_handshake += 1);
            }
            return;
        }
        if counted {
            self.tally_mut(|t| t.reached += 1);
        }
        let at = self.now + (draw.rtt / 2) as u64;
        self.push(at, Ev::ApiArrive { client: ci as u32, attempt, broker, draw });
        if self.clients[ci].cluster.is_some() {
            self.deliver(ci, Input::Connected { attempt });
        }
    }

    fn deliver(&mut self, ci: usize, input: Input) {
        if let Some(cluster) = &mut self.clients[ci].cluster {
            cluster.handle_input(Instant::from_micros(self.now), input);
        }
        self.drain(ci);
    }

    /// Carries out everything client `ci`'s core has queued, then re-arms its timer.
    fn drain(&mut self, ci: usize) {
        let mut scratch = core::mem::take(&mut self.scratch);
        if let Some(cluster) = &mut self.clients[ci].cluster {
            while let Some(event) = cluster.poll_event() {
                scratch.push(event);
            }
        }
        for event in scratch.drain(..) {
            self.on_event(ci, event);
        }
        self.scratch = scratch;
        self.rearm(ci);
    }

    fn on_event(&mut self, ci: usize, event: ClusterEvent) {
        let now = self.now;
        match event {
            ClusterEvent::Connect { attempt, broker } => {
                let target = self.clients[ci].cluster.as_ref().and_then(|c| broker_of(c.book().address(broker)));
                self.clients[ci].live.push(attempt);
                if self.is_measured(ci, attempt) {
                    self.tally_mut(|t| t.attempts += 1);
                }
                let draw = self.draw(ci);
                let at = now + draw.rtt as u64;
                match target {
                    Some(b) if b < self.brokers.len() && self.brokers[b].mode != Mode::Dead => {
                        self.push(at, Ev::Connected { client: ci as u32, attempt, broker: b as u16, draw });
                    }
                    _ => self.push(at, Ev::Refused { client: ci as u32, attempt }),
                }
            }
            ClusterEvent::Cancel { attempt, .. } => {
                self.take_live(ci, attempt);
            }
            ClusterEvent::Refreshed { epoch, stats, .. } => {
                if self.clients[ci].measured.is_some_and(|m| m.epoch == epoch && !m.done) {
                    self.tally_mut(|t| {
                        t.hedges += stats.hedges as u64;
                        t.core_started += stats.started as u64;
                    });
                    self.finish_measured(ci, true);
                }
            }
            ClusterEvent::RefreshFailed { epoch, .. } => {
                if self.clients[ci].measured.is_some_and(|m| m.epoch == epoch && !m.done) {
                    self.finish_measured(ci, false);
                }
            }
            ClusterEvent::Rebootstrapped => {}
        }
    }

    fn finish_measured(&mut self, ci: usize, ok: bool) {
        let now = self.now;
        let Some(m) = &mut self.clients[ci].measured else { return };
        if m.done || self.tally.is_none() {
            return;
        }
        m.done = true;
        let took = now.saturating_sub(m.requested_at);
        self.tally_mut(|t| {
            t.outstanding = t.outstanding.saturating_sub(1);
            if ok {
                t.times.push(took);
            } else {
                t.failed += 1;
                t.times.push(u64::MAX);
            }
        });
    }

    fn rearm(&mut self, ci: usize) {
        let horizon = self.horizon;
        let now = self.now;
        let c = &mut self.clients[ci];
        let Some(cluster) = &c.cluster else { return };
        match cluster.poll_timeout().map(Instant::as_micros) {
            Some(t) if t <= horizon => {
                if c.timer_at != Some(t) {
                    c.timer_gen = c.timer_gen.wrapping_add(1);
                    c.timer_at = Some(t);
                    let gen = c.timer_gen;
                    self.push(t.max(now), Ev::Timer { client: ci as u32, gen });
                }
            }
            _ => {
                if c.timer_at.take().is_some() {
                    c.timer_gen = c.timer_gen.wrapping_add(1);
                }
            }
        }
    }
}
