"""lab/peers probe for the Python clients: one client, one metadata round, one JSON line.

    python probe.py CLIENT[+front] BOOTSTRAP TUNED(0|1) [WARMUP_ADDRESS]

CLIENT is confluent-kafka (librdkafka: AdminClient.list_topics), kafka-python
(KafkaAdminClient.describe_cluster), aiokafka (AIOKafkaAdminClient.start + describe_cluster) or
stagger (stagger.metadata_blocking at its defaults, the seeds in the order given: the wheel
built from bindings/python; TUNED is ignored). aiokafka+front ("aiokafka + stagger front" in the
benchmark) first runs the Python package's recipe, ``await stagger.bootstrap_servers(seeds)`` at
its defaults (the seed that answered, then the listed brokers and the seeds stagger did not see
failing or silent in its refresh; the package decides, this probe adds nothing), and gives that
list to aiokafka; the time covers both.
Prints {"ok":true,"elapsed_ms":…,"brokers":N} or {"ok":false,"elapsed_ms":…,"error":"…"}: the
time from creating the client to the answer. With WARMUP_ADDRESS a first client asks that
(healthy, uncounted) broker once, so imports and first-use costs are not billed; the probe
then prints {"ready": true} and waits for a line on stdin (the benchmark makes its faults then).

Over SASL_SSL (bench.py --listener sasl_ssl) the benchmark sets PEERS_SECURITY_PROTOCOL=SASL_SSL,
PEERS_SASL_MECHANISM, PEERS_SASL_USERNAME, PEERS_SASL_PASSWORD and PEERS_CA_FILE; confluent-kafka,
kafka-python, aiokafka, the stagger wheel and the front read them.
"""

import asyncio
import json
import logging
import os
import sys
import time

logging.disable(logging.CRITICAL)


def sasl_ssl():
    """The benchmark's SASL_SSL settings, or None over PLAINTEXT."""
    if os.environ.get("PEERS_SECURITY_PROTOCOL", "PLAINTEXT") != "SASL_SSL":
        return None
    return {k: os.environ["PEERS_" + k.upper()] for k in ("sasl_mechanism", "sasl_username", "sasl_password", "ca_file")}


def stagger_options():
    """The stagger wheel's options over SASL_SSL (TLS verified against the test CA, SCRAM), or
    None over PLAINTEXT: the binding's defaults otherwise."""
    import ssl

    import stagger

    sec = sasl_ssl()
    if not sec:
        return None
    scram = {"SCRAM-SHA-256": stagger.ScramSha256, "SCRAM-SHA-512": stagger.ScramSha512}[sec["sasl_mechanism"]]
    return stagger.Options(ssl=ssl.create_default_context(cafile=sec["ca_file"]),
                           sasl=scram(sec["sasl_username"], sec["sasl_password"]))


def confluent(bootstrap, tuned):
    from confluent_kafka.admin import AdminClient

    conf = {"bootstrap.servers": bootstrap, "client.id": "peers-probe", "log_level": 0}
    sec = sasl_ssl()
    if sec:
        conf.update({"security.protocol": "SASL_SSL", "sasl.mechanism": sec["sasl_mechanism"],
                     "sasl.username": sec["sasl_username"], "sasl.password": sec["sasl_password"],
                     "ssl.ca.location": sec["ca_file"]})
    if tuned:
        # Per-request and connect timeouts 2 s (defaults 60 s and 30 s); the reconnect backoff's
        # ceiling 2 s (default 10 s); retry.backoff.max.ms (1 s) is already below 2 s.
        conf.update({"socket.timeout.ms": 2000, "socket.connection.setup.timeout.ms": 2000,
                     "reconnect.backoff.max.ms": 2000})
    admin = AdminClient(conf)
    md = admin.list_topics()  # no call timeout: librdkafka's own timeouts decide
    at = time.perf_counter()
    return len(md.brokers), at


def kafka_python(bootstrap, tuned):
    from kafka.admin import KafkaAdminClient

    conf = {"bootstrap_servers": bootstrap.split(","), "client_id": "peers-probe"}
    sec = sasl_ssl()
    if sec:
        conf.update({"security_protocol": "SASL_SSL", "sasl_mechanism": sec["sasl_mechanism"],
                     "sasl_plain_username": sec["sasl_username"], "sasl_plain_password": sec["sasl_password"],
                     "ssl_cafile": sec["ca_file"]})
    if tuned:
        # Per-request timeout 2 s (admin default 30 s; it also bounds a connect); the reconnect
        # backoff's ceiling 2 s (default 30 s); retry_backoff_ms (100 ms) is already below 2 s.
        # bootstrap_timeout_ms (30 s) is the whole bootstrap's deadline, not a per-broker one.
        conf.update({"request_timeout_ms": 2000, "reconnect_backoff_max_ms": 2000})
    admin = KafkaAdminClient(**conf)
    try:
        d = admin.describe_cluster()
        at = time.perf_counter()
        return len(d["brokers"]), at
    finally:
        try:
            admin.close()
        except Exception:
            pass


FRONT = {}  # the last front's duration and the seed it put first (for the raw results)


def aiokafka(bootstrap, tuned, front=False):
    from aiokafka.admin import AIOKafkaAdminClient

    async def go():
        servers = bootstrap
        if front:
            import stagger

            t = time.perf_counter()
            try:
                servers = await stagger.bootstrap_servers(bootstrap.split(","), stagger_options())
            finally:
                FRONT["front_ms"] = (time.perf_counter() - t) * 1000
            FRONT["front_winner"] = servers[0] if servers else None
        conf = {"bootstrap_servers": servers, "client_id": "peers-probe"}
        sec = sasl_ssl()
        if sec:
            from aiokafka.helpers import create_ssl_context

            conf.update({"security_protocol": "SASL_SSL", "sasl_mechanism": sec["sasl_mechanism"],
                         "sasl_plain_username": sec["sasl_username"], "sasl_plain_password": sec["sasl_password"],
                         "ssl_context": create_ssl_context(cafile=sec["ca_file"])})
        if tuned:
            # Per-request (and connect) timeout 2 s (default 40 s); retry_backoff_ms (100 ms)
            # is already below 2 s.
            conf.update({"request_timeout_ms": 2000})
        admin = AIOKafkaAdminClient(**conf)
        try:
            await admin.start()
            d = await admin.describe_cluster()
            at = time.perf_counter()
            return len(d["brokers"]), at
        finally:
            try:
                await admin.close()
            except Exception:
                pass

    return asyncio.run(go())


def stagger_python(bootstrap, tuned):
    import stagger

    # stagger runs at its defaults: TUNED is accepted for the uniform command line and ignored.
    md = stagger.metadata_blocking(bootstrap.split(","), stagger_options())
    at = time.perf_counter()
    return len(md.brokers), at


CLIENTS = {"confluent-kafka": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka, "stagger": stagger_python,
           "aiokafka+front": lambda bootstrap, tuned: aiokafka(bootstrap, tuned, front=True)}


def main():
    client, bootstrap = sys.argv[1], sys.argv[2]
    tuned = len(sys.argv) > 3 and sys.argv[3] == "1"
    once = CLIENTS[client]
    if len(sys.argv) > 4 and sys.argv[4]:
        try:
            once(sys.argv[4], tuned)
        except Exception as e:  # noqa: BLE001
            print(f"warm-up failed: {e!r}", file=sys.stderr)
        # Warm-up done: tell the benchmark, and wait for its go (a line on stdin).
        print('{"ready": true}', flush=True)
        sys.stdin.readline()
    t0 = time.perf_counter()
    try:
        n, at = once(bootstrap, tuned)
        out = {"ok": True, "elapsed_ms": (at - t0) * 1000, "brokers": n}
    except Exception as e:  # noqa: BLE001
        out = {"ok": False, "elapsed_ms": (time.perf_counter() - t0) * 1000, "error": repr(e)}
    out.update(FRONT)
    print(json.dumps(out), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
