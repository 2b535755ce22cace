"""Bootstrap the Kafka client you already run (aiokafka, confluent-kafka, kafka-python) through
stagger.

Those clients try their seed brokers one at a time: past a hung or blackholed first seed they
wait out a whole timeout (or never answer). stagger asks the seeds with a short, adaptive
stagger, so a dead or silent seed costs milliseconds. Ask it which seeds are alive and which
broker answered, then hand your client an ordered ``bootstrap_servers`` list: the broker that
answered first, then every other broker the cluster lists and every seed, except those stagger
saw failing (refused, reset, timed out) or silent (never answered though asked no later than
the winner: hung or blackholed) during its refresh. Those are left out, not put last, because
Kafka's metadata still lists a hung broker (a stopped process stays registered) and aiokafka
starts at a random seed of its list.

    python bootstrap_servers.py 10.0.0.1:9092,10.0.0.2:9092,10.0.0.3:9092
    python bootstrap_servers.py broker1:9093,broker2:9093 --ca ca.pem                   # TLS
    python bootstrap_servers.py broker1:9094 --ca ca.pem --scram-sha-512 USER           # SASL_SSL
                                                        (password from STAGGER_PASSWORD)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import sys
from typing import List, Optional

import stagger


def seed_states(seeds: List[str], md: stagger.Metadata) -> List[str]:
    """One line per seed: what its attempt found (or that it was not needed)."""
    attempts = {a.broker: a for a in md.attempts}
    won = [a.started_ms for a in md.attempts if a.outcome == "won"]
    lines = []
    for seed in seeds:
        a = attempts.get(seed)
        if a is None:
            state = "not asked: another seed answered first"
        elif a.outcome == "won":
            state = f"alive: answered first ({a.ended_ms:.1f} ms)"
        elif a.answered_ms is not None:
            state = f"alive: answered at {a.answered_ms:.1f} ms, after the winner"
        elif a.outcome == "failed":
            state = f"dead: {a.error}"
        elif won and a.started_ms > won[0]:
            state = f"asked after the winner (at {a.started_ms:.1f} ms), no answer yet: {a.reason}, kept"
        elif a.connected_ms is not None:
            state = f"connected at {a.connected_ms:.1f} ms, then silent (hung?): {a.reason}"
        else:
            state = f"no connection (blackholed?): {a.reason}"
        lines.append(f"  {seed:<28} {state}")
    return lines


async def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seeds", help="comma-separated host:port list (bootstrap.servers)")
    parser.add_argument("--ca", help="PEM file of the CA that signed the brokers' certificates (turns TLS on)")
    parser.add_argument("--scram-sha-512", metavar="USER", help="SASL/SCRAM-SHA-512 as USER (password: $STAGGER_PASSWORD)")
    parser.add_argument("--listed-order", action="store_true", help="ask the seeds in the order listed, not shuffled")
    args = parser.parse_args(argv)

    seeds = [s.strip() for s in args.seeds.split(",") if s.strip()]
    sasl = None
    if args.scram_sha_512:
        sasl = stagger.ScramSha512(args.scram_sha_512, os.environ.get("STAGGER_PASSWORD", ""))
    options = stagger.Options(
        ssl=ssl.create_default_context(cafile=args.ca) if args.ca else None,
        sasl=sasl,
        topics=[],  # brokers only; the client asks for its topics itself
        settings={"shuffle_seeds": False} if args.listed_order else {},
    )

    try:
        md = await stagger.metadata(seeds, options)
    except stagger.RefreshError as e:
        print(f"no seed answered: {e.reason}", file=sys.stderr)
        for b in e.brokers:
            print(f"  {b.address:<28} {b.story}", file=sys.stderr)
        return 1

    print(f"cluster {md.cluster_id}: {len(md.brokers)} brokers; {md.answered_by} answered first")
    print("seeds:")
    print("\n".join(seed_states(seeds, md)))
    print(f"listed: {', '.join(b.address for b in md.brokers)}")
    # The broker that answered, then the listed brokers and the seeds stagger did not see
    # failing or silent.
    servers = md.bootstrap_servers()
    print(f"bootstrap_servers = {servers!r}")
    print()
    print("# Hand the list to your client's constructor, for example:")
    print("#   aiokafka:        AIOKafkaConsumer('orders', bootstrap_servers=bootstrap_servers)")
    print("#   kafka-python:    KafkaConsumer('orders', bootstrap_servers=bootstrap_servers)")
    print("#   confluent-kafka: Consumer({'bootstrap.servers': ','.join(bootstrap_servers), 'group.id': 'g'})")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
