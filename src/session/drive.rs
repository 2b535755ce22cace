//! The session's inner loop: host events into the connections' Kafka attempts, their inputs
//! into the [`Cluster`](crate::Cluster), its events into actions, until nothing moves.

use alloc::sync::Arc;

use super::contract::{Action, CloseKind, ConnId, Event};
use super::notes::Notes;
use super::observe::Observed;
use super::Session;
use crate::brokers::{BrokerBook, BrokerIndex};
use crate::cluster::ClusterEvent;
use crate::cluster::Drain;
use crate::error::{AttemptError, ErrorKind};
use crate::kafka::sasl::Sasl;
use crate::kafka::KafkaAttempt;
use crate::refresh::{AttemptId, CancelReason, Input};

impl Session {
    /// Applies one host event to its connection; says whether it named one the session
    /// knows (the others are counted and ignored).
    pub(super) fn apply(&mut self, event: Event<'_>) -> bool {
        if let Event::Resolved { lookup, result } = event {
            let input = match result {
                Ok(addresses) => Input::Resolved { attempt: lookup, addresses },
                Err(error) => Input::Failed { attempt: lookup, error },
            };
            let (pending, observed) = (Notes::of(&input, None), Observed::of(self.config.observe, &input));
            let applied = self.cluster.handle_input(self.now, input).is_applied();
            if applied {
                self.notes.applied(pending);
                self.observe_applied(observed);
            }
            return applied;
        }
        let Some(id) = event.conn() else { return false };
        let tls = self.config.tls;
        let Some(conn) = self.conns.get_mut(id) else { return false };
        let Some(kafka) = conn.kafka.as_mut() else {
            // A kept, idle connection: anything but silence ends it.
            let (broker, lost) = match event {
                Event::Closed { how: CloseKind::Clean, .. } => (conn.broker, false),
                Event::Closed { how: CloseKind::Reset, .. } | Event::IoError { .. } => (conn.broker, true),
                Event::Received { .. } => {
                    // Unasked bytes: the broker is confused; close it as a clean end.
                    self.actions.push_back(Action::Close { conn: id });
                    (conn.broker, false)
                }
                _ => return false,
            };
            self.conns.remove(id);
            if lost {
                self.cluster.connection_lost(broker);
            } else {
                self.cluster.connection_closed(broker);
            }
            return true;
        };
        match event {
            Event::Connected { .. } => {
                kafka.handle_connected();
                conn.up |= !tls;
            }
            Event::Secured { .. } => {
                kafka.handle_secured();
                conn.up = true;
            }
            Event::Received { bytes, .. } => {
                kafka.share_scram_keys(&mut self.scram_keys);
                kafka.handle_bytes(bytes);
                kafka.share_scram_keys(&mut self.scram_keys);
            }
            Event::Closed { how, .. } => {
                conn.gone = true;
                match how {
                    CloseKind::Clean => kafka.handle_closed(),
                    CloseKind::Reset => kafka
                        .handle_error(AttemptError::with_detail(ErrorKind::Closed, "the broker reset the connection")),
                }
            }
            Event::IoError { error, .. } => {
                conn.gone = true;
                kafka.handle_error(error);
            }
            Event::Nonce { bytes, .. } if conn.waiting_nonce => {
                kafka.set_sasl_nonce(&bytes);
                conn.waiting_nonce = false;
            }
            Event::Token { token, .. } if conn.waiting_token => {
                conn.waiting_token = false;
                match token {
                    Ok(token) => kafka.set_sasl_token(token),
                    Err(problem) => {
                        let detail = alloc::format!("no OAUTHBEARER token for this attempt: {problem}");
                        kafka.handle_error(AttemptError::with_detail(ErrorKind::Authentication, detail));
                    }
                }
            }
            Event::Nonce { .. } | Event::Token { .. } | Event::Resolved { .. } => return false,
        }
        self.dirty.push(id);
        true
    }

    /// Moves everything until nothing moves: cluster events into actions, dirty connections'
    /// bytes into `Send`s and their inputs into the cluster; then closes what ended unkept.
    pub(super) fn drive(&mut self) {
        loop {
            if let Some(event) = self.cluster.poll_event() {
                self.on_cluster_event(event);
            } else if let Some(id) = self.dirty.pop() {
                self.flush(id);
            } else {
                break;
            }
        }
        self.close_ended();
    }

    /// Closes every connection whose attempt ended and that nobody kept: before a refresh's
    /// last action, so a host has closed every loser when it hears the answer.
    fn close_ended(&mut self) {
        let actions = &mut self.actions;
        self.conns.sweep(|conn| actions.push_back(Action::Close { conn }));
    }

    /// Writes what `id`'s exchange has to send (once it may) and feeds its inputs.
    fn flush(&mut self, id: ConnId) {
        let Some(conn) = self.conns.get_mut(id) else { return };
        let Some(kafka) = conn.kafka.as_mut() else { return };
        if conn.up && !conn.waiting_nonce && !conn.waiting_token {
            while let Some(bytes) = kafka.poll_transmit() {
                self.actions.push_back(Action::Send { conn: id, bytes });
            }
        }
        // The connection is looked up again for each input: the live view needs the session.
        loop {
            let Some(conn) = self.conns.get_mut(id) else { return };
            let Some(kafka) = conn.kafka.as_mut() else { return };
            let Some(input) = kafka.poll_input() else { return };
            if conn.draining.is_some() {
                self.drained(id, &input);
                continue;
            }
            conn.ended |= matches!(input, Input::Response { .. } | Input::Failed { .. });
            let pending = Notes::of(&input, kafka.metadata_version());
            let observed = Observed::of(self.config.observe, &input);
            if self.cluster.handle_input(self.now, input).is_applied() {
                self.notes.applied(pending);
                self.observe_applied(observed);
            }
        }
    }

    /// A draining connection's exchange moved: read to its Metadata answer, it is kept if the
    /// cluster still wants it ([`crate::Cluster::keep_drained`]); failed, or not wanted, it
    /// is closed.
    fn drained(&mut self, id: ConnId, input: &Input) {
        let Some(conn) = self.conns.get_mut(id) else { return };
        let Some((drain, _)) = conn.draining else { return };
        let kept = match input {
            Input::Response { .. } => self.cluster.keep_drained(conn.broker, drain),
            Input::Failed { .. } => false,
            Input::Connected { .. }
            | Input::FirstFrame { .. }
            | Input::Authenticating { .. }
            | Input::Authenticated { .. }
            | Input::Resolved { .. } => return,
        };
        if kept {
            conn.keep();
        } else {
            let gone = conn.gone;
            self.conns.remove(id);
            if !gone {
                self.actions.push_back(Action::Close { conn: id });
            }
        }
    }

    /// Whether (and as what) the cancelled `attempt`'s connection is read to its exchange's
    /// end rather than closed now: the cluster decides ([`crate::Cluster::drain_on_cancel`])
    /// for an open connection with its exchange unfinished, in a long-lived session.
    fn drains(&mut self, attempt: AttemptId, reason: CancelReason) -> Option<Drain> {
        if self.config.one_shot {
            return None;
        }
        let draining = self.conns.draining();
        let conn = self.conns.by_attempt(attempt)?;
        let kafka = conn.kafka.as_ref().filter(|k| !conn.gone && !k.is_finished())?;
        self.cluster.drain_on_cancel(attempt, reason, kafka.awaits_metadata(), draining)
    }

    fn on_cluster_event(&mut self, event: ClusterEvent) {
        match event {
            ClusterEvent::Connect { attempt, broker } => self.dial(attempt, broker),
            ClusterEvent::Reuse { attempt, broker } => {
                self.notes.started(attempt);
                self.observe_started(attempt);
                let (exchange, plaintext) = (&self.config.exchange, !self.config.tls);
                match self.conns.kept(broker) {
                    Some(conn) => {
                        // Metadata alone, at the version agreed on this connection.
                        let resumed = match conn.metadata_version {
                            Some(version) => KafkaAttempt::resumed_at(attempt, exchange, plaintext, version),
                            None => KafkaAttempt::resumed(attempt, exchange, plaintext),
                        };
                        let kafka = conn.kafka.insert(resumed);
                        kafka.handle_connected();
                        conn.attempt = Some(attempt);
                        conn.up = true;
                        self.dirty.push(conn.id);
                    }
                    // Every close is reported to the cluster, so this cannot happen; fail the
                    // attempt rather than guess, and the refresh goes on.
                    None => {
                        let error = AttemptError::with_detail(ErrorKind::Closed, "no kept connection to reuse");
                        self.cluster.handle_input(self.now, Input::Failed { attempt, error });
                    }
                }
            }
            ClusterEvent::Resolve { attempt, broker } => {
                self.notes.started(attempt);
                self.observe_started(attempt);
                let name = address(self.cluster.book(), broker);
                self.actions.push_back(Action::Resolve { lookup: attempt, name });
            }
            ClusterEvent::Cancel { attempt, reason } => {
                let current = self.cluster.current().filter(|r| r.epoch() == attempt.epoch());
                let refresh = current.or(self.cluster.last_refresh().filter(|r| r.epoch() == attempt.epoch()));
                self.notes.cancelled(attempt, reason, refresh);
                self.observe_cancelled(attempt, reason);
                let until = self.now.saturating_add(self.config.cluster.refresh.attempt_timeout);
                let drain = self.drains(attempt, reason);
                if let Some(conn) = self.conns.by_attempt(attempt) {
                    let (id, gone) = (conn.id, conn.gone);
                    if let Some(drain) = drain {
                        conn.attempt = None;
                        conn.draining = Some((drain, until));
                    } else {
                        self.conns.remove(id);
                        if !gone {
                            self.actions.push_back(Action::Close { conn: id });
                        }
                    }
                }
            }
            ClusterEvent::Keep { attempt, broker } => match self.conns.by_attempt(attempt) {
                Some(conn) if !self.config.one_shot && !conn.gone => {
                    conn.keep();
                    conn.ended = false;
                }
                // One refresh only (or the winner's connection already went): nothing kept.
                other => {
                    if let Some(conn) = other {
                        let (id, gone) = (conn.id, conn.gone);
                        self.conns.remove(id);
                        if !gone {
                            self.actions.push_back(Action::Close { conn: id });
                        }
                    }
                    self.cluster.connection_closed(broker);
                }
            },
            ClusterEvent::Release { broker } => {
                if let Some(conn) = self.conns.kept(broker) {
                    let id = conn.id;
                    self.conns.remove(id);
                    self.actions.push_back(Action::Close { conn: id });
                }
            }
            ClusterEvent::Refreshed { epoch, attempt, broker, stats } => {
                self.observe_won(attempt);
                self.notes.finish();
                self.close_ended();
                self.actions.push_back(Action::Refreshed { epoch, broker, stats })
            }
            ClusterEvent::RefreshFailed { epoch, error } => {
                self.observe_gave_up(epoch, error.reason);
                self.notes.finish();
                self.close_ended();
                self.actions.push_back(Action::RefreshFailed { epoch, error })
            }
            ClusterEvent::Rebootstrapped => self.actions.push_back(Action::Rebootstrapped),
        }
    }

    /// A new connection for `attempt`: its exchange, the `Dial`, and what it waits for.
    fn dial(&mut self, attempt: crate::refresh::AttemptId, broker: BrokerIndex) {
        self.notes.started(attempt);
        self.observe_started(attempt);
        let tls = self.config.tls;
        let identity = self.cluster.identity(broker);
        let kafka = KafkaAttempt::new(attempt, &self.config.exchange, identity.as_ref(), !tls);
        let book = self.cluster.book();
        let address = address(book, broker);
        let server_name = tls.then(|| server_name(book, broker));
        let (scram, bearer) = match &self.config.exchange.sasl {
            Some(Sasl::Scram { .. }) => (true, false),
            Some(Sasl::OAuthBearer { .. }) => (false, self.config.fresh_tokens),
            _ => (false, false),
        };
        let conn = self.conns.open(broker, attempt, kafka);
        conn.waiting_nonce = scram;
        conn.waiting_token = bearer;
        let id = conn.id;
        self.actions.push_back(Action::Dial { conn: id, address, tls: server_name });
        if scram {
            self.actions.push_back(Action::NeedNonce { conn: id });
        }
        if bearer {
            self.actions.push_back(Action::NeedToken { conn: id });
        }
    }
}

/// `broker`'s address as the book holds it (shared, not copied).
fn address(book: &BrokerBook, broker: BrokerIndex) -> Arc<str> {
    book.get(broker).map(|e| e.address.clone()).unwrap_or_else(|| Arc::from(""))
}

/// The name TLS verifies for `broker`: the host of the seed name it was resolved from, or
/// its own host.
fn server_name(book: &BrokerBook, broker: BrokerIndex) -> Arc<str> {
    let named = book.get(broker).and_then(|e| e.resolved_from).unwrap_or(broker);
    let address = address(book, named);
    let h = host(&address);
    if h.len() == address.len() {
        return address.clone();
    }
    Arc::from(h)
}

/// The host of `host:port` (`[v6]:port` → `v6`).
fn host(address: &str) -> &str {
    if let Some(rest) = address.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    address.rsplit_once(':').map_or(address, |(h, _)| h)
}
