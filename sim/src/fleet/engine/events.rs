//! The event loop: pops timed events in order and carries out each client's `Connect` and
//! `Cancel` against the simulated brokers, feeding the results back as an adapter would.

use super::machine::{Owner, Then};
use super::{broker_of, mix, Draw, Engine, Entry, Ev, Measured, Mode, Queue, Read, Tally, MAX_EVENTS};
use crate::fleet::math;
use stagger::{AttemptError, AttemptId, ClusterEvent, ErrorKind, Input, Instant, RefreshCause, Rng};

/// Indices of [`Engine::latency_us`].
const METADATA: usize = 0;
const API_VERSIONS: usize = 1;
const TLS: usize = 2;
const SASL: usize = 3;

impl Engine {
    pub(super) fn push(&mut self, at: u64, ev: Ev) {
        self.push_entry(at, ev, false);
    }

    fn push_entry(&mut self, at: u64, ev: Ev, paid: bool) {
        self.heap.push(Entry { at, seq: self.seq, ev, paid });
        self.seq += 1;
    }

    /// The clients' process's own work on `ev` ([`crate::fleet::ClientWork`], µs) and whose
    /// it is: a client's for each message it handles (and a TLS handshake's key exchange
    /// beside it, and its first SASL exchange's key derivation), the forwarder's for each
    /// request it relays to a broker; `None` when it costs nothing.
    fn client_work(&mut self, ev: &Ev) -> Option<(u32, Owner)> {
        let (message, tls, relay, keys) = self.client_work_us;
        let client = |c: &u32| Owner::Client(*c);
        let (work, owner) = match ev {
            Ev::Secured { client: c, .. } => (message.saturating_add(tls), client(c)),
            Ev::Authenticated { client: c, .. } => {
                let derived = &mut self.clients[*c as usize].keys_derived;
                let derive = if *derived { 0 } else { keys };
                *derived = true;
                (message.saturating_add(derive), client(c))
            }
            Ev::Request { client: c, .. }
            | Ev::Connected { client: c, .. }
            | Ev::ApiAnswer { client: c, .. }
            | Ev::Response { client: c, .. }
            | Ev::Refused { client: c, .. } => (message, client(c)),
            Ev::TlsArrive { .. } | Ev::ApiArrive { .. } | Ev::SaslArrive { .. } | Ev::MetaArrive { .. } => {
                (relay, Owner::Forwarder)
            }
            Ev::Timer { .. } | Ev::Reused { .. } | Ev::Slice { .. } | Ev::Read { .. } => return None,
        };
        (work > 0).then_some((work, owner))
    }

    /// The next attempt's round trip (`rtt · [0.8, 1.2]`), service time (exponential, mean
    /// `service_time`) and host pause ([`crate::fleet::HostDelay`]).
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
        // Drawn only when configured, so fleets without it draw what they always drew.
        let (share, mean) = self.host_delay;
        let host = if share > 0.0 && rng.unit() < share { -math::ln(1.0 - rng.unit()) * mean } else { 0.0 };
        let micros = |x: f64| (x as u64).min(u32::MAX as u64) as u32;
        Draw { rtt: rtt.clamp(1, u32::MAX as u64) as u32, service: micros(service), host: micros(host) }
    }

    pub(super) fn run(&mut self) {
        while let Some(Entry { at, ev, paid, .. }) = self.heap.pop() {
            self.events += 1;
            if self.events > MAX_EVENTS {
                self.overflow = true;
                return;
            }
            self.now = self.now.max(at);
            let now = self.now;
            if let Some((work, owner)) = (!paid).then(|| self.client_work(&ev)).flatten() {
                // The event takes effect once the client's (or the forwarder's) work is done.
                self.work(work, owner, Then { ev, delay: 0, paid: true });
                continue;
            }
            match ev {
                Ev::Request { client, measured } => self.on_request(client as usize, measured),
                Ev::Read { client, attempt, broker, draw, read } => self.requested(client, attempt, broker, draw, read),
                Ev::Slice { core } => {
                    if let Some(m) = &mut self.machine {
                        m.slice_done(now, core);
                    }
                    self.take_machine_events();
                }
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
                Ev::Reused { client, attempt, broker, draw } => {
                    let ci = client as usize;
                    if self.clients[ci].cluster.is_none() {
                        // The oracle knows the broker is healthy: Metadata at once.
                        self.send_metadata(client, attempt, broker, draw, None)
                    } else if self.is_live(ci, attempt) {
                        // A kept connection is secured already: no TLS handshake follows, and
                        // it is asked for Metadata alone (`KafkaAttempt::resumed_at`).
                        self.deliver(ci, Input::Connected { attempt, tls: false });
                        self.send_metadata(client, attempt, broker, draw, None);
                    }
                }
                Ev::TlsArrive { client, attempt, broker, draw } => {
                    // The ClientHello is on the wire: the broker works on it even if the
                    // client gives up meanwhile; a hung broker never answers it.
                    if self.is_measured(client as usize, attempt) {
                        self.tally_mut(|t| t.tls_handshakes += 1);
                    }
                    let then = Ev::Secured { client, attempt, broker, draw };
                    let delay = self.latency_us[TLS] + (draw.rtt / 2) as u64;
                    let queue = self.network(client, broker);
                    self.serve(broker as usize, self.tls_us.unwrap_or(0), queue, Some((then, delay)));
                    self.background(broker as usize, self.background_us.1);
                }
                Ev::Secured { client, attempt, broker, draw } => {
                    let ci = client as usize;
                    if self.is_live(ci, attempt) {
                        let at = self.now + (draw.rtt / 2) as u64;
                        self.push(at, Ev::ApiArrive { client, attempt, broker, draw });
                        self.deliver(ci, Input::FirstFrame { attempt });
                    }
                }
                Ev::ApiArrive { client, attempt, broker, draw } => {
                    // ApiVersions waits in the same queue as everything else; a hung broker
                    // never answers it.
                    if self.is_measured(client as usize, attempt) {
                        self.tally_mut(|t| t.api_versions += 1);
                    }
                    if self.sasl_round_trips == 0 {
                        self.request(client, attempt, broker, draw, Read::ApiVersions);
                    } else {
                        // A SASL listener answers a new connection's ApiVersions before it
                        // authenticates, on the network thread that runs its handshakes.
                        let then = Ev::ApiAnswer { client, attempt, broker, draw };
                        let delay = self.latency_us[API_VERSIONS] + (draw.rtt / 2) as u64;
                        let queue = self.network(client, broker);
                        self.serve(broker as usize, self.api_us, queue, Some((then, delay)));
                        self.background(broker as usize, self.background_us.2);
                    }
                }
                Ev::ApiAnswer { client, attempt, broker, draw } => {
                    // Over TLS a new connection's broker was heard alive at the handshake.
                    let first = self.tls_us.is_none().then_some(Input::FirstFrame { attempt });
                    let ci = client as usize;
                    if self.sasl_round_trips == 0 {
                        self.send_metadata(client, attempt, broker, draw, first);
                    } else if self.is_live(ci, attempt) {
                        self.push(self.now + (draw.rtt / 2) as u64, Ev::SaslArrive { client, attempt, broker, draw });
                        if let Some(input) = first {
                            self.deliver(ci, input);
                        }
                        // The client's first SASL message goes out: the broker checks it.
                        self.deliver(ci, Input::Authenticating { attempt });
                    }
                }
                Ev::SaslArrive { client, attempt, broker, draw } => {
                    // The exchange's broker work is charged at once; its further round trips
                    // only delay the client.
                    let more = self.sasl_round_trips.saturating_sub(1) as u64 * draw.rtt as u64;
                    let then = Ev::Authenticated { client, attempt, broker, draw };
                    let delay = self.latency_us[SASL] + (draw.rtt / 2) as u64 + more;
                    let queue = self.network(client, broker);
                    self.serve(broker as usize, self.sasl_us, queue, Some((then, delay)));
                }
                Ev::Authenticated { client, attempt, broker, draw } => {
                    if self.is_live(client as usize, attempt) {
                        self.deliver(client as usize, Input::Authenticated { attempt });
                    }
                    self.send_metadata(client, attempt, broker, draw, None)
                }
                Ev::MetaArrive { client, attempt, broker, draw } => {
                    if !self.count_reads {
                        self.count_metadata(broker);
                    }
                    self.request(client, attempt, broker, draw, Read::Metadata);
                }
                Ev::Response { client, attempt } => {
                    let ci = client as usize;
                    self.clients[ci].awaiting_metadata.retain(|&a| a != attempt);
                    if self.clients[ci].cluster.is_none() {
                        self.finish_measured(ci, true);
                    } else if self.take_live(ci, attempt) {
                        // Metadata alone on a kept connection: its answer is the broker's first.
                        let first_answer = self.clients[ci]
                            .cluster
                            .as_ref()
                            .and_then(|c| c.current())
                            .and_then(|r| r.attempt(attempt))
                            .is_some_and(|a| a.first_frame_at.is_none());
                        if first_answer {
                            self.deliver(ci, Input::FirstFrame { attempt });
                        }
                        let input = Input::Response { attempt, metadata: self.metadata.clone() };
                        self.deliver(ci, input);
                    } else {
                        self.drained(ci, attempt);
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

    /// The client sends `attempt`'s Metadata request to `broker`, if it still wants the
    /// attempt, and tells its core `input` (what the client just learnt of the attempt, if
    /// anything new).
    fn send_metadata(&mut self, client: u32, attempt: AttemptId, broker: u16, draw: Draw, input: Option<Input>) {
        let ci = client as usize;
        if !self.is_live(ci, attempt) {
            return;
        }
        if self.is_measured(ci, attempt) {
            self.tally_mut(|t| t.requests_sent += 1);
        }
        if self.clients[ci].cluster.is_some() {
            self.clients[ci].awaiting_metadata.push(attempt);
        }
        self.push(self.now + (draw.rtt / 2) as u64, Ev::MetaArrive { client, attempt, broker, draw });
        if let Some(input) = input.filter(|_| self.clients[ci].cluster.is_some()) {
            self.deliver(ci, input);
        }
    }

    /// A draining loser's Metadata answer came: its connection is offered as a spare.
    fn drained(&mut self, ci: usize, attempt: AttemptId) {
        let c = &mut self.clients[ci];
        let Some(i) = c.draining.iter().position(|&(a, ..)| a == attempt) else { return };
        let (_, broker, until, drain) = c.draining.swap_remove(i);
        if let Some(cluster) = c.cluster.as_mut().filter(|_| self.now <= until) {
            cluster.keep_drained(broker, drain);
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

    /// Whether the client still wants `attempt` (an oracle client always does; a draining
    /// one until its drain gives up).
    fn is_live(&self, ci: usize, attempt: AttemptId) -> bool {
        let c = &self.clients[ci];
        c.cluster.is_none()
            || c.live.contains(&attempt)
            || c.draining.iter().any(|&(a, _, until, _)| a == attempt && self.now <= until)
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
                let (cause, broker) = if measured { c.cause } else { (RefreshCause::Requested, None) };
                let epoch = cluster.request_refresh_because(Instant::from_micros(now), cause, broker);
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
                    // The oracle is connected to every broker already.
                    Some(b) => {
                        self.tally_mut(|t| t.reused += 1);
                        let ev = Ev::Reused { client: ci as u32, attempt: AttemptId(0), broker: b as u16, draw };
                        self.push(now, ev);
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
        let work = draw.service as u64;
        self.brokers[b].promised_until = free + work;
        Some(b)
    }

    /// The queue of the network thread `client`'s connections to `broker` are pinned to
    /// (the request queue when brokers have no network threads).
    fn network(&self, client: u32, broker: u16) -> Queue {
        match self.network_threads {
            0 => Queue::Requests,
            n => Queue::Network((mix(u64::from(client), u64::from(broker)) % u64::from(n)) as u8),
        }
    }

    /// A request reached `broker`: its network thread reads it first, if it has them.
    fn request(&mut self, client: u32, attempt: AttemptId, broker: u16, draw: Draw, read: Read) {
        match self.network(client, broker) {
            Queue::Requests => self.requested(client, attempt, broker, draw, read),
            queue => {
                let then = Ev::Read { client, attempt, broker, draw, read };
                self.serve(broker as usize, 0, queue, Some((then, 0)));
            }
        }
    }

    /// A Metadata request counts for `broker` now (its arrival or its read,
    /// [`FleetConfig::count_reads`](crate::fleet::FleetConfig::count_reads)).
    fn count_metadata(&mut self, broker: u16) {
        let now = self.now;
        if let Some(t) = &mut self.tally {
            t.arrivals[broker as usize].push(now.saturating_sub(t.t0).min(u32::MAX as u64) as u32);
        }
    }

    /// `broker` does `us` µs of work from `start` (its queue's estimate on shared cores),
    /// counted for its busiest window ([`crate::fleet::ScenarioResult::peak_busy_us`]).
    fn count_work(&mut self, broker: usize, start: u64, us: u32) {
        if let Some(t) = &mut self.tally {
            if us > 0 && start >= t.t0 {
                t.work[broker].push(((start - t.t0).min(u32::MAX as u64) as u32, us));
            }
        }
    }

    /// A request read from its connection waits for `broker`'s request threads.
    fn requested(&mut self, client: u32, attempt: AttemptId, broker: u16, draw: Draw, read: Read) {
        if read == Read::Metadata && self.count_reads {
            self.count_metadata(broker);
        }
        let (work, then, delay) = match read {
            Read::ApiVersions => (
                self.api_us,
                Ev::ApiAnswer { client, attempt, broker, draw },
                self.latency_us[API_VERSIONS] + (draw.rtt / 2) as u64,
            ),
            Read::Metadata => (
                draw.service,
                Ev::Response { client, attempt },
                self.latency_us[METADATA] + (draw.rtt / 2) as u64 + draw.host as u64,
            ),
        };
        self.serve(broker as usize, work, Queue::Requests, Some((then, delay)));
        self.background(broker as usize, self.background_us.2);
    }

    /// Work taking `service` µs joins broker `b`'s `queue` now; once done, `then`'s event
    /// follows after its delay. A broker that never answers takes none.
    fn serve(&mut self, b: usize, service: u32, queue: Queue, then: Option<(Ev, u64)>) {
        let broker = &mut self.brokers[b];
        if broker.mode != Mode::Healthy {
            return;
        }
        let free_at = match queue {
            Queue::Requests => &mut broker.free_at,
            Queue::Network(k) => &mut broker.network_free_at[k as usize % broker.network_free_at.len()],
            Queue::Background => return,
        };
        // On cores of its own the broker's queue alone says when the work is done; on shared
        // cores this is only the oracle's estimate, and the machine decides.
        let done = (*free_at).max(self.now) + service as u64;
        *free_at = done;
        self.count_work(b, done - service as u64, service);
        let then = then.map(|(ev, delay)| Then { ev, delay, paid: false });
        match &mut self.machine {
            Some(m) => {
                m.submit(self.now, service, Owner::Broker(b as u16, queue), then);
                self.take_machine_events();
            }
            None => {
                if let Some(then) = then {
                    self.push(done + then.delay, then.ev);
                }
            }
        }
    }

    /// What `us` of work on broker `b`'s request path costs its process beside it
    /// ([`FleetConfig::broker_background`](crate::fleet::FleetConfig::broker_background)): on
    /// its background thread, with shared cores; nothing follows it.
    fn background(&mut self, b: usize, us: u32) {
        if us == 0 || self.brokers[b].mode != Mode::Healthy {
            return;
        }
        self.count_work(b, self.now, us);
        if let Some(m) = &mut self.machine {
            m.submit(self.now, us, Owner::Broker(b as u16, Queue::Background), None);
            self.take_machine_events();
        }
    }

    /// A client's work of `work` µs, then `then`: on a shared core when the machine has
    /// them, else on the client's own.
    fn work(&mut self, work: u32, owner: Owner, then: Then) {
        match &mut self.machine {
            Some(m) => {
                m.submit(self.now, work, owner, Some(then));
                self.take_machine_events();
            }
            None => self.push_entry(self.now + work as u64, then.ev, then.paid),
        }
    }

    /// Pushes what the machine scheduled: slices' ends and finished work's next events.
    fn take_machine_events(&mut self) {
        let Some(m) = &mut self.machine else { return };
        let mut out = core::mem::take(&mut m.out);
        for (at, ev, paid) in out.drain(..) {
            self.push_entry(at, ev, paid);
        }
        if let Some(m) = &mut self.machine {
            m.out = out;
        }
    }

    fn on_connected(&mut self, ci: usize, attempt: AttemptId, broker: u16, draw: Draw) {
        let counted = self.is_measured(ci, attempt);
        if !self.is_live(ci, attempt) {
            // The client closed its socket before the handshake completed: no connection.
            if counted {
                self.tally_mut(|t| t.cancelled_before_handshake += 1);
            }
            return;
        }
        if counted {
            self.tally_mut(|t| t.reached += 1);
        }
        // The broker accepts the connection, and closes it later, whatever the client does
        // with it from now on; a stopped broker's kernel accepts, the broker does no work.
        let queue = self.network(ci as u32, broker);
        self.serve(broker as usize, self.accept_us, queue, None);
        self.background(broker as usize, self.background_us.0);
        let at = self.now + (draw.rtt / 2) as u64;
        let (client, broker) = (ci as u32, broker);
        let next = match self.tls_us {
            Some(_) => Ev::TlsArrive { client, attempt, broker, draw },
            None => Ev::ApiArrive { client, attempt, broker, draw },
        };
        self.push(at, next);
        if self.clients[ci].cluster.is_some() {
            self.deliver(ci, Input::Connected { attempt, tls: self.tls_us.is_some() });
        }
    }

    fn deliver(&mut self, ci: usize, input: Input) {
        let c = &mut self.clients[ci];
        // A draining attempt's progress is the client's own business, not the core's.
        if c.draining.iter().any(|&(a, ..)| a == input.attempt()) {
            return;
        }
        if let Some(cluster) = &mut c.cluster {
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
            ClusterEvent::Reuse { attempt, broker } => {
                let target = self.clients[ci].cluster.as_ref().and_then(|c| broker_of(c.book().address(broker)));
                self.clients[ci].live.push(attempt);
                if self.is_measured(ci, attempt) {
                    self.tally_mut(|t| t.attempts += 1);
                }
                let draw = self.draw(ci);
                match target {
                    // A dead broker's kept connections were closed when it died.
                    Some(b) if b < self.brokers.len() && self.brokers[b].mode != Mode::Dead => {
                        if self.is_measured(ci, attempt) {
                            self.tally_mut(|t| t.reused += 1);
                        }
                        self.push(now, Ev::Reused { client: ci as u32, attempt, broker: b as u16, draw });
                    }
                    _ => self.push(now, Ev::Refused { client: ci as u32, attempt }),
                }
            }
            // A simulated connection holds nothing to keep or close.
            ClusterEvent::Keep { .. } | ClusterEvent::Release { .. } => {}
            // Fleet books hold addresses only, never names to resolve: nothing to do (the
            // core's attempt timeout would fail an unanswered one).
            ClusterEvent::Resolve { .. } => {}
            ClusterEvent::Cancel { attempt, reason } => {
                let was_live = self.take_live(ci, attempt);
                // The losers the session drains, drained alike (`Cluster::drain_on_cancel`): a
                // live attempt's connection is open, its exchange unfinished.
                let now = self.now;
                let c = &mut self.clients[ci];
                let owed = c.awaiting_metadata.iter().position(|&a| a == attempt);
                if let Some(i) = owed {
                    c.awaiting_metadata.swap_remove(i);
                }
                let Some(cluster) = &c.cluster else { return };
                c.draining.retain(|&(_, _, until, _)| now <= until);
                let refresh = cluster.current().or(cluster.last_refresh()).filter(|r| r.epoch() == attempt.epoch());
                let Some(broker) = refresh.and_then(|r| r.attempt(attempt)).map(|a| a.broker) else { return };
                let drain = was_live
                    .then(|| cluster.drain_on_cancel(attempt, reason, owed.is_some(), c.draining.len()))
                    .flatten();
                if let Some(drain) = drain {
                    let until = now + cluster.config().refresh.attempt_timeout.as_micros() as u64;
                    c.draining.push((attempt, broker, until, drain));
                }
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
