"""The sans-IO Session through the native library, with no socket: a host loop in the test
carries out the actions against the fake broker's protocol (or refuses every connection)."""

from __future__ import annotations

import pytest

import stagger
from stagger import (
    Cause,
    Close,
    Closed,
    ConfigError,
    Connected,
    Dial,
    ErrorKind,
    IoError,
    MalformedBatchError,
    RawEvent,
    Received,
    Refreshed,
    RefreshFailed,
    RefreshRequested,
    RequestRefresh,
    Send,
    Session,
    SessionConfig,
)

from fakebroker import Cluster, FakeBroker, frames

MS = 1_000_000


def drive(session: Session, answer, now: int = 1_000 * MS, limit: int = 200):
    """A host loop without sockets: ``answer(action, now)`` gives the events an action leads
    to. Returns every action, the ending one last, and the time it ended."""
    events = [RequestRefresh(Cause.BOOTSTRAP)]
    seen = []
    for _ in range(limit):
        actions, wakeup = session.step(now, events)
        seen.extend(actions)
        events = []
        for action in actions:
            if isinstance(action, (Refreshed, RefreshFailed)):
                return seen, now
            events.extend(answer(action, now))
        if not events:
            assert wakeup is not None, "a running refresh always has a timer"
            now = max(now, wakeup)
    raise AssertionError(f"no end after {limit} steps: {seen[-5:]}")


def fake_answers(broker: FakeBroker):
    pending = {}

    def answer(action, now):
        if isinstance(action, Dial):
            return [Connected(action.conn)]
        if isinstance(action, Send):
            data = pending.get(action.conn, b"") + action.data
            requests, pending[action.conn] = frames(data)
            out = b"".join(broker.respond(r) for r in requests)
            # In two pieces, as a socket may give them.
            return [Received(action.conn, out[:5]), Received(action.conn, out[5:])] if out else []
        return []

    return answer


def test_a_one_shot_session_refreshes_from_a_fake_broker_with_no_socket():
    broker = FakeBroker(Cluster(brokers=[(1, "b1", 9092), (2, "b2", 9092)], topics=[("orders", 3, 2)]))
    broker.close()  # only its protocol is used here
    config = SessionConfig(seeds=["b1:9092"], one_shot=True, client_id="tests")
    with Session(config, now_ns=0, seed=7) as session:
        assert session.metadata() is None
        actions, _ = drive(session, fake_answers(broker))
        assert isinstance(actions[0], RefreshRequested)
        assert actions[1] == Dial(actions[1].conn, "b1:9092", None)
        end = actions[-1]
        assert isinstance(end, Refreshed) and end.address == "b1:9092"
        assert Close(actions[1].conn) in actions, "a one-shot session closes the winner's connection"
        md = session.metadata(answered_by=end.address)
        assert md is not None
        assert [b.address for b in md.brokers] == ["b1:9092", "b2:9092"]
        assert md.cluster_id == "fake-cluster" and md.controller_id == 1
        orders = md.topic("orders")
        assert orders is not None and [p.id for p in orders.partitions] == [0, 1, 2]
        assert orders.partitions[1].replicas == (2, 1) and orders.partitions[1].leader == 2
        report = session.report()
        assert report.last_refresh is not None and report.last_refresh.outcome == "refreshed"
        assert [a.outcome for a in report.last_refresh.attempts] == ["won"]


def test_a_refresh_where_every_broker_refuses_gives_up_with_every_brokers_error():
    config = SessionConfig(seeds=["b1:9092", "b2:9092"], one_shot=True, settings={"retry.retries": 0})
    with Session(config, now_ns=0) as session:

        def refuse(action, now):
            if isinstance(action, Dial):
                return [IoError(action.conn, ErrorKind.REFUSED, "connection refused")]
            return []

        actions, _ = drive(session, refuse)
        failed = actions[-1]
        assert isinstance(failed, RefreshFailed)
        error = stagger.RefreshError.from_json(failed.error)
        assert error.reason == "all_failed" and error.passes == 1
        assert error.last_error is not None and error.last_error.kind == "refused"
        assert {b.address for b in error.brokers} == {"b1:9092", "b2:9092"}
        assert all(b.error is not None and b.error.kind == "refused" for b in error.brokers)
        assert "b1:9092" in str(error) and "b2:9092" in str(error)


def test_a_malformed_event_batch_is_refused_whole_and_the_session_goes_on():
    config = SessionConfig(seeds=["b1:9092"], one_shot=True)
    with Session(config, now_ns=0) as session:
        with pytest.raises(MalformedBatchError, match=r"event 1") as caught:
            session.step(1, [RequestRefresh(Cause.BOOTSTRAP), RawEvent(99, b"")])
        assert caught.value.status == 2 and caught.value.error == "malformed_batch"
        # Nothing of it was applied: no refresh was started.
        assert session.step(2, []).actions == []
        with pytest.raises(MalformedBatchError, match="version"):
            session.step_raw(3, b"\x02\x00\x00\x00\x00\x00\x00\x00")
        with pytest.raises(MalformedBatchError):
            session.step(4, [RawEvent(1, b"\x01\x02")])  # CONNECTED with 2 of its 8 bytes
        actions, _ = session.step(5, [RequestRefresh(Cause.BOOTSTRAP)])
        assert isinstance(actions[0], RefreshRequested) and isinstance(actions[1], Dial)


def test_events_about_connections_the_session_does_not_know_are_ignored_and_counted():
    with Session(SessionConfig(seeds=["b1:9092"], one_shot=True), now_ns=0) as session:
        session.step(1, [Connected(77), Received(78, b"junk"), Closed(79)])
        assert session.report().ignored_events == 3


def test_time_that_goes_backwards_is_clamped():
    with Session(SessionConfig(seeds=["b1:9092"], one_shot=True), now_ns=10 * MS) as session:
        actions, wakeup = session.step(20 * MS, [RequestRefresh(Cause.BOOTSTRAP)])
        assert wakeup is not None
        assert session.step(5 * MS, []).actions == []


def test_the_same_config_seed_and_events_give_the_same_actions():
    def run(seed):
        config = SessionConfig(seeds=["b1:9092", "b2:9092", "b3:9092"], one_shot=True)
        with Session(config, now_ns=0, seed=seed) as session:

            def silent(action, now):
                return [Connected(action.conn)] if isinstance(action, Dial) else []

            actions, end = drive(session, silent, limit=500)
            return [repr(a) for a in actions], end

    assert run(11) == run(11)


@pytest.mark.parametrize(
    "config, field",
    [
        (SessionConfig(seeds=["nohostport"]), "seeds"),
        (SessionConfig(seeds=["b1:9092"], preset="sometimes"), "preset"),
        (SessionConfig(seeds=["b1:9092"], settings={"fanout.jitter": "lots"}), "settings.fanout.jitter"),
        (SessionConfig(seeds=["b1:9092"], settings={"no.such.knob": "1"}), "settings.no.such.knob"),
        (SessionConfig(seeds=["b1:9092"], max_frame_size=10), "max_frame_size"),
        (SessionConfig(seeds=["b1:9092"], topics=["bad topic/name"]), "topics"),
    ],
)
def test_a_refused_config_names_the_field(config, field):
    with pytest.raises(ConfigError) as caught:
        Session(config)
    assert caught.value.field is not None and caught.value.field.startswith(field), caught.value
    assert isinstance(caught.value, ValueError)


def test_a_closed_session_refuses_calls():
    session = Session(SessionConfig(seeds=["b1:9092"]))
    session.close()
    session.close()  # twice is fine
    assert session.closed
    with pytest.raises(stagger.AbiError):
        session.step(1, [])
