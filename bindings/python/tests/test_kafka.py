"""Against real Apache Kafka (scripts/kafka.sh; see conftest.py): plaintext, SSL, SASL_SSL with
SCRAM-SHA-512, OAUTHBEARER from a token callable, a stopped broker first (SIGSTOP) and the
bootstrap list leaving it out, a blackholed address first, a killed broker first (SIGKILL;
restarted after), the long-lived clients, and no secret in anything raised or logged.

The time bounds are generous on purpose (a loaded CI machine): the default policy answers
past one faulty seed in well under a second, where a one-at-a-time client waits out its
attempt timeout (10 s by default) first.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import json
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

import stagger
from stagger import Cause, RefreshError

from conftest import is_alive, is_stopped, kafka_script, wait_until

PAST_ONE_FAULT_S = 3.0

# A one-shot refresh shuffles the seeds by default; these tests put a faulty seed first and
# ask in the order listed.
LISTED = {"shuffle_seeds": False}


def tls(kafka) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=kafka.ca)


def outcomes(md) -> dict:
    return {a.broker: a for a in md.attempts}


def check_bootstrap_output(stdout: str, live: list, bad: list) -> tuple:
    """Checks examples/bootstrap_servers.py's output for seeds (live and bad ones) and returns
    the brokers the cluster listed and the list printed. Which live seed answers first is the
    race's, and on a loaded machine a live seed's slow first answer may be hedged past before
    it comes (it is then left out, as a silent one, if it started no later than the winner; one
    started after the winner stays): the example's line for each seed says which, and the list
    must hold exactly the seed that answered first, then the live seeds that answered, were not
    asked or were asked after the winner started, and no bad one."""
    lines = stdout.splitlines()
    listed = next(line for line in lines if line.startswith("listed: ")).split(": ", 1)[1].split(", ")
    printed = next(line for line in lines if line.startswith("bootstrap_servers = "))
    servers = ast.literal_eval(printed.split(" = ", 1)[1])
    states = {line.split()[0]: line for line in lines if line.startswith("  ")}
    assert servers and servers[0] in live and f"{servers[0]} answered first" in lines[0], stdout
    assert len(set(servers)) == len(servers) and not set(servers) & set(bad), stdout
    kept = {a for a in live if any(w in states[a] for w in ("alive:", "not asked", "asked after the winner"))}
    assert set(servers) == kept, stdout
    return listed, servers


def unsecured_jwt(subject: str) -> str:
    """What the SASL_PLAINTEXT listener's OAUTHBEARER validator (Kafka's unsecured one) takes."""
    now = int(time.time())
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{enc({'alg': 'none'})}.{enc({'sub': subject, 'iat': now, 'exp': now + 3600})}."


def test_plaintext_metadata_lists_every_broker(kafka):
    md = stagger.metadata_blocking(kafka.plaintext, client_id="stagger-pytest", settings=LISTED)
    assert md.cluster_id == kafka.cluster_id
    assert sorted(b.address for b in md.brokers) == sorted(kafka.plaintext)
    assert md.attempts[0].broker == kafka.plaintext[0], "shuffle_seeds off: the seeds asked in the order listed"
    assert md.answered_by in kafka.plaintext
    assert md.controller_id in {b.node_id for b in md.brokers}


def test_ssl_verifies_the_brokers_certificates(kafka):
    md = asyncio.run(stagger.metadata(kafka.ssl, ssl=tls(kafka), topics=[]))
    assert sorted(b.address for b in md.brokers) == sorted(kafka.ssl)
    assert md.answered_by in kafka.ssl
    assert md.attempts[0].answered_ms is not None


def test_ssl_with_a_ca_that_did_not_sign_them_fails_as_tls_after_one_pass(kafka):
    # The default retries: a pass whose every broker refused the certificate ends the
    # refresh, as the next would refuse the same certificates.
    with pytest.raises(RefreshError) as caught:
        stagger.metadata_blocking(kafka.ssl, ssl=True)
    error = caught.value
    assert error.last_error is not None and error.last_error.kind == "tls", error
    assert (error.reason, error.passes) == ("all_failed", 1), error
    assert len(error.attempts) == len(kafka.ssl), error.attempts


def test_sasl_ssl_with_scram_sha_512(kafka):
    sasl = stagger.ScramSha512(kafka.username, kafka.password)
    md = asyncio.run(stagger.metadata(kafka.sasl_ssl, ssl=tls(kafka), sasl=sasl))
    assert sorted(b.address for b in md.brokers) == sorted(kafka.sasl_ssl)
    assert md.cluster_id == kafka.cluster_id


def test_oauthbearer_tokens_come_from_an_async_callable(kafka):
    asked = []

    async def token() -> str:
        asked.append(1)
        return unsecured_jwt(kafka.username)

    md = asyncio.run(stagger.metadata(kafka.sasl_plaintext, sasl=stagger.OAuthBearer(token), topics=[]))
    assert asked, "the session asked for a token (NEED_TOKEN)"
    assert sorted(b.address for b in md.brokers) == sorted(kafka.sasl_plaintext)


def test_a_token_source_that_fails_fails_the_refresh_without_asking_other_brokers(kafka):
    def token() -> str:
        raise RuntimeError("the identity provider is down")

    with pytest.raises(RefreshError) as caught:
        stagger.metadata_blocking(kafka.sasl_plaintext, sasl=stagger.OAuthBearer(token))
    error = caught.value
    assert error.reason == "fatal", error
    assert error.last_error is not None and error.last_error.kind == "authentication", error
    assert "token source failed" in error.last_error.message
    assert sum(1 for b in error.brokers if b.attempts) == 1, "fatal: no other broker is asked"


def test_secrets_appear_in_nothing_raised_or_logged(kafka, caplog):
    caplog.set_level(logging.DEBUG, logger="stagger")
    wrong = "wrong-" + kafka.password[::-1]
    sasl = stagger.ScramSha512(kafka.username, wrong)
    with pytest.raises(RefreshError) as caught:
        stagger.metadata_blocking(kafka.sasl_ssl, ssl=tls(kafka), sasl=sasl)
    error = caught.value
    assert error.reason == "fatal" and error.last_error is not None
    # SASL_AUTHENTICATION_FAILED (58): fatal, so no other broker is asked.
    assert (error.last_error.kind, error.last_error.code) == ("broker_error", 58), error
    good = stagger.Plain(kafka.username, kafka.password)
    stagger.metadata_blocking(kafka.sasl_ssl, ssl=tls(kafka), sasl=good)
    token = unsecured_jwt(kafka.username)
    stagger.metadata_blocking(kafka.sasl_plaintext, sasl=stagger.OAuthBearer(token))
    shown = "\n".join(
        [
            str(error),
            repr(error),
            repr(error.brokers),
            repr(error.attempts),
            repr(error.last_error),
            repr(sasl),
            repr(good),
            repr(stagger.OAuthBearer(token)),
            repr(stagger.SessionConfig(seeds=kafka.sasl_ssl, sasl=sasl)),
            caplog.text,
        ]
    )
    assert "step:" in caplog.text, "the debug log ran"
    for secret in (wrong, kafka.password, token):
        assert secret not in shown


def test_a_stopped_broker_first_is_staggered_past(kafka):
    # Node 2 stops (SIGSTOP): the kernel still accepts its TCP connections; nothing answers.
    victim = 2
    pid = kafka.pid(victim)
    first = kafka.plaintext[victim - 1]
    seeds = [first] + [a for a in kafka.plaintext if a != first]
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(lambda: is_stopped(pid), 30, f"node {victim} (pid {pid}) is stopped")
        started = time.monotonic()
        md = stagger.metadata_blocking(seeds, settings=LISTED)
        elapsed = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert md.answered_by in seeds[1:]
    hung = outcomes(md)[first]
    assert hung.connected_ms is not None and hung.answered_ms is None, hung
    assert hung.outcome in ("cancelled", "failed"), hung
    assert elapsed < PAST_ONE_FAULT_S, f"{elapsed:.3f} s past a stopped broker"


def test_bootstrap_servers_leave_out_a_stopped_broker_the_cluster_still_lists(kafka):
    # Node 2 stops (SIGSTOP) and leads the seeds. It stays registered, so the answer lists it;
    # the list for another client leaves it out (aiokafka would start at a random entry), in
    # the example as in bootstrap_servers().
    example = Path(__file__).resolve().parent.parent / "examples" / "bootstrap_servers.py"
    victim = 2
    pid = kafka.pid(victim)
    hung = kafka.plaintext[victim - 1]
    live = [a for a in kafka.plaintext if a != hung]
    seeds = [hung] + live
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(lambda: is_stopped(pid), 30, f"node {victim} (pid {pid}) is stopped")
        done = subprocess.run(
            [sys.executable, str(example), ",".join(seeds), "--listed-order"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        servers = stagger.bootstrap_servers_blocking(seeds, settings=LISTED)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert done.returncode == 0, done.stderr
    listed, _ = check_bootstrap_output(done.stdout, live, [hung])
    assert hung in listed, done.stdout
    assert servers and servers[0] in live and hung not in servers, servers
    assert len(set(servers)) == len(servers) and set(servers) <= set(live), servers


def test_a_blackholed_address_first_is_staggered_past(kafka, blackhole):
    seeds = [blackhole.address] + kafka.plaintext
    started = time.monotonic()
    md = asyncio.run(stagger.metadata(seeds, topics=[], settings=LISTED))
    elapsed = time.monotonic() - started
    assert md.answered_by in kafka.plaintext
    hole = outcomes(md)[blackhole.address]
    assert hole.connected_ms is None and hole.outcome in ("cancelled", "failed"), hole
    assert elapsed < PAST_ONE_FAULT_S, f"{elapsed:.3f} s past a blackholed address"


def test_the_long_lived_clients_keep_their_connection_on_real_kafka(kafka):
    async def main():
        async with stagger.AsyncClient(kafka.plaintext, topics=[]) as client:
            first = await client.metadata()
            before = client.report().stats
            second = await client.refresh(Cause.STALE_METADATA)
            return first, second, before, client.report().stats

    first, second, before, after = asyncio.run(main())
    assert first.cluster_id == second.cluster_id == kafka.cluster_id
    assert (before.refreshes, after.refreshes) == (1, 2)
    # The second refresh asks on the connection the first one kept.
    assert after.connections_reused == before.connections_reused + 1, (before, after)
    with stagger.Client(kafka.sasl_ssl, ssl=tls(kafka), sasl=stagger.ScramSha256(kafka.username, kafka.password)) as c:
        assert c.metadata(timeout=60).cluster_id == kafka.cluster_id
        before = c.report().stats
        assert c.refresh(timeout=60).cluster_id == kafka.cluster_id
        after = c.report().stats
        # The second refresh asks on the kept connection: no new TCP, TLS or SASL handshake.
        assert after.connections_reused == before.connections_reused + 1, (before, after)


def test_the_bootstrap_example_orders_the_seeds_for_another_client(kafka, blackhole):
    example = Path(__file__).resolve().parent.parent / "examples" / "bootstrap_servers.py"
    seeds = [blackhole.address] + kafka.plaintext
    done = subprocess.run(
        [sys.executable, str(example), ",".join(seeds), "--listed-order"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    hole = next(line for line in lines if blackhole.address in line)
    assert "no connection" in hole, done.stdout
    check_bootstrap_output(done.stdout, kafka.plaintext, [blackhole.address])


def refuses(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False


def test_a_killed_broker_first_is_passed_at_once_and_restarted(kafka):
    # Node 3 is killed (SIGKILL): its port refuses. It is started again afterwards, so the
    # shared cluster is whole for whoever comes next.
    if kafka_script() is None:
        pytest.fail("STAGGER_REPO must name the checkout (bindings/python/test.sh sets it) to restart a broker")
    victim = 3
    pid = kafka.pid(victim)
    first = kafka.plaintext[victim - 1]
    seeds = [first] + [a for a in kafka.plaintext if a != first]
    os.kill(pid, signal.SIGKILL)
    try:
        wait_until(lambda: not is_alive(pid), 30, f"node {victim} (pid {pid}) is gone")
        wait_until(lambda: refuses(first), 30, f"{first} refuses connections")
        started = time.monotonic()
        md = stagger.metadata_blocking(seeds, settings=LISTED)
        elapsed = time.monotonic() - started
    finally:
        kafka.restart(victim)
    assert md.answered_by in seeds[1:]
    dead = outcomes(md)[first]
    assert dead.outcome == "failed" and dead.error_kind == "refused", dead
    assert elapsed < PAST_ONE_FAULT_S, f"{elapsed:.3f} s past a killed broker"
    # Back: it answers again.
    assert stagger.metadata_blocking([first], topics=[]).answered_by == first
