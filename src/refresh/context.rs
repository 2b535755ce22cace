//! What a [`crate::Cluster`] hands each refresh it starts beyond the config
//! ([`RefreshContext`]), recorded in its traces so the refresh replays as it ran.

use core::time::Duration;

use crate::cluster::RefreshCause;

/// What a [`crate::Cluster`] tells each refresh it runs beyond the config: its epoch, hedge
/// tokens, the pace hints of its windows, the refresh's cause and whether it runs gently. A
/// [`crate::Trace`] of such a refresh records it, so the refresh replays as it ran.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RefreshContext {
    /// The refresh's number within its cluster view (part of every [`super::AttemptId`]).
    pub epoch: u32,
    /// Hedge tokens the cluster's budget held when the refresh started.
    pub hedge_tokens: u32,
    /// The recent response time: the cluster's response-time window's quantile
    /// ([`crate::ClusterConfig::window_quantile`]), for the adaptive stagger.
    pub recent_response_time: Option<Duration>,
    /// A high quantile of recent fresh handshakes: stands in for the handshake of a kept
    /// connection in the adaptive stagger.
    pub handshake_hint: Option<Duration>,
    /// The broker pace: a quantile of recent first answers on fresh connections (handshake →
    /// first answer), the adaptive stagger's measure of how long a live broker stays silent.
    pub first_answer_hint: Option<Duration>,
    /// The broker pace on kept connections: a quantile of what a Metadata request on an
    /// authenticated connection took in calm refreshes (a kept connection's answer, a fresh
    /// plaintext winner's from its first answer on). A fresh connection's first answer may be
    /// a TLS handshake, far costlier than one request on an authenticated connection.
    pub kept_answer_hint: Option<Duration>,
    /// The median of the same window: what a kept connection's answer typically takes. A
    /// spread tick asks whether its first attempt will typically answer within a share of
    /// the delay, which one slow answer in the window (that the high quantile keeps for 64
    /// refreshes, as suspicion should) must not decide.
    #[serde(default)]
    pub kept_answer_typical: Option<Duration>,
    /// Why the refresh runs: a storm-likely cause makes it gentle (see [`RefreshCause`]).
    pub cause: RefreshCause,
    /// Run gently whatever the cause says: the view has not yet seen its brokers answer
    /// within the fast policy's wait, or not yet a kept connection's pace
    /// ([`crate::Cluster`], "gentle until calm").
    #[serde(default)]
    pub gentle: bool,
    /// Try only as many candidates as the attempt table can hold instead of refusing a
    /// larger book: a cluster's book grows from broker answers, which no config foresees.
    pub fit_candidates: bool,
}

impl Default for RefreshContext {
    fn default() -> Self {
        RefreshContext {
            epoch: 0,
            hedge_tokens: u32::MAX,
            recent_response_time: None,
            handshake_hint: None,
            first_answer_hint: None,
            kept_answer_hint: None,
            kept_answer_typical: None,
            cause: RefreshCause::Bootstrap,
            gentle: false,
            fit_candidates: false,
        }
    }
}
