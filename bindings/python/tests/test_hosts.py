"""The asyncio and blocking APIs over real loopback sockets, against fake brokers: typed
results, a multi-megabyte Metadata answer, hedging past a hung broker, cancellation closing
connections, the long-lived clients (cache, kept connection, single-flight, close)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
import time

import pytest

import stagger
from stagger import Cause, ClosedError, ConfigError, RefreshError, blocking

from conftest import closed_port
from fakebroker import Cluster, FakeBroker


def run(coro):
    return asyncio.run(coro)


def test_metadata_from_one_broker_comes_back_typed(fake_broker):
    md = run(stagger.metadata([fake_broker.address], client_id="pytest"))
    assert isinstance(md, stagger.Metadata)
    assert md.answered_by == fake_broker.address
    assert md.brokers == (stagger.Broker(1, "127.0.0.1", fake_broker.port, None),)
    assert md.bootstrap_servers() == [fake_broker.address]
    assert [a.outcome for a in md.attempts] == ["won"]
    assert md.attempts[0].connected_ms is not None and md.attempts[0].answered_ms is not None


def test_seeds_may_be_one_comma_separated_string(fake_broker):
    md = stagger.metadata_blocking(f" {closed_port()} , {fake_broker.address}", settings={"retry.retries": 0})
    assert md.answered_by == fake_broker.address


class HangingUp:
    """A loopback listener that accepts and at once closes every connection: a broker that
    hangs up on the ClientHello (one restarting, or a plaintext port)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.accepted = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            self.accepted += 1
            conn.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.sock.close()


def test_a_broker_hanging_up_during_the_tls_handshake_is_closed_and_retried():
    # Not the TLS layer's refusal (which ends a refresh after a pass of them): the next pass
    # may find the broker back.
    broker = HangingUp()
    try:
        with pytest.raises(RefreshError) as caught:
            stagger.metadata_blocking([broker.address], ssl=True, settings={"retry.retries": 2, "retry.initial": "1ms"})
    finally:
        broker.stop()
    error = caught.value
    assert error.last_error is not None and error.last_error.kind == "closed", error
    assert (error.reason, error.passes, broker.accepted) == ("all_failed", 3, 3), error


# 20 000 topics x 6 partitions, 3 replicas each: about 5.6 MB on the wire (abi/tests/frame_size.rs
# measures the same shape through the Rust host).
BIG = Cluster(
    brokers=[(1, "127.0.0.1", 0), (2, "127.0.0.2", 9092), (3, "127.0.0.3", 9092)],
    topics=[(f"topic-{i:05}", 6, 3) for i in range(20_000)],
)


@pytest.fixture(scope="module")
def big_broker():
    with FakeBroker(BIG) as broker:
        broker.cluster.brokers[0] = (1, "127.0.0.1", broker.port)
        yield broker


def test_a_multi_megabyte_metadata_answer_arrives_whole(big_broker):
    started = time.monotonic()
    md = run(stagger.metadata([big_broker.address]))
    elapsed = time.monotonic() - started
    assert len(md.topics) == 20_000
    assert sum(len(t.partitions) for t in md.topics) == 120_000
    last = md.topic("topic-19999")
    assert last is not None and last.partitions[5].replicas == (3, 1, 2) and last.partitions[5].isr == (3, 1, 2)
    assert len(big_broker._metadata or b"") > 5_000_000, "the answer is multi-megabyte"
    assert elapsed < 60, f"{elapsed:.1f} s"


def test_a_multi_megabyte_answer_above_the_frame_limit_fails_the_attempt_cleanly(big_broker):
    with pytest.raises(RefreshError) as caught:
        stagger.metadata_blocking([big_broker.address], max_frame_size=1_000_000, settings={"retry.retries": 0})
    assert caught.value.last_error is not None
    assert caught.value.last_error.kind == "frame_too_large", caught.value


def test_a_hung_first_broker_is_hedged_past(make_broker):
    hung, good = make_broker(mode="hang"), make_broker()
    started = time.monotonic()
    md = stagger.metadata_blocking([hung.address, good.address], settings={"shuffle_seeds": False})  # hung first
    elapsed = time.monotonic() - started
    assert md.answered_by == good.address
    outcomes = {a.broker: a.outcome for a in md.attempts}
    assert outcomes[good.address] == "won" and outcomes[hung.address] == "cancelled"
    assert elapsed < 3.0, f"{elapsed:.3f} s past one hung broker"
    assert hung.wait_for(lambda b: b.closed == b.accepted == 1), "the loser's connection is closed"


def test_cancelling_a_refresh_closes_its_connections(make_broker):
    hung = make_broker(mode="hang")

    async def main():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(stagger.metadata([hung.address]), 0.5)

    run(main())
    assert hung.accepted >= 1
    assert hung.wait_for(lambda b: b.closed == b.accepted, 10), "every connection closed"


def test_every_broker_refusing_raises_a_refresh_error_with_every_brokers_error():
    seeds = [closed_port(), closed_port()]
    with pytest.raises(RefreshError) as caught:
        # As listed: ``brokers`` are in attempt order.
        run(stagger.metadata(seeds, settings={"retry.retries": 0, "shuffle_seeds": False}))
    error = caught.value
    assert error.reason == "all_failed"
    assert [b.address for b in error.brokers] == seeds
    assert all(b.error is not None and b.error.kind == "refused" for b in error.brokers)
    assert error.last_error is not None and error.last_error.address in seeds
    assert [a.outcome for a in error.attempts] == ["failed", "failed"]
    assert all(a.error_kind == "refused" for a in error.attempts)
    assert seeds[0] in str(error) and seeds[1] in str(error)


def test_bad_settings_are_refused_before_any_broker_is_contacted(fake_broker):
    with pytest.raises(ConfigError) as caught:
        stagger.metadata_blocking([fake_broker.address], settings={"fanout.max_in_flight": "none"})
    assert caught.value.field == "settings.fanout.max_in_flight"
    with pytest.raises(ConfigError):
        stagger.AsyncClient([fake_broker.address], preset="hurry")
    with pytest.raises(ConfigError, match="seeds"):
        stagger.Client([])
    with pytest.raises(ConfigError, match="ssl"):
        stagger.metadata_blocking([fake_broker.address], ssl="yes")
    assert fake_broker.accepted == 0


def test_options_are_one_frozen_value_that_checks_its_fields():
    options = stagger.Options(settings={"retry.retries": 0}, topics=["orders"], client_id="pytest")
    assert options.topics == ("orders",) and options.ssl is None and options.resolve_names is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.client_id = "other"
    with pytest.raises(TypeError):  # the settings are a read-only copy
        options.settings["retry.retries"] = 1
    assert options.replace(topics=[]) == stagger.Options(settings={"retry.retries": 0}, topics=(), client_id="pytest")
    assert options.replace() == options and hash(options.replace()) == hash(options)
    for field, value in [
        ("ssl", "yes"),
        ("sasl", ("user", "password")),
        ("settings", [("retry.retries", 0)]),
        ("preset", 1),
        ("client_id", b"pytest"),
        ("topics", "orders"),
        ("topics", 5),
        ("max_frame_size", "1MB"),
        ("max_frame_size", True),
        ("resolve_names", "yes"),
        ("seed", 1.5),
    ]:
        with pytest.raises(ConfigError) as caught:
            stagger.Options(**{field: value})
        assert caught.value.field == field, (field, value)
    # A keyword that names no option is refused as by any function; so is a plain dict.
    with pytest.raises(TypeError, match="retries"):
        stagger.Options(retries=0)
    with pytest.raises(TypeError, match="retries"):
        stagger.metadata_blocking([closed_port()], retries=0)
    with pytest.raises(ConfigError) as caught:
        stagger.Client([closed_port()], {"topics": []})
    assert caught.value.field == "options"


def test_every_api_takes_the_options_and_keywords_replace_their_fields():
    seeds = [closed_port()]
    once = stagger.Options(settings={"retry.retries": 0}, client_id="pytest")
    twice = {"settings": {"retry.retries": 1}}

    def passes(call) -> int:
        with pytest.raises(RefreshError) as caught:
            call()
        return caught.value.passes

    assert passes(lambda: stagger.metadata_blocking(seeds, once)) == 1
    assert passes(lambda: stagger.metadata_blocking(seeds, once, **twice)) == 2
    assert passes(lambda: run(stagger.metadata(seeds, once))) == 1
    assert passes(lambda: run(stagger.metadata(seeds, once, **twice))) == 2
    assert passes(lambda: stagger.metadata_blocking(seeds, **twice)) == 2

    async def refresh_async(*args, **kwargs):
        async with stagger.AsyncClient(seeds, *args, **kwargs) as client:
            assert client.options == (once if not kwargs else once.replace(**kwargs))
            return await client.refresh()

    assert passes(lambda: run(refresh_async(once))) == 1
    assert passes(lambda: run(refresh_async(once, **twice))) == 2

    def refresh_blocking(*args, **kwargs):
        with stagger.Client(seeds, *args, **kwargs) as client:
            assert client.options.client_id == "pytest"
            return client.refresh(timeout=30)

    assert passes(lambda: refresh_blocking(once)) == 1
    assert passes(lambda: refresh_blocking(once, **twice)) == 2


def test_the_async_client_caches_keeps_its_connection_and_shares_refreshes(fake_broker):
    async def main():
        async with stagger.AsyncClient([fake_broker.address]) as client:
            first = await client.metadata()
            assert await client.metadata() is first, "cached while the latest refresh succeeded"
            answers = await asyncio.gather(*(client.refresh() for _ in range(5)))
            assert all(a.answered_by == fake_broker.address for a in answers)
            again = await client.refresh(Cause.STALE_METADATA)
            report = client.report()
            assert client.cached() is again
            return report

    report = run(main())
    # One refresh for the first call, one shared by the five, one more.
    assert report.stats.refreshes == 3, report.stats
    assert report.stats.connections_opened == 1 and report.stats.connections_reused == 2, report.stats
    assert fake_broker.accepted == 1
    assert fake_broker.wait_for(lambda b: b.closed == 1), "close() closed the kept connection"


def test_closing_the_async_client_answers_waiting_callers(make_broker):
    hung = make_broker(mode="hang")

    async def main():
        client = stagger.AsyncClient([hung.address])
        waiting = asyncio.ensure_future(client.refresh())
        await asyncio.sleep(0)  # let it ask
        while hung.accepted == 0:
            await asyncio.sleep(0.01)
        await client.close()
        with pytest.raises(ClosedError):
            await waiting
        with pytest.raises(ClosedError):
            await client.metadata()

    run(main())
    assert hung.wait_for(lambda b: b.closed == b.accepted)


def test_a_threads_blocking_calls_share_one_loop_and_an_interrupt_closes_the_connections(make_broker):
    good = make_broker()
    stagger.metadata_blocking([good.address])
    loop = blocking._local.holder.loop
    stagger.metadata_blocking([good.address])
    assert blocking._local.holder.loop is loop and not loop.is_closed()
    assert good.wait_for(lambda b: b.accepted == 2 and b.closed == 2)

    # Ctrl-C while a refresh waits on a hung broker: the call is cancelled, its connection
    # closed, and the interruption reaches the caller; the loop serves the next call.
    hung = make_broker(mode="hang")

    def interrupt():
        raise KeyboardInterrupt

    loop.call_later(0.2, interrupt)
    with pytest.raises(KeyboardInterrupt):
        stagger.metadata_blocking([hung.address])
    assert hung.wait_for(lambda b: b.accepted == 1 and b.closed == 1)
    assert stagger.metadata_blocking([good.address]).answered_by == good.address


def test_the_blocking_api_works_inside_a_running_event_loop(fake_broker):
    async def main():
        return stagger.metadata_blocking([fake_broker.address])

    assert run(main()).answered_by == fake_broker.address


def test_the_blocking_client_serves_threads_with_one_refresh(make_broker):
    # Answers take 300 ms, so the eight callers, released together, meet one refresh.
    fake_broker = make_broker(delay=0.3)
    with stagger.Client([fake_broker.address]) as client:
        assert client.cached() is None
        start = threading.Barrier(8)
        results = []

        def call():
            start.wait()
            results.append(client.refresh(timeout=30))

        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 8 and all(r.answered_by == fake_broker.address for r in results)
        assert client.metadata() is client.cached()
        assert client.report().stats.refreshes == 1, "8 callers at once share one refresh"
    with pytest.raises(ClosedError):
        client.metadata()
    assert fake_broker.wait_for(lambda b: b.closed == b.accepted == 1)


def test_a_blocking_call_can_be_bounded_in_time(make_broker):
    hung = make_broker(mode="hang")
    with stagger.Client([hung.address]) as client:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            client.refresh(timeout=0.3)
        assert time.monotonic() - started < 5
    assert hung.wait_for(lambda b: b.closed == b.accepted)
