//! The per-connection state machine: ApiVersions first, then Metadata at the best version.
//!
//! With an expected [`BrokerIdentity`] (a broker the client discovered), ApiVersions goes out
//! as v5 carrying it, Kafka 4.4's cluster check (KIP-1242); a broker that predates v5 answers
//! UNSUPPORTED_VERSION and the exchange goes on with v3, then checks the cluster id of the
//! Metadata answer itself.
//!
//! With SASL configured ([`ExchangeConfig::sasl`]), the exchange authenticates between the
//! two (see `authenticate.rs`): ApiVersions, SaslHandshake, SaslAuthenticate until the
//! mechanism is done, Metadata.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use bytes::Bytes;
use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::protocol::StrBytes;

use super::decode::{
    negotiate_metadata_version, read_api_versions, read_metadata, read_sasl_authenticate, read_sasl_handshake,
    REBOOTSTRAP_REQUIRED, UNSUPPORTED_VERSION,
};
use super::frame::FrameDecoder;
use super::sasl::{Conversation, Nonce};
use super::{api_versions_v5, excerpt, ExchangeConfig};
use crate::brokers::BrokerIdentity;
use crate::error::{AttemptError, ErrorKind};
use crate::metadata::Metadata;

/// ApiVersions v3 is the first flexible version and tells the broker who we are (KIP-511).
const API_VERSIONS_PREFERRED: i16 = 3;
/// What we retry with when a broker does not know v3: every broker answers v0.
const API_VERSIONS_FALLBACK: i16 = 0;
/// Reported in ApiVersions v3 so broker operators can see who is asking.
const SOFTWARE_NAME: &str = "stagger";
/// Reported alongside [`SOFTWARE_NAME`].
const SOFTWARE_VERSION: &str = env!("CARGO_PKG_VERSION");
/// The SCRAM nonce until an adapter sets one ([`Exchange::set_sasl_nonce`]).
const DEFAULT_NONCE: Nonce = *b"stagger-scram-none";

/// One connection's conversation with one broker, from connect to `Metadata` or an error.
///
/// Sans-IO like the rest of the core: the caller writes what [`poll_transmit`] yields, feeds
/// what it reads to [`handle_bytes`] (split anyhow), reports EOF with [`handle_eof`], and
/// collects the result with [`poll_outcome`]. Timeouts are the caller's business (the refresh
/// core owns the attempt timeout), so nothing here ever waits.
///
/// [`poll_transmit`]: Exchange::poll_transmit
/// [`handle_bytes`]: Exchange::handle_bytes
/// [`handle_eof`]: Exchange::handle_eof
/// [`poll_outcome`]: Exchange::poll_outcome
#[derive(Debug)]
pub struct Exchange {
    /// `client.id` for every request header.
    client_id: StrBytes,
    /// Topics to ask for; `None` for all.
    topics: Option<Vec<String>>,
    /// Reassembles response frames from the received bytes.
    frames: FrameDecoder,
    /// Also bounds what decoding a frame may reserve in memory (see `guard`).
    max_frame_size: usize,
    /// The request whose response we wait for; `None` once finished.
    in_flight: Option<InFlight>,
    /// Correlation id of the next request.
    next_correlation_id: i32,
    /// An encoded request not yet taken by the caller.
    transmit: Option<Outgoing>,
    /// Metadata version agreed with the broker, once known.
    metadata_version: Option<i16>,
    /// Which cluster and node the caller expects this broker to be, if it knows (a complete
    /// identity only: an incomplete one is never sent, see [`BrokerIdentity::is_complete`]).
    expected: Option<BrokerIdentity>,
    /// Whether the broker accepted ApiVersions v5, i.e. checked `expected` itself.
    checked_by_broker: bool,
    /// Whether the outcome has been produced (it may already have been taken).
    finished: bool,
    /// Whether a complete response frame has arrived (the broker is alive).
    answered: bool,
    /// The outcome, until taken.
    outcome: Option<Result<Metadata, AttemptError>>,
    /// The SASL conversation, when the config asks for one.
    sasl: Option<Conversation>,
    /// The SaslAuthenticate version both sides speak, once ApiVersions said.
    sasl_authenticate_version: i16,
    /// How far the broker has got in checking the credentials.
    credentials: Credentials,
}

/// How far the broker has got in checking the credentials: what
/// [`crate::Input::Authenticating`] and [`crate::Input::Authenticated`] report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Credentials {
    /// No SaslAuthenticate sent (no SASL, or not yet).
    Unsent,
    /// The first SaslAuthenticate went out; the verdict is pending.
    Checking,
    /// The broker accepted them.
    Accepted,
}

/// An encoded request waiting for the caller. Its `Debug` shows the length only: the bytes
/// of a `SaslAuthenticate` request are credentials (PLAIN's password, OAUTHBEARER's token,
/// SCRAM's proof), and an `Exchange` or `KafkaAttempt` may well be debug-printed.
struct Outgoing(Bytes);

impl core::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}

/// A request sent (or ready to send) whose response has not arrived yet.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    correlation_id: i32,
    awaiting: Awaiting,
}

/// Which response comes next, and in which version it is encoded.
#[derive(Clone, Copy, Debug)]
enum Awaiting {
    ApiVersions { version: i16 },
    SaslHandshake { version: i16 },
    SaslAuthenticate { version: i16 },
    Metadata { version: i16 },
}

impl Exchange {
    /// Create right after the transport connected, for a broker whose identity is not known
    /// (a seed, a one-shot refresh): [`Exchange::with_identity`] without one.
    pub fn new(config: &ExchangeConfig) -> Exchange {
        Exchange::with_identity(config, None)
    }

    /// Create right after the transport connected, expecting the broker to be `expected`
    /// (the node and cluster metadata last listed at this address, if known). The ApiVersions
    /// request is ready at once.
    ///
    /// With a complete identity, ApiVersions goes out as v5 with it (KIP-1242), and a broker
    /// that is no longer that node of that cluster fails the attempt with
    /// `BrokerError(129)` (REBOOTSTRAP_REQUIRED), as does one predating v5 whose Metadata
    /// answer names another cluster. Without one, ApiVersions v3 as always.
    ///
    /// Never fails: should the request not encode (a client id over 32 KiB), the exchange is
    /// born finished with a `Protocol` error, which the caller handles like any other.
    pub fn with_identity(config: &ExchangeConfig, expected: Option<&BrokerIdentity>) -> Exchange {
        let expected = expected.filter(|identity| identity.is_complete()).cloned();
        let first = if expected.is_some() { api_versions_v5::VERSION } else { API_VERSIONS_PREFERRED };
        let mut exchange = Exchange::idle(config, expected);
        exchange.send_api_versions(first);
        exchange
    }

    /// Create for a connection kept from an earlier exchange, which authenticated already
    /// if the config has SASL, when the Metadata version it agreed is not known: ApiVersions
    /// (without a cluster check: the connection goes to the broker process that answered on
    /// it), then Metadata, with no SASL. Where the version is known,
    /// [`Exchange::resumed_at`] asks for Metadata alone.
    ///
    /// Why no SASL: a broker authenticates a connection once, and refuses a SaslHandshake
    /// on an authenticated one (ILLEGAL_SASL_STATE), which would fail every reuse over SASL.
    pub fn resumed(config: &ExchangeConfig) -> Exchange {
        let mut exchange = Exchange::idle(config, None);
        exchange.sasl = None;
        exchange.send_api_versions(API_VERSIONS_PREFERRED);
        exchange
    }

    /// Create for a connection kept from an earlier exchange that agreed on Metadata
    /// `version` with its broker: Metadata alone, one request and one visit to the broker,
    /// as a client that keeps its connections asks. Its answer is the broker's first
    /// ([`Exchange::has_answered`]): the refresh core judges a kept connection's silence by
    /// the pace of such answers.
    pub fn resumed_at(config: &ExchangeConfig, version: i16) -> Exchange {
        let mut exchange = Exchange::idle(config, None);
        exchange.sasl = None;
        exchange.metadata_version = Some(version);
        exchange.send_metadata(version);
        exchange
    }

    /// An exchange with nothing sent yet.
    fn idle(config: &ExchangeConfig, expected: Option<BrokerIdentity>) -> Exchange {
        Exchange {
            client_id: StrBytes::from_string(config.client_id.clone()),
            topics: config.topics.clone(),
            frames: FrameDecoder::new(config.max_frame_size),
            max_frame_size: config.max_frame_size,
            in_flight: None,
            next_correlation_id: 1,
            transmit: None,
            metadata_version: None,
            expected,
            checked_by_broker: false,
            finished: false,
            answered: false,
            outcome: None,
            sasl: config.sasl.as_ref().map(|sasl| Conversation::new(sasl, &DEFAULT_NONCE)),
            sasl_authenticate_version: 0,
            credentials: Credentials::Unsent,
        }
    }

    /// Sets the SCRAM client nonce: fresh randomness from the adapter (an OS source, the
    /// browser's `crypto`), or the core's seeded [`crate::Rng`] where a run must repeat.
    /// Call before the first bytes are handled; without it the nonce is a constant, which
    /// SCRAM tolerates (the broker's half of the nonce is fresh) but should not be relied on.
    pub fn set_sasl_nonce(&mut self, nonce: &Nonce) {
        if let Some(sasl) = &mut self.sasl {
            sasl.set_nonce(nonce);
        }
    }

    /// Trades SCRAM's derived keys with `kept`, the keys a client holds across its
    /// connections ([`ScramKeys`](super::sasl::ScramKeys)): call before and after handing
    /// over received bytes. Without SCRAM, nothing happens.
    pub fn share_scram_keys(&mut self, kept: &mut Option<alloc::sync::Arc<super::sasl::ScramKeys>>) {
        if let Some(sasl) = &mut self.sasl {
            sasl.share_keys(kept);
        }
    }

    /// Sets the `OAUTHBEARER` token a host fetched for this connection (the session's
    /// `Token` event); call before the first bytes are handled. Other mechanisms ignore it.
    pub(crate) fn set_sasl_token(&mut self, token: super::sasl::Secret) {
        if let Some(sasl) = &mut self.sasl {
            sasl.set_token(token);
        }
    }

    /// Received bytes held until their frame is complete (bounded by the maximum frame size).
    pub(crate) fn buffered(&self) -> usize {
        self.frames.buffered()
    }

    /// Next complete length-prefixed request frame to write, if any.
    ///
    /// At most one request is outstanding at a time, so this yields one frame after `new`
    /// and one after each response that calls for another request; nothing once finished.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        self.transmit.take().map(|outgoing| outgoing.0)
    }

    /// Feed received bytes; any split (one byte at a time, many frames at once) works.
    ///
    /// A bad length prefix fails the exchange as soon as its four bytes are here; a complete
    /// frame is decoded at once. Bytes arriving after the outcome are ignored.
    pub fn handle_bytes(&mut self, data: &[u8]) {
        if self.finished {
            return;
        }
        self.frames.push(data);
        while !self.finished {
            match self.frames.next_frame() {
                Ok(Some(frame)) => self.handle_frame(frame),
                Ok(None) => break,
                Err(error) => self.finish(Err(error)),
            }
        }
    }

    /// The peer closed the connection (EOF). Unless finished, the outcome becomes
    /// `ErrorKind::Closed`, saying "mid-frame" when part of a frame was buffered — the
    /// difference between a broker that hung up and one that died while answering.
    pub fn handle_eof(&mut self) {
        if self.finished {
            return;
        }
        let awaiting = self.in_flight.map(|f| f.awaiting);
        let waiting_for = match awaiting {
            Some(Awaiting::ApiVersions { .. }) => "the ApiVersions response",
            Some(Awaiting::SaslHandshake { .. }) => "the SaslHandshake response",
            Some(Awaiting::SaslAuthenticate { .. }) => "the SaslAuthenticate response",
            Some(Awaiting::Metadata { .. }) => "the Metadata response",
            None => "a response",
        };
        let mut detail = match self.frames.partial() {
            Some(partial) => format!("closed mid-frame while waiting for {waiting_for} ({partial})"),
            None => format!("closed while waiting for {waiting_for}"),
        };
        if matches!(awaiting, Some(Awaiting::Metadata { .. })) && self.sasl.is_none() && self.frames.partial().is_none()
        {
            // A SASL listener answers ApiVersions, then hangs up on anything but SaslHandshake.
            detail.push_str(
                ": a broker whose listener requires SASL closes the connection this way; if it does, configure \
                 SASL (security.protocol=SASL_PLAINTEXT or SASL_SSL, and a mechanism)",
            );
        }
        self.finish(Err(AttemptError::with_detail(ErrorKind::Closed, detail)));
    }

    /// Takes the outcome once finished: `Ok(Metadata)` or `Err(AttemptError)`; `None` before
    /// that and after taking. A metadata answer carrying a top-level error is still `Ok`: the
    /// refresh core decides (with `Metadata::rejection`) whether it can win.
    #[must_use]
    pub fn poll_outcome(&mut self) -> Option<Result<Metadata, AttemptError>> {
        self.outcome.take()
    }

    /// Whether an outcome has been produced (taken or not): the connection can be closed.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether the broker has sent a complete response frame yet (for Kafka: the ApiVersions
    /// answer). Report [`crate::Input::FirstFrame`] when this turns true: it tells the adaptive
    /// stagger that the broker is alive and merely busy, not hung.
    pub fn has_answered(&self) -> bool {
        self.answered
    }

    /// How far the broker has got in checking the credentials (always `Unsent` without
    /// SASL, and on a kept connection, authenticated before).
    pub(super) fn credentials(&self) -> Credentials {
        self.credentials
    }

    /// Whether only the Metadata answer is owed: ApiVersions and SASL are done, the request
    /// is taken for sending and its answer not read. The connection is then authenticated,
    /// and once that answer is read it may carry later requests.
    pub fn awaits_metadata(&self) -> bool {
        self.transmit.is_none() && matches!(self.in_flight, Some(InFlight { awaiting: Awaiting::Metadata { .. }, .. }))
    }

    /// Metadata API version negotiated (`None` until ApiVersions answered) — for logs/traces.
    pub fn metadata_version(&self) -> Option<i16> {
        self.metadata_version
    }

    fn finish(&mut self, outcome: Result<Metadata, AttemptError>) {
        self.finished = true;
        self.outcome = Some(outcome);
        self.in_flight = None;
        self.transmit = None;
        self.frames.clear();
    }

    fn handle_frame(&mut self, frame: Bytes) {
        self.answered = true;
        let Some(InFlight { correlation_id, awaiting }) = self.in_flight.take() else { return };
        let result = match awaiting {
            Awaiting::ApiVersions { version } => read_api_versions(frame, correlation_id, version, self.max_frame_size)
                .and_then(|response| self.on_api_versions(&response, version)),
            Awaiting::SaslHandshake { version } => {
                read_sasl_handshake(frame, correlation_id, version, self.max_frame_size)
                    .and_then(|response| self.on_sasl_handshake(&response))
            }
            Awaiting::SaslAuthenticate { version } => {
                read_sasl_authenticate(frame, correlation_id, version, self.max_frame_size)
                    .and_then(|response| self.on_sasl_authenticate(&response))
            }
            Awaiting::Metadata { version } => read_metadata(frame, correlation_id, version, self.max_frame_size)
                .and_then(|metadata| self.check_cluster(metadata))
                .map(|metadata| self.finish(Ok(metadata))),
        };
        if let Err(error) = result {
            self.finish(Err(error));
        }
    }

    fn on_api_versions(&mut self, response: &ApiVersionsResponse, version: i16) -> Result<(), AttemptError> {
        match response.error_code {
            0 => {
                let metadata_version = negotiate_metadata_version(response)?;
                self.metadata_version = Some(metadata_version);
                self.checked_by_broker = version == api_versions_v5::VERSION;
                if self.sasl.is_some() {
                    self.sasl_authenticate_version = negotiate_sasl_authenticate_version(response)?;
                    self.send_sasl_handshake();
                } else {
                    self.send_metadata(metadata_version);
                }
                Ok(())
            }
            UNSUPPORTED_VERSION if version != API_VERSIONS_FALLBACK => {
                // v5 → v3 (a broker before Kafka 4.4), v3 → v0 (before Kafka 2.4).
                let lower =
                    if version > API_VERSIONS_PREFERRED { API_VERSIONS_PREFERRED } else { API_VERSIONS_FALLBACK };
                self.send_api_versions(lower);
                Ok(())
            }
            REBOOTSTRAP_REQUIRED => {
                let detail = match &self.expected {
                    Some(expected) => format!(
                        "this address no longer belongs to cluster {} as node {}: the broker answered \
                         REBOOTSTRAP_REQUIRED to ApiVersions v{version} (KIP-1242); rebootstrap from the seeds",
                        excerpt(&expected.cluster_id),
                        expected.node_id
                    ),
                    None => format!(
                        "the broker answered REBOOTSTRAP_REQUIRED to ApiVersions v{version}: this address no \
                         longer belongs to the cluster; rebootstrap from the seeds"
                    ),
                };
                Err(AttemptError::with_detail(ErrorKind::BrokerError(REBOOTSTRAP_REQUIRED), detail))
            }
            code => {
                let detail = format!("ApiVersions v{version} answered with error {code}");
                Err(AttemptError::with_detail(ErrorKind::BrokerError(code), detail))
            }
        }
    }

    /// The broker said nothing against `expected` (it may predate the check): a Metadata
    /// answer naming another cluster still must not win. Only the cluster can be checked
    /// here — Metadata does not say which node answered.
    fn check_cluster(&self, metadata: Metadata) -> Result<Metadata, AttemptError> {
        let (Some(expected), Some(answered)) = (&self.expected, &metadata.cluster_id) else { return Ok(metadata) };
        if *answered == expected.cluster_id {
            return Ok(metadata);
        }
        let checked = if self.checked_by_broker {
            "checked by the client, although the broker accepted the ApiVersions v5 check"
        } else {
            "checked by the client because the broker predates KIP-1242"
        };
        let (expected_id, answered) = (excerpt(&expected.cluster_id), excerpt(answered));
        let detail = format!(
            "this address no longer belongs to cluster {expected_id} as node {}: the broker answered Metadata for \
             cluster {answered} while cluster {expected_id} was expected ({checked}); rebootstrap from the seeds",
            expected.node_id
        );
        Err(AttemptError::with_detail(ErrorKind::BrokerError(REBOOTSTRAP_REQUIRED), detail))
    }
}

mod authenticate;
mod requests;
use authenticate::negotiate_sasl_authenticate_version;

#[cfg(test)]
pub(crate) mod tests;
