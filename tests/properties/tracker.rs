//! The bookkeeper: an independent view of the contract, fed the command stream of one
//! refresh and the inputs that reached it, recording every invariant it sees broken.

use std::collections::BTreeMap;
use std::time::Duration;

use stagger::{
    AttemptError, AttemptId, BrokerIndex, CancelReason, Command, ErrorKind, GiveUpReason, Input, Instant, Metadata,
    Refresh, RefreshConfig,
};

/// Which invariant a violation breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Inv {
    /// The basic contract: fresh ids, cancels name attempts in flight, `is_finished`,
    /// `in_flight`, `poll_timeout` agree with the command stream, `handle_input` fires due
    /// timers first.
    Contract,
    /// In flight never above `max_in_flight`.
    Throttle,
    /// Never two attempts in flight to one broker.
    OneBroker,
    /// Stagger ticks respect the (jittered) stagger delay.
    Spacing,
    /// Exactly one terminal command, nothing after it, nothing left in flight by it.
    Terminal,
    /// Driven by `poll_timeout`, the refresh terminates within a bounded number of calls.
    Completion,
    /// `GiveUp(AllFailed)` only after every broker failed in every pass, and before the
    /// retries are spent only when the TLS layer refused every broker; fatal ends at once.
    GiveUp,
    /// `GiveUp` carries the last failure observed.
    LastError,
    /// `Done` only for a valid answer of an attempt in flight, and such an answer wins.
    Done,
    /// No command but `Cancel{Deadline}`/`GiveUp` at or after start + deadline.
    Deadline,
    /// Driven on time, a refresh never finishes later than start + deadline.
    DeadlineDriven,
    /// After `handle_*(now)`, `poll_timeout()` is `None` or later than `now`.
    PollTimeout,
    /// Cluster: at most one refresh in flight; joins return the running epoch.
    SingleFlight,
    /// Cluster: `hedge_tokens()` never above `hedge_budget.burst`.
    HedgeTokens,
    /// Cluster: hedges spent never exceed the tokens earned.
    HedgeBudget,
    /// Cluster: events are exactly the running refresh's commands (a `Connect` of the kept
    /// broker as `Reuse`, each `Done` as `Keep` then `Refreshed`).
    Forwarding,
    /// Cluster: `Reuse` and `Release` name only the broker kept (by the last `Keep`, not
    /// reused, released or closed since), `Keep` never leaves a connection kept before it
    /// unreleased, and `kept()` agrees with the events.
    Keeping,
}

#[derive(Clone, Copy, Debug)]
struct Live {
    broker: BrokerIndex,
    started_at: Instant,
    connected: bool,
    /// The broker answered something (`Input::FirstFrame`).
    answered: bool,
    /// Started by `Resolve`: it looks a name up, and has no connection.
    resolving: bool,
}

/// Follows one refresh's command stream and the inputs that reached it.
#[derive(Clone, Debug)]
pub struct Tracker {
    max_in_flight: u32,
    attempt_timeout: Duration,
    retries: u32,
    /// `Some(n)` when the book is `n` seeds and nothing else, so every broker is a candidate.
    candidates: Option<u32>,
    epoch: u32,
    pub deadline_at: Instant,
    pub now: Instant,
    call: usize,
    live: BTreeMap<AttemptId, Live>,
    pub started: BTreeMap<AttemptId, BrokerIndex>,
    pub issued: Vec<AttemptId>,
    /// How many of `issued` existed when the current call began: only those can have results.
    issued_before_call: usize,
    pub ended: Vec<AttemptId>,
    failures: Vec<(AttemptId, BrokerIndex, AttemptError)>,
    pub terminals: usize,
    pub terminal_at: Option<Instant>,
    cancels_this_call: Vec<CancelReason>,
    terminal_this_call: Option<Command>,
    pending_valid: Option<(AttemptId, Metadata)>,
    pending_reject: Option<(AttemptId, AttemptError)>,
    fatal_input: bool,
    /// The current call is an `Answered` input for an attempt in flight.
    answered_input: bool,
    /// The current call is a `Connected` input for this attempt in flight.
    connected_input: Option<AttemptId>,
    /// Whole hedge tokens the refresh started with (`None`: a bare refresh, unlimited).
    pub budget: Option<u32>,
    /// An attempt superseded this call although the throttle was not full.
    unbudgeted_supersede: Option<AttemptId>,
    /// A `Cancel{Superseded}` was just seen: the next command must be its replacement.
    expect_replacement: bool,
    /// Attempts started in place of a superseded one (by a stagger tick).
    pub superseding: Vec<AttemptId>,
    /// Attempts that ended resolved (neither failed nor cancelled).
    resolved: usize,
    pub violations: Vec<(Inv, String)>,
}

impl Tracker {
    pub fn new(config: &RefreshConfig, candidates: Option<u32>, epoch: u32, start: Instant) -> Self {
        Tracker {
            max_in_flight: config.fanout.max_in_flight,
            attempt_timeout: config.attempt_timeout,
            retries: config.retry.retries,
            candidates,
            epoch,
            deadline_at: start.saturating_add(config.deadline),
            now: start,
            call: 0,
            live: BTreeMap::new(),
            started: BTreeMap::new(),
            issued: Vec::new(),
            issued_before_call: 0,
            ended: Vec::new(),
            failures: Vec::new(),
            terminals: 0,
            terminal_at: None,
            cancels_this_call: Vec::new(),
            terminal_this_call: None,
            pending_valid: None,
            pending_reject: None,
            fatal_input: false,
            answered_input: false,
            connected_input: None,
            budget: None,
            unbudgeted_supersede: None,
            expect_replacement: false,
            superseding: Vec::new(),
            resolved: 0,
            violations: Vec::new(),
        }
    }

    pub fn violate(&mut self, inv: Inv, msg: impl Into<String>) {
        let msg = format!("call #{} (now = {} µs): {}", self.call, self.now.as_micros(), msg.into());
        self.violations.push((inv, msg));
    }

    pub fn first(&self, invs: &[Inv]) -> Option<&(Inv, String)> {
        self.violations.iter().find(|(inv, _)| invs.contains(inv))
    }

    pub fn begin_call(&mut self, now: Instant) {
        self.call += 1;
        if now > self.now {
            self.now = now;
        }
        self.cancels_this_call.clear();
        self.terminal_this_call = None;
        self.fatal_input = false;
        self.answered_input = false;
        self.connected_input = None;
        self.issued_before_call = self.issued.len();
    }

    fn timeout_kind(live: &Live) -> ErrorKind {
        if live.resolving {
            ErrorKind::Dns
        } else if live.connected {
            ErrorKind::ResponseTimeout
        } else {
            ErrorKind::ConnectTimeout
        }
    }

    pub fn on_commands(&mut self, commands: &[Command]) {
        for c in commands {
            self.on_command(c);
        }
    }

    fn on_command(&mut self, c: &Command) {
        if std::mem::take(&mut self.expect_replacement) {
            match c {
                Command::Connect { attempt, .. } | Command::Resolve { attempt, .. } => {
                    self.superseding.push(*attempt);
                }
                other => self
                    .violate(Inv::Contract, format!("Cancel{{Superseded}} not followed by its replacement: {other:?}")),
            }
        }
        if self.terminals > 0 {
            self.violate(Inv::Terminal, format!("{c:?} emitted after the terminal command"));
        }
        let deadline_ok = matches!(c, Command::Cancel { reason: CancelReason::Deadline, .. } | Command::GiveUp(_));
        if self.now >= self.deadline_at && !deadline_ok {
            let deadline = self.deadline_at.as_micros();
            self.violate(Inv::Deadline, format!("{c:?} emitted at or after the deadline ({deadline} µs)"));
        }
        match c {
            Command::Connect { attempt, broker } | Command::Resolve { attempt, broker } => {
                let resolving = matches!(c, Command::Resolve { .. });
                let (attempt, broker) = (*attempt, *broker);
                if attempt.epoch() != self.epoch || self.started.contains_key(&attempt) {
                    self.violate(Inv::Contract, format!("Connect reuses or mislabels attempt id {attempt}"));
                }
                if self.candidates.is_some_and(|n| broker.0 >= n) {
                    self.violate(Inv::Contract, format!("Connect to {broker:?}, not in the book"));
                }
                if self.live.len() as u64 + 1 > self.max_in_flight as u64 {
                    let max = self.max_in_flight;
                    let live: Vec<_> = self.live.keys().map(|a| a.to_string()).collect();
                    self.violate(
                        Inv::Throttle,
                        format!("Connect {attempt} with {live:?} in flight, max_in_flight {max}"),
                    );
                }
                if let Some((other, _)) = self.live.iter().find(|(_, l)| l.broker == broker) {
                    let other = *other;
                    self.violate(
                        Inv::OneBroker,
                        format!("Connect {attempt} to {broker:?} while {other} to it in flight"),
                    );
                }
                let live = Live { broker, started_at: self.now, connected: false, answered: false, resolving };
                self.live.insert(attempt, live);
                self.started.insert(attempt, broker);
                self.issued.push(attempt);
            }
            Command::Cancel { attempt, reason } => {
                let (attempt, reason) = (*attempt, *reason);
                self.cancels_this_call.push(reason);
                let Some(live) = self.live.remove(&attempt) else {
                    self.violate(Inv::Contract, format!("Cancel {attempt} ({reason:?}) of an attempt not in flight"));
                    return;
                };
                self.ended.push(attempt);
                let kind = Self::timeout_kind(&live);
                match reason {
                    CancelReason::TimedOut => {
                        if self.now < live.started_at.saturating_add(self.attempt_timeout) {
                            self.violate(Inv::Contract, format!("{attempt} timed out before attempt_timeout"));
                        }
                        let error = match live.resolving {
                            true => AttemptError::with_detail(
                                kind,
                                "no answer from the resolver within the attempt timeout",
                            ),
                            false => AttemptError::new(kind),
                        };
                        self.failures.push((attempt, live.broker, error));
                    }
                    CancelReason::Rejected => match self.pending_reject.take() {
                        Some((a, error)) if a == attempt => self.failures.push((attempt, live.broker, error)),
                        other => self.violate(
                            Inv::Contract,
                            format!("Cancel {attempt} Rejected, but the rejected answer was {other:?}"),
                        ),
                    },
                    CancelReason::Deadline => {
                        if self.now < self.deadline_at {
                            self.violate(Inv::Deadline, format!("{attempt} cancelled for the deadline before it"));
                        }
                        let error = AttemptError::with_detail(kind, "overall deadline exceeded");
                        self.failures.push((attempt, live.broker, error));
                    }
                    CancelReason::Superseded => {
                        // Only to make room in a full throttle — or, once the hedge budget is
                        // spent, to replace a silent suspect (checked in `after_call`) — and
                        // the replacement follows.
                        let full = self.live.len() as u64 + 1 >= self.max_in_flight as u64;
                        if !full && self.budget.is_none() {
                            let n = self.live.len() + 1;
                            self.violate(Inv::Throttle, format!("{attempt} superseded with only {n} in flight"));
                        }
                        if !full {
                            self.unbudgeted_supersede = Some(attempt);
                            if live.answered {
                                self.violate(Inv::Contract, format!("{attempt} answered, yet replaced without budget"));
                            }
                        }
                        self.expect_replacement = true;
                        let detail = if full {
                            "superseded: no answer within the stagger delay while the throttle was full"
                        } else {
                            "superseded: no answer within the stagger delay and no hedge budget left"
                        };
                        self.failures.push((attempt, live.broker, AttemptError::with_detail(kind, detail)));
                    }
                    CancelReason::Overtaken => {
                        // Only a silent attempt, only when an answer just arrived, and only while
                        // another attempt's broker is answering.
                        if live.answered {
                            self.violate(Inv::Contract, format!("{attempt} overtaken although its broker answered"));
                        }
                        if !self.answered_input || !self.live.values().any(|l| l.answered) {
                            self.violate(Inv::Contract, format!("{attempt} overtaken with no broker answering"));
                        }
                        let detail = "overtaken: no answer yet while another broker was answering";
                        self.failures.push((attempt, live.broker, AttemptError::with_detail(kind, detail)));
                    }
                    CancelReason::Outrun => {
                        // Only an attempt still connecting, only when a later one just connected.
                        if live.connected {
                            self.violate(Inv::Contract, format!("{attempt} outrun although it had connected"));
                        }
                        if self.connected_input.is_none_or(|later| later.number() <= attempt.number()) {
                            self.violate(Inv::Contract, format!("{attempt} outrun with no later attempt connecting"));
                        }
                        let detail = "outrun: still connecting long after a later attempt had connected";
                        self.failures.push((attempt, live.broker, AttemptError::with_detail(kind, detail)));
                    }
                    CancelReason::Lost | CancelReason::Fatal => {}
                    other => {
                        self.violate(Inv::Contract, format!("{attempt} cancelled for {other:?}, unknown to this model"))
                    }
                }
            }
            Command::Done { attempt, broker, metadata } => {
                self.terminal(c);
                match self.pending_valid.take() {
                    Some((a, m)) if a == *attempt && m == *metadata => {}
                    other => self.violate(
                        Inv::Done,
                        format!("Done for {attempt} without a valid answer for it (valid answer: {other:?})"),
                    ),
                }
                match self.live.remove(attempt) {
                    Some(live) if live.broker == *broker => self.ended.push(*attempt),
                    other => self.violate(Inv::Done, format!("Done for {attempt} at {broker:?}, in flight: {other:?}")),
                }
                if !self.live.is_empty() {
                    let left: Vec<_> = self.live.keys().map(|a| a.to_string()).collect();
                    self.violate(Inv::Terminal, format!("Done leaves {left:?} in flight"));
                }
            }
            Command::GiveUp(error) => {
                self.terminal(c);
                if !self.live.is_empty() {
                    let left: Vec<_> = self.live.keys().map(|a| a.to_string()).collect();
                    self.violate(Inv::Terminal, format!("GiveUp leaves {left:?} in flight"));
                }
                let counted: u64 = error.brokers.iter().map(|b| b.attempts as u64).sum();
                if counted != self.started.len() as u64 {
                    let started = self.started.len();
                    self.violate(Inv::Contract, format!("GiveUp counts {counted} attempts, {started} were started"));
                }
                self.check_give_up(error);
            }
        }
    }

    fn terminal(&mut self, c: &Command) {
        self.terminals += 1;
        if self.terminals > 1 {
            self.violate(Inv::Terminal, format!("second terminal command {c:?}"));
        } else {
            self.terminal_at = Some(self.now);
        }
        self.terminal_this_call = Some(c.clone());
    }

    fn check_give_up(&mut self, error: &stagger::RefreshError) {
        let last = self.failures.last().cloned();
        let exact_last = |this: &mut Self| {
            if error.last_error != last {
                this.violate(
                    Inv::LastError,
                    format!(
                        "GiveUp({:?}) carries last_error {:?}, last failure observed was {last:?}",
                        error.reason, error.last_error
                    ),
                );
            }
        };
        match error.reason {
            GiveUpReason::AllFailed { passes } => {
                // Early only when the pass's failures were all the TLS layer's: then every
                // broker's latest failure is one (with a book of more than seeds, at least
                // the last failure is).
                let latest_is_tls = |b: Option<u32>| {
                    let latest = self.failures.iter().rev().find(|(_, broker, _)| b.is_none_or(|b| broker.0 == b));
                    latest.is_some_and(|(_, _, e)| e.kind == ErrorKind::Tls)
                };
                let tls_only = match self.candidates {
                    Some(n) => (0..n).all(|b| latest_is_tls(Some(b))),
                    None => latest_is_tls(None),
                };
                let retries = self.retries;
                if passes > retries.saturating_add(1) || (passes < retries.saturating_add(1) && !tls_only) {
                    self.violate(Inv::GiveUp, format!("AllFailed after {passes} passes with {retries} retries"));
                }
                if self.failures.len() + self.resolved != self.started.len() {
                    let (f, s) = (self.failures.len(), self.started.len() - self.resolved);
                    self.violate(Inv::GiveUp, format!("AllFailed but only {f} of {s} attempts failed"));
                }
                if let Some(n) = self.candidates {
                    for b in 0..n {
                        // Once per pass, plus once more for each time a broker's answer
                        // overtook or outran it and that broker then failed (it is retried in the pass).
                        let of_b = || self.failures.iter().filter(|(_, broker, _)| broker.0 == b);
                        let failed = of_b().count();
                        let overtaken = of_b()
                            .filter(|(_, _, e)| e.detail.starts_with("overtaken") || e.detail.starts_with("outrun"))
                            .count();
                        // (at most one such retry per pass).
                        let most = passes as usize + overtaken.min(passes as usize);
                        if failed < passes as usize || failed > most {
                            self.violate(
                                Inv::GiveUp,
                                format!(
                                    "AllFailed after {passes} passes, but broker {b} failed {failed} times \
                                     ({overtaken} of them overtaken)"
                                ),
                            );
                        }
                    }
                }
                exact_last(self);
            }
            GiveUpReason::Fatal => {
                if !last.as_ref().is_some_and(|(_, _, e)| e.kind.is_fatal()) {
                    self.violate(Inv::GiveUp, format!("GiveUp(Fatal) but the last failure was {last:?}"));
                }
                exact_last(self);
            }
            GiveUpReason::DeadlineExceeded => {
                if self.now < self.deadline_at {
                    self.violate(Inv::Deadline, "GiveUp(DeadlineExceeded) before the deadline");
                }
                let got = error.last_error.as_ref().map(|(a, b, e)| (*a, *b, e.kind));
                let want = last.as_ref().map(|(a, b, e)| (*a, *b, e.kind));
                if got != want {
                    self.violate(
                        Inv::LastError,
                        format!(
                            "GiveUp(DeadlineExceeded) carries {:?}, last failure observed {last:?}",
                            error.last_error
                        ),
                    );
                }
            }
            other => self.violate(Inv::GiveUp, format!("GiveUp({other:?}), a reason unknown to this model")),
        }
    }

    /// The effect of an input, applied between the commands of the timers that were due
    /// (which `handle_input` fires first) and the commands the input caused.
    pub fn on_input(&mut self, input: &Input) {
        let attempt = input.attempt();
        let premature = !self.issued[..self.issued_before_call].contains(&attempt);
        if self.terminals > 0 || !self.live.contains_key(&attempt) || premature {
            return; // ignored: unknown, issued by this very call, finished, cancelled, other epoch, or over
        }
        let resolving = self.live.get(&attempt).is_some_and(|l| l.resolving);
        let fits = match input {
            Input::Resolved { .. } => resolving,
            Input::Connected { .. } | Input::FirstFrame { .. } | Input::Response { .. } => !resolving,
            // A credential check needs the broker's first answer before it.
            Input::Authenticating { .. } | Input::Authenticated { .. } => {
                self.live.get(&attempt).is_some_and(|l| l.answered)
            }
            Input::Failed { .. } => true,
        };
        if !fits {
            return; // ignored: the input does not fit the attempt's phase
        }
        match input {
            Input::Resolved { addresses, .. } => {
                let live = self.live.remove(&attempt).expect("checked above");
                self.ended.push(attempt);
                if addresses.is_empty() {
                    let error = AttemptError::with_detail(ErrorKind::Dns, "the name resolved to no address");
                    self.failures.push((attempt, live.broker, error));
                } else {
                    self.resolved += 1;
                }
            }
            Input::Connected { .. } => {
                if let Some(live) = self.live.get_mut(&attempt) {
                    live.connected = true;
                    self.connected_input = Some(attempt);
                }
            }
            Input::FirstFrame { .. } => {
                if let Some(live) = self.live.get_mut(&attempt) {
                    // An answer implies a connection, and a timeout after it is a response timeout.
                    live.connected = true;
                    live.answered = true;
                    self.answered_input = true;
                }
            }
            Input::Failed { error, .. } => {
                let live = self.live.remove(&attempt).expect("checked above");
                self.ended.push(attempt);
                self.fatal_input = error.kind.is_fatal();
                self.failures.push((attempt, live.broker, error.clone()));
            }
            // They move the stagger timer only (the model checks timers elsewhere).
            Input::Authenticating { .. } | Input::Authenticated { .. } => {}
            Input::Response { metadata, .. } => match metadata.rejection() {
                Some(error) => {
                    self.fatal_input = error.kind.is_fatal();
                    self.pending_reject = Some((attempt, error));
                }
                None => self.pending_valid = Some((attempt, metadata.clone())),
            },
        }
    }

    pub fn end_input(&mut self) {
        if let Some((a, _)) = self.pending_valid.take() {
            self.violate(Inv::Done, format!("a valid answer from {a}, in flight, did not win"));
        }
        if let Some((a, e)) = self.pending_reject.take() {
            self.violate(Inv::Contract, format!("the unusable answer from {a} ({e}) was not cancelled as Rejected"));
        }
        if self.fatal_input && !matches!(self.terminal_this_call, Some(Command::GiveUp(_))) {
            self.violate(Inv::GiveUp, "a fatal error did not end the refresh at once");
        }
    }

    /// Checks after the commands of one call have been drained. `just_started`: the call
    /// was `new` (which fires no timer, so a timer may be due right now).
    pub fn after_call(&mut self, r: &Refresh, just_started: bool) {
        if std::mem::take(&mut self.expect_replacement) {
            self.violate(Inv::Contract, "Cancel{Superseded} was the last command of the call: no replacement");
        }
        if let Some(a) = self.unbudgeted_supersede.take() {
            let (hedges, budget) = (r.stats().hedges, self.budget.unwrap_or(u32::MAX));
            if hedges < budget {
                self.violate(
                    Inv::Throttle,
                    format!("{a} superseded below the throttle with budget left ({hedges} of {budget} hedges spent)"),
                );
            }
        }
        let cancels = std::mem::take(&mut self.cancels_this_call);
        if cancels.contains(&CancelReason::Lost) && !matches!(self.terminal_this_call, Some(Command::Done { .. })) {
            self.violate(Inv::Contract, "Cancel{Lost} without a Done");
        }
        if cancels.contains(&CancelReason::Fatal)
            && !matches!(&self.terminal_this_call, Some(Command::GiveUp(e)) if e.reason == GiveUpReason::Fatal)
        {
            self.violate(Inv::Contract, "Cancel{Fatal} without a GiveUp(Fatal)");
        }
        let finished = self.terminals > 0;
        if r.is_finished() != finished {
            let f = r.is_finished();
            self.violate(Inv::Contract, format!("is_finished() = {f} but terminal commands seen: {}", self.terminals));
        }
        if r.in_flight() as usize != self.live.len() {
            let (got, want) = (r.in_flight(), self.live.len());
            self.violate(Inv::Contract, format!("in_flight() = {got}, command stream says {want}"));
        }
        match r.poll_timeout() {
            None if !finished => self.violate(Inv::Contract, "poll_timeout() is None before the terminal command"),
            Some(t) if finished => {
                self.violate(Inv::Contract, format!("poll_timeout() = {} after the terminal command", t.as_micros()))
            }
            Some(t) if t < self.now || (t == self.now && !just_started) => {
                let now = self.now.as_micros();
                self.violate(
                    Inv::PollTimeout,
                    format!("poll_timeout() = {} µs, not after now = {now} µs", t.as_micros()),
                )
            }
            _ => {}
        }
    }
}
