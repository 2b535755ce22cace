//! The callers a long-lived client's host keeps waiting on its session's refreshes: who
//! asked for which refresh, and what each is answered when that refresh ends.

use alloc::sync::Arc;
use alloc::vec::Vec;

use super::{Action, Session};
use crate::cluster::RefreshCause;
use crate::metadata::Metadata;
use crate::report::ClientError;
use crate::time::Instant;

/// What the callers of a refresh are answered: the metadata, shared, or why there is none.
pub type Answer = Result<Arc<Metadata>, ClientError>;

/// What a long-lived client's handles send the driver that owns its session: a caller who
/// wants fresh metadata (`R` answers it), or the client closing.
#[derive(Debug)]
pub enum ClientRequest<R> {
    /// Fresh metadata for the caller `R`, why, and the `host:port` of the broker the trouble
    /// came from (for [`Callers::request`]).
    Refresh(R, RefreshCause, Option<alloc::string::String>),
    /// Close every connection and stop.
    Close,
}

/// Callers waiting for refreshes, by epoch; `R` is how a host answers one (a channel's
/// sender). Several callers share a refresh (single-flight): each gets the same answer.
#[derive(Debug)]
pub struct Callers<R> {
    waiting: Vec<(u32, R)>,
}

impl<R> Default for Callers<R> {
    fn default() -> Self {
        Callers { waiting: Vec::new() }
    }
}

impl<R> Callers<R> {
    /// Asks `session` for fresh metadata for the caller `reply`, saying why and naming the
    /// broker (`host:port`) the trouble came from, if the caller knows; the caller waits for
    /// that refresh, joining one that runs. When no refresh could start (which a validated
    /// config and a non-empty book rule out), the caller is handed back with the error, so
    /// that no caller ever hangs.
    pub fn request(
        &mut self,
        session: &mut Session,
        now: Instant,
        cause: RefreshCause,
        broker: Option<&str>,
        reply: R,
    ) -> Result<(), (R, ClientError)> {
        let broker = broker.and_then(|b| session.cluster().book().find(b));
        let epoch = session.request_refresh_because(now, cause, broker);
        if session.cluster().current().map(|r| r.epoch()) != Some(epoch) {
            let problem = crate::ConfigError::new("cluster", "the core could not start a refresh");
            return Err((reply, ClientError::Config(problem)));
        }
        self.waiting.push((epoch, reply));
        Ok(())
    }

    /// The answer to the callers of the refresh `action` ended (`Refreshed` or
    /// `RefreshFailed`), with those callers; `None` for any other action.
    pub fn answer(&mut self, session: &Session, action: &Action) -> Option<(Answer, Vec<R>)> {
        let (epoch, answer) = match action {
            Action::Refreshed { epoch, .. } => {
                (*epoch, session.metadata().cloned().map(Arc::new).ok_or(ClientError::Closed))
            }
            Action::RefreshFailed { epoch, error } => {
                let (error, attempts) = (error.clone(), session.reports());
                (*epoch, Err(ClientError::Refresh { error, attempts, trace: None }))
            }
            _ => return None,
        };
        let mut callers = Vec::new();
        let mut i = 0;
        while i < self.waiting.len() {
            if self.waiting[i].0 == epoch {
                callers.push(self.waiting.swap_remove(i).1);
            } else {
                i += 1;
            }
        }
        Some((answer, callers))
    }

    /// Hands back every waiting caller (the host is going away: answer them).
    pub fn drain(&mut self) -> impl Iterator<Item = R> + '_ {
        self.waiting.drain(..).map(|(_, r)| r)
    }
}
