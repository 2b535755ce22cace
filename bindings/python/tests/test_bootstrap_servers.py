"""``Metadata.bootstrap_servers()``, the list handed to another Kafka client: the broker that
answered first, then the listed brokers and the seeds, less every address stagger saw failing
or silent in the refresh. Built from report rows without a network, then once over loopback
fakes."""

from __future__ import annotations

from typing import Optional

import stagger
from stagger import AttemptReport, Broker, Metadata

from conftest import closed_port
from fakebroker import Cluster


def row(
    broker: str,
    outcome: str,
    connected_ms: Optional[float],
    answered_ms: Optional[float],
    started_ms: float = 0.0,
) -> AttemptReport:
    """One report row as the core writes it (``None``: a step the attempt did not reach)."""
    return AttemptReport.from_json(
        {
            "attempt": 0,
            "broker": broker,
            "started_ms": started_ms,
            "connected_ms": connected_ms,
            "answered_ms": answered_ms,
            "ended_ms": 30.0,
            "outcome": outcome,
        }
    )


def test_every_broker_seen_failing_or_silent_is_left_out_the_slow_and_the_untried_stay():
    md = Metadata(
        # The cluster lists the hung broker (k2) and the refused one (k1) too.
        brokers=tuple(Broker(n, f"k{n}", 9092) for n in (5, 3, 1, 2, 4)),
        topics=(),
        answered_by="k4:9092",
        seeds=("k1:9092", "k2:9092", "10.9.9.9:9092", "k3:9092", "k4:9092", "k6:9092"),
        attempts=(
            row("k1:9092", "failed", None, None),  # refused
            row("k2:9092", "cancelled", 1.0, None),  # connected, then silent: hung
            row("10.9.9.9:9092", "cancelled", None, None),  # no connection: blackholed
            row("k3:9092", "cancelled", 2.0, 9.0),  # answered, after the winner
            row("k4:9092", "won", 2.0, 5.0),
        ),
    )
    # The winner; then the listed brokers in the metadata's order (k5 never tried, k3 only
    # slower), then the seeds the metadata does not list (k6 never tried).
    assert md.bootstrap_servers() == ["k4:9092", "k5:9092", "k3:9092", "k6:9092"]


def test_a_broker_whose_attempt_started_after_the_winning_one_stays():
    md = Metadata(
        brokers=tuple(Broker(n, f"k{n}", 9092) for n in (1, 2, 3)),
        topics=(),
        answered_by="k2:9092",
        seeds=(),
        attempts=(
            row("k1:9092", "cancelled", 1.0, None),  # silent from the start: hung
            row("k2:9092", "won", 51.0, 52.0, started_ms=50.0),
            row("k3:9092", "cancelled", None, None, started_ms=51.0),  # had 1 ms
        ),
    )
    assert md.bootstrap_servers() == ["k2:9092", "k3:9092"]


def test_the_broker_that_answered_comes_first_even_after_an_earlier_failure_of_it():
    md = Metadata(
        brokers=(Broker(1, "k1", 9092), Broker(2, "k2", 9092)),
        topics=(),
        answered_by="k2:9092",
        seeds=("k1:9092", "k2:9092"),
        attempts=(
            row("k1:9092", "failed", None, None),
            row("k2:9092", "failed", None, None),  # the first pass: refused
            row("k1:9092", "failed", None, None),
            row("k2:9092", "won", 1.0, 2.0),  # the second
        ),
    )
    assert md.bootstrap_servers() == ["k2:9092"]


def test_without_attempts_every_broker_and_seed_is_listed():
    md = Metadata(
        brokers=(Broker(1, "k1", 9092), Broker(2, "::1", 9093)),
        topics=(),
        answered_by="k1:9092",
        seeds=("k1:9092", "k9:9092"),
    )
    assert md.bootstrap_servers() == ["k1:9092", "[::1]:9093", "k9:9092"]


def test_a_refresh_past_a_refused_and_a_hung_seed_leaves_both_out(make_broker):
    # Loopback fakes: the good one lists the hung one, itself and a broker nobody asks.
    refused, untried = closed_port(), closed_port()
    hung, good = make_broker(mode="hang"), make_broker()
    good.cluster = Cluster(
        brokers=[(1, "127.0.0.1", hung.port), (2, "127.0.0.1", good.port), (3, "127.0.0.1", int(untried.split(":")[1]))]
    )
    seeds = [refused, hung.address, good.address]
    listed = {"shuffle_seeds": False}  # the refused and the hung seed asked first, as listed
    md = stagger.metadata_blocking(seeds, topics=[], settings=listed)
    assert md.seeds == tuple(seeds)
    outcomes = {a.broker: (a.outcome, a.answered_ms) for a in md.attempts}
    assert outcomes[refused][0] == "failed" and outcomes[hung.address] == ("cancelled", None), md.attempts
    assert md.answered_by == good.address
    assert md.bootstrap_servers() == [good.address, untried]
    assert stagger.bootstrap_servers_blocking(seeds, settings=listed) == [good.address, untried]
