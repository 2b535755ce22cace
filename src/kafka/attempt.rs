//! One attempt's Kafka conversation, as the refresh core wants to hear about it.
//!
//! [`Exchange`] knows what to say to a broker; [`KafkaAttempt`] also knows what the core must
//! be told, and when: the transport is up (`Input::Connected`), the broker's
//! first complete frame (`Input::FirstFrame`, once, always before the end), over SASL the
//! broker checking the credentials and accepting them (`Input::Authenticating`, then
//! `Input::Authenticated`, each once, after `FirstFrame`), and the end
//! (`Input::Response` or `Input::Failed`, once), with end-of-stream and transport errors
//! mapped to attempt errors and a TLS broker answering a plaintext connection named for what
//! it is. Every adapter feeds it bytes and drains its inputs, so none of them re-derives any
//! of that.
//!
//! | call | what it means | inputs it can produce |
//! |---|---|---|
//! | [`KafkaAttempt::new`] | an attempt starts; its first request is ready to write once the transport is | — |
//! | [`KafkaAttempt::handle_connected`] | the transport is up | `Connected` |
//! | [`KafkaAttempt::handle_secured`] | the TLS handshake completed | `FirstFrame` (the broker process runs) |
//! | [`KafkaAttempt::handle_bytes`] | bytes arrived | `FirstFrame`, `Authenticating`, `Authenticated`, then `Response` or `Failed` |
//! | [`KafkaAttempt::handle_closed`] | the peer closed the stream | `Failed` (`Closed`, or `Tls`) |
//! | [`KafkaAttempt::handle_error`] | the transport failed | `Failed` with that error |

use alloc::format;

use bytes::Bytes;

use super::exchange::Credentials;
use super::{Exchange, ExchangeConfig};
use crate::brokers::BrokerIdentity;
use crate::error::{AttemptError, ErrorKind};
use crate::refresh::{AttemptId, Input};

/// How many first bytes are kept to recognise a TLS record.
const HEAD: usize = 3;

/// See the module documentation.
#[derive(Debug)]
pub struct KafkaAttempt {
    attempt: AttemptId,
    exchange: Exchange,
    /// Whether the transport is plaintext (a TLS answer to it is then worth naming).
    plaintext: bool,
    /// Whether a TLS handshake follows the transport coming up (a fresh TLS connection; a
    /// kept one is secured already): `Input::Connected`'s `tls`.
    tls_handshake: bool,
    /// The first bytes received.
    head: [u8; HEAD],
    received: usize,
    /// Inputs not yet taken, in order: at most `Connected`, `FirstFrame`,
    /// `Authenticating`, `Authenticated` and the end.
    connected: Once,
    answered: Once,
    authenticating: Once,
    authenticated: Once,
    end: End,
    /// The Metadata version the exchange settled on (kept past the end, for reports).
    metadata_version: Option<i16>,
}

/// Whether an input reported once (`Connected`, `Answered`) is due, taken, or not yet earned.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Once {
    NotYet,
    Due,
    Taken,
}

impl Once {
    fn earn(&mut self) {
        if *self == Once::NotYet {
            *self = Once::Due;
        }
    }

    fn take(&mut self) -> bool {
        let due = *self == Once::Due;
        if due {
            *self = Once::Taken;
        }
        due
    }
}

/// The attempt's end, as the core will hear it.
#[derive(Debug)]
enum End {
    Running,
    Due(Input),
    Taken,
}

impl KafkaAttempt {
    /// The conversation of `attempt`: its ApiVersions request is ready at once, for the
    /// adapter to write when its transport is up (after TLS, if any). `expected` is the
    /// broker's identity when the caller knows it (`Cluster::identity`), for Kafka 4.4's
    /// cluster check; `plaintext` says whether the transport is unencrypted.
    pub fn new(
        attempt: AttemptId,
        config: &ExchangeConfig,
        expected: Option<&BrokerIdentity>,
        plaintext: bool,
    ) -> KafkaAttempt {
        let mut exchange = Exchange::with_identity(config, expected);
        if config.sasl.is_some() {
            exchange.set_sasl_nonce(&seeded_nonce(attempt));
        }
        KafkaAttempt::with_exchange(attempt, exchange, plaintext, !plaintext)
    }

    /// The conversation of `attempt` on a connection kept from an earlier attempt, for a
    /// `ClusterEvent::Reuse` whose Metadata version is not known ([`Exchange::resumed`]):
    /// ApiVersions, then Metadata, with no SASL, since the connection authenticated already.
    pub fn resumed(attempt: AttemptId, config: &ExchangeConfig, plaintext: bool) -> KafkaAttempt {
        KafkaAttempt::with_exchange(attempt, Exchange::resumed(config), plaintext, false)
    }

    /// The conversation of `attempt` on a kept connection whose broker agreed on Metadata
    /// `version` earlier ([`Exchange::resumed_at`]): Metadata alone, its answer the first.
    pub fn resumed_at(attempt: AttemptId, config: &ExchangeConfig, plaintext: bool, version: i16) -> KafkaAttempt {
        KafkaAttempt::with_exchange(attempt, Exchange::resumed_at(config, version), plaintext, false)
    }

    fn with_exchange(attempt: AttemptId, exchange: Exchange, plaintext: bool, tls_handshake: bool) -> KafkaAttempt {
        KafkaAttempt {
            attempt,
            exchange,
            plaintext,
            tls_handshake,
            head: [0; HEAD],
            received: 0,
            connected: Once::NotYet,
            answered: Once::NotYet,
            authenticating: Once::NotYet,
            authenticated: Once::NotYet,
            end: End::Running,
            metadata_version: None,
        }
    }

    /// Sets the SCRAM client nonce (see [`Exchange::set_sasl_nonce`]): adapters pass fresh
    /// randomness. Without it the nonce comes from the core's [`crate::Rng`] seeded with the
    /// attempt id: unique per attempt of a cluster, but predictable.
    #[must_use]
    pub fn with_sasl_nonce(mut self, nonce: &super::sasl::Nonce) -> KafkaAttempt {
        self.exchange.set_sasl_nonce(nonce);
        self
    }

    /// Sets the SCRAM client nonce in place (the session's `Nonce` event).
    pub(crate) fn set_sasl_nonce(&mut self, nonce: &super::sasl::Nonce) {
        self.exchange.set_sasl_nonce(nonce);
    }

    /// Trades SCRAM's derived keys with `kept`, the keys a client holds across its
    /// connections ([`Exchange::share_scram_keys`]): a client that keeps them derives the
    /// password's keys (PBKDF2) once, not on every connection.
    pub fn share_scram_keys(&mut self, kept: &mut Option<alloc::sync::Arc<super::sasl::ScramKeys>>) {
        self.exchange.share_scram_keys(kept);
    }

    /// Sets the `OAUTHBEARER` token in place (the session's `Token` event).
    pub(crate) fn set_sasl_token(&mut self, token: super::sasl::Secret) {
        self.exchange.set_sasl_token(token);
    }

    /// Received bytes held until their frame is complete.
    pub(crate) fn buffered(&self) -> usize {
        self.exchange.buffered()
    }

    /// The transport is up: `Input::Connected` is due. An adapter whose transport comes up in
    /// stages reports the stage the core should time as the handshake (the tokio adapter:
    /// the TCP handshake, before TLS) and may report it itself instead.
    pub fn handle_connected(&mut self) {
        self.connected.earn();
    }

    /// The TLS handshake completed: the broker's *process* answered (a stopped broker's kernel
    /// accepts TCP, but only the broker completes TLS), so `Input::FirstFrame` is due now
    /// rather than at the first Kafka frame. The adaptive stagger then treats the broker as
    /// alive and answering, and TLS time counts as the broker's, never as the network's.
    pub fn handle_secured(&mut self) {
        if matches!(self.end, End::Running) {
            self.answered.earn();
        }
    }

    /// The next complete request frame to write, if any.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        self.exchange.poll_transmit()
    }

    /// Bytes received, in whatever pieces the transport delivers; ignored after the end.
    pub fn handle_bytes(&mut self, data: &[u8]) {
        if !matches!(self.end, End::Running) {
            return;
        }
        if self.received < HEAD {
            let take = (HEAD - self.received).min(data.len());
            self.head[self.received..self.received + take].copy_from_slice(&data[..take]);
        }
        self.received = self.received.saturating_add(data.len());
        self.exchange.handle_bytes(data);
        self.settle();
    }

    /// The peer closed the stream (end of file); ignored after the end.
    pub fn handle_closed(&mut self) {
        if !matches!(self.end, End::Running) {
            return;
        }
        self.exchange.handle_eof();
        self.settle();
        if matches!(self.end, End::Running) {
            // The exchange concludes at end of stream; never leave the core waiting if not.
            let error = AttemptError::with_detail(ErrorKind::Closed, "connection closed before a complete answer");
            self.end = End::Due(Input::Failed { attempt: self.attempt, error });
        }
    }

    /// The transport failed (a read or write error, a send the socket refused); ignored
    /// after the end.
    pub fn handle_error(&mut self, error: AttemptError) {
        if matches!(self.end, End::Running) {
            self.end = End::Due(Input::Failed { attempt: self.attempt, error: self.name_tls(error) });
        }
    }

    /// The next input for the core, if any: `Connected`, then `Answered` (once the broker's
    /// first frame is complete), then `Response` or `Failed`. Drain after every `handle_*`.
    #[must_use]
    pub fn poll_input(&mut self) -> Option<Input> {
        let attempt = self.attempt;
        if self.connected.take() {
            return Some(Input::Connected { attempt, tls: self.tls_handshake });
        }
        if self.answered.take() {
            return Some(Input::FirstFrame { attempt });
        }
        if self.authenticating.take() {
            return Some(Input::Authenticating { attempt });
        }
        if self.authenticated.take() {
            return Some(Input::Authenticated { attempt });
        }
        match core::mem::replace(&mut self.end, End::Taken) {
            End::Due(input) => Some(input),
            other => {
                self.end = other;
                None
            }
        }
    }

    /// Whether the attempt has ended (its last input may not be taken yet): nothing more
    /// needs reading or writing.
    pub fn is_finished(&self) -> bool {
        !matches!(self.end, End::Running)
    }

    /// Whether the attempt is running and owes only its Metadata answer
    /// ([`Exchange::awaits_metadata`](super::Exchange::awaits_metadata)): a host may read that
    /// answer to the end and keep the authenticated connection.
    pub fn awaits_metadata(&self) -> bool {
        matches!(self.end, End::Running) && self.exchange.awaits_metadata()
    }

    /// The Metadata API version negotiated, once known (for reports and traces).
    pub fn metadata_version(&self) -> Option<i16> {
        self.metadata_version.or(self.exchange.metadata_version())
    }

    /// Moves what the exchange has concluded into inputs.
    fn settle(&mut self) {
        if self.exchange.has_answered() {
            self.answered.earn();
        }
        match self.exchange.credentials() {
            Credentials::Unsent => {}
            Credentials::Checking => self.authenticating.earn(),
            Credentials::Accepted => {
                self.authenticating.earn();
                self.authenticated.earn();
            }
        }
        self.metadata_version = self.exchange.metadata_version();
        let attempt = self.attempt;
        self.end = match self.exchange.poll_outcome() {
            None => return,
            Some(Ok(metadata)) => End::Due(Input::Response { attempt, metadata }),
            Some(Err(error)) => End::Due(Input::Failed { attempt, error: self.name_tls(error) }),
        };
    }

    /// A plaintext connection whose first bytes are a TLS record reached a TLS listener:
    /// say so, rather than report the frame the exchange could not read.
    fn name_tls(&self, error: AttemptError) -> AttemptError {
        if !(self.plaintext && looks_like_tls(&self.head[..self.received.min(HEAD)])) {
            return error;
        }
        AttemptError::with_detail(
            ErrorKind::Tls,
            format!(
                "the broker answered with a TLS record ({}): it expects TLS on this port, and this \
                 connection is plaintext (configure TLS)",
                error.detail
            ),
        )
    }
}

/// A nonce from the core's PRNG seeded with the attempt id.
fn seeded_nonce(attempt: AttemptId) -> super::sasl::Nonce {
    let mut rng = crate::Rng::new(attempt.0 ^ 0x5343_5241_4d00_0000);
    let mut nonce = [0; 18];
    for chunk in nonce.chunks_mut(8) {
        let bytes = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    nonce
}

/// Whether `head` starts like a TLS record: an alert (21) or handshake (22) content type,
/// then protocol version 3.x. As a Kafka length prefix that is 352–369 MB, far above any
/// sane maximum frame size, so it is only consulted once the exchange refused the frame.
fn looks_like_tls(head: &[u8]) -> bool {
    matches!(head, [21 | 22, 3, 0..=4])
}

#[cfg(test)]
mod tests;
