//! Cancellation safety: dropping a refresh closes every socket it opened, at once; a
//! cancelled attempt's socket is closed before the next attempt even connects.

use std::time::Duration;

use stagger::{CancelReason, ErrorKind, RefreshConfig};
use stagger_test_faults::bounded;
use stagger_test_faults::mock::Mock;
use stagger_test_faults::sockets::{open_fds, sockets_to};
use stagger_tokio::{refresh_with, AttemptOutcome, EventKind, RefreshOptions};
use tokio::sync::oneshot;

#[tokio::test]
async fn dropping_a_refresh_closes_every_socket() {
    bounded(async {
        let mock = Mock::start(5, &[("alpha", 3)]);
        for id in 1..=5 {
            mock.hang(id);
        }
        let ports = mock.ports();
        let before = open_fds();
        assert_eq!(sockets_to(&ports), 0);
        let options = RefreshOptions { config: RefreshConfig::all_at_once(), ..RefreshOptions::default() };
        let seeds = mock.seeds(&[1, 2, 3, 4, 5]);
        let (all_connected, connected) = oneshot::channel();
        let mut all_connected = Some(all_connected);
        let mut count = 0;
        let mut refresh = Box::pin(refresh_with(&options, &seeds, move |e| {
            if matches!(e.kind, EventKind::Connected { .. }) {
                count += 1;
                if count == 5 {
                    let _ = all_connected.take().map(|tx| tx.send(()));
                }
            }
        }));
        tokio::select! {
            result = &mut refresh => panic!("a refresh against hung brokers ended: {result:?}"),
            _ = connected => {}
        }
        assert_eq!(sockets_to(&ports), 5, "five attempts in flight, each with its socket");
        drop(refresh);
        assert_eq!(sockets_to(&ports), 0, "every socket closed by the drop itself (fds: {before} before)");
    })
    .await;
}

#[tokio::test]
async fn a_cancelled_attempt_is_closed_before_the_next_one_connects() {
    bounded(async {
        let mock = Mock::start(2, &[("alpha", 1)]);
        mock.hang(1);
        let hung_port = mock.ports()[0];
        assert_eq!(mock.address(1), format!("127.0.0.1:{hung_port}"));
        let mut config = RefreshConfig::sequential();
        config.shuffle_seeds = false;
        config.attempt_timeout = Duration::from_millis(200);
        config.retry.retries = 0;
        let options = RefreshOptions { config, ..RefreshOptions::default() };
        let mut seen = Vec::new();
        let outcome = refresh_with(&options, &mock.seeds(&[1, 2]), |e| {
            if let EventKind::Connected { attempt, .. } = &e.kind {
                seen.push((attempt.number(), sockets_to(&[hung_port])));
            }
        })
        .await
        .expect("refresh");
        // Attempt 0 connected to the hung broker; it timed out (Cancel{TimedOut}); by the
        // time attempt 1 connected to the healthy one, the hung socket was already closed.
        assert_eq!(seen, [(0, 1), (1, 0)]);
        assert!(
            matches!(&outcome.attempts[0].outcome, AttemptOutcome::Failed(e) if e.kind == ErrorKind::ResponseTimeout),
            "{:?}",
            outcome.attempts[0]
        );
        assert_eq!(outcome.attempts[1].outcome, AttemptOutcome::Won);
        assert_ne!(outcome.attempts[0].outcome, AttemptOutcome::Cancelled(CancelReason::Lost));
        assert_eq!(sockets_to(&mock.ports()), 0, "the winner's socket is closed when the refresh returns");
    })
    .await;
}
