//! How long a `Cluster` lets a kept connection stay silent: on the pace of Metadata answers
//! on authenticated connections that calm refreshes saw, not on a cold start's handshakes,
//! and not on what a refresh that met a queue saw.

use super::*;

/// A kept connection silent past what kept connections' answers take is suspected on their
/// pace, not on the handshakes of the client's cold start (slow when every client's queued):
/// a long-lived client sees handshakes mostly then, and its kept answers at every refresh.
#[test]
fn a_silent_kept_connection_is_suspected_on_kept_answers_not_on_a_slow_cold_start() {
    let (mut cluster, answer) = slow_cold_start();
    // Refreshes on the kept connection: answers after 1 ms. The first after the TLS
    // bootstrap is gentle (no kept answer seen yet); it teaches the pace, and the rest are fast.
    for k in 1..=4u64 {
        assert_eq!(kept_refresh(&mut cluster, &answer, k * 1_000, RefreshCause::Requested, 1), k == 1, "refresh {k}");
    }
    let wait = kept_wait(&mut cluster, ms(10_000));
    // The kept floor (20 ms), jittered by at most a fifth; twice the cold start's handshake
    // would be 60 ms, capped at `cold` (40 ms).
    assert!((16..=20).contains(&wait.as_millis()), "suspected after {wait:?}");
}

/// A kept connection's first answer is its Metadata answer. A storm's, late, does not teach
/// the window what a kept connection's answer takes (a refresh that met a queue teaches no
/// pace): a later fast refresh still suspects a silent kept connection on the calm
/// refreshes' pace.
#[test]
fn a_refresh_that_met_a_queue_does_not_teach_the_pace_of_kept_connections() {
    let (mut cluster, answer) = slow_cold_start();
    // Calm refreshes: answers after 1 ms (the first after the TLS bootstrap gentle).
    for k in 1..=4u64 {
        assert_eq!(kept_refresh(&mut cluster, &answer, k * 1_000, RefreshCause::Requested, 1), k == 1, "refresh {k}");
    }
    // A storm's gentle refreshes, answered after 300 ms.
    for k in 5..=8u64 {
        assert!(kept_refresh(&mut cluster, &answer, k * 1_000, RefreshCause::StaleMetadata, 300), "gentle");
    }
    // Gentle until calm: this one answers at once, and the next is fast again.
    assert!(kept_refresh(&mut cluster, &answer, 9_000, RefreshCause::Requested, 1));
    let wait = kept_wait(&mut cluster, ms(10_000));
    // The kept floor (20 ms), jittered, as after the calm refreshes alone; had the 300 ms
    // answers taught the window, 600 ms.
    assert!((16..=20).contains(&wait.as_millis()), "suspected after {wait:?}");
}

/// A kept connection is asked for Metadata alone, so its answer takes what the cluster's
/// Metadata takes: 30 ms here (a large cluster's answer). Once calm refreshes have shown
/// that pace, a silent kept connection is suspected after twice it, not after `cold`
/// (40 ms), so a healthy refresh does not hedge on a large answer.
#[test]
fn a_kept_connection_is_suspected_on_the_pace_its_metadata_answers_showed() {
    let (mut cluster, answer) = slow_cold_start();
    for k in 1..=4u64 {
        assert_eq!(kept_refresh(&mut cluster, &answer, k * 1_000, RefreshCause::Requested, 30), k == 1, "refresh {k}");
    }
    let wait = kept_wait(&mut cluster, ms(10_000));
    // Twice the 30 ms pace, jittered by at most a fifth.
    assert!(wait >= Duration::from_millis(48), "suspected after {wait:?}");
}

/// A refresh of `cluster` asked `at` ms `because`, on its kept connection, answered with
/// `answer` `answered_after` ms later; returns whether it ran gently.
fn kept_refresh(cluster: &mut Cluster, answer: &Metadata, at: u64, because: RefreshCause, answered_after: u64) -> bool {
    cluster.request_refresh_because(ms(at), because, None);
    let gentle = cluster.current().unwrap().is_gentle();
    let [(attempt, _)] = connects(&events(cluster))[..] else { panic!("the kept connection") };
    cluster.handle_input(ms(at), Input::Connected { attempt, tls: false });
    cluster.handle_input(ms(at + answered_after), Input::FirstFrame { attempt });
    cluster.handle_input(ms(at + answered_after), Input::Response { attempt, metadata: answer.clone() });
    events(cluster);
    gentle
}

/// How long a fast refresh of `cluster` asked at `start` lets its kept connection stay
/// silent before the next attempt.
fn kept_wait(cluster: &mut Cluster, start: Instant) -> Duration {
    cluster.request_refresh(start);
    assert!(!cluster.current().unwrap().is_gentle(), "a fast refresh");
    let [(attempt, _)] = connects(&events(cluster))[..] else { panic!("the kept connection") };
    cluster.handle_input(start, Input::Connected { attempt, tls: false });
    cluster.poll_timeout().expect("the stagger timer").saturating_since(start)
}

/// Past a silent kept connection with no spare, a tick's first new connection gets a share
/// of the delay to answer before its partner opens one more: one slow kept answer in the
/// window (kept by its high quantile, which suspicion reads) does not make the tick open two
/// connections at once when kept answers typically take a millisecond.
#[test]
fn one_slow_kept_answer_does_not_make_a_tick_open_two_connections_at_once() {
    let (mut cluster, answer) = slow_cold_start();
    // Calm refreshes on the kept connection: first answers after 1 ms, one after 20 ms.
    for k in 1..=8u64 {
        let at = ms(k * 1_000);
        cluster.request_refresh(at);
        let [(attempt, _)] = connects(&events(&mut cluster))[..] else { panic!("the kept connection") };
        cluster.handle_input(at, Input::Connected { attempt, tls: true });
        let first = if k == 3 { 20 } else { 1 };
        cluster.handle_input(ms(k * 1_000 + first), Input::FirstFrame { attempt });
        cluster.handle_input(ms(k * 1_000 + first + 1), Input::Response { attempt, metadata: answer.clone() });
        events(&mut cluster);
    }
    let start = ms(10_000);
    cluster.request_refresh(start);
    let [(silent, _)] = connects(&events(&mut cluster))[..] else { panic!("the kept connection") };
    cluster.handle_input(start, Input::Connected { attempt: silent, tls: true });
    let tick = cluster.poll_timeout().expect("the stagger timer");
    cluster.handle_timeout(tick);
    let opened = connects(&events(&mut cluster));
    assert_eq!(opened.len(), 1, "one new connection at the tick, its partner later: {opened:?}");
    let partner_due = cluster.poll_timeout().expect("the partner's timer");
    assert!(partner_due > tick, "the partner waits a share of the delay");
}
