"""The boundary's cost per refresh, without a network: conformance scenarios
(``conformance/*.json``) replayed through the installed package's session layer many times
over, as ``lab/src/bin/boundary.rs`` replays them through the C ABI natively and
``bindings/go/boundary_test.go`` through the Go host (docs/performance/boundary.md has the
numbers).

A replay is what the asyncio host does for a refresh, less the sockets: ``stagger.Session``
opened with the file's config, one ``step`` per step with the step's events (built once,
before the clock runs; encoded by the package's codec at each step), the actions decoded, and
at each refresh's end the outcome a caller gets (the metadata with its attempts, or the
``RefreshError``: ``stagger._host.refresh_outcome``), then ``close``.

* ``one_shot_healthy/refresh``: one whole one-shot refresh (session, steps, outcome, close);
* ``kept_connection`` and ``spare_connection`` (long-lived sessions, several refreshes each):
  ``session``, the whole replay divided by its refreshes; ``steps``, the steps alone (with
  each refresh's outcome) divided by them.

Each case runs for ``--secs`` seconds and prints the mean time per refresh, and the median and
99th percentile over batches of ``--batch`` replays. Run it with the wheel installed and from
anywhere but the package's source directory (``bash bindings/python/bench/run.sh`` builds the
wheel into a fresh virtual environment and runs it)::

    python bindings/python/bench/boundary.py [--secs 3] [--batch 20] [--conformance DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import stagger
from stagger import Refreshed, RefreshFailed, Session
from stagger._host import refresh_outcome

HERE = Path(__file__).resolve().parent
CONFORMANCE = HERE.parent.parent.parent / "conformance"

# The tests' reader of the scenario files (tests/conformance.py), shared so that the bench
# replays them as test_conformance.py does; it is not part of the package.
sys.path.insert(0, str(HERE.parent / "tests"))
from conformance import ScenarioConfig, event_of  # noqa: E402


class Scenario:
    """A conformance scenario with its events built once."""

    def __init__(self, directory: Path, name: str) -> None:
        doc = json.loads((directory / f"{name}.json").read_text())
        self.name = name
        self.config = ScenarioConfig(doc["config"])
        self.now_ns: int = doc["now_ns"]
        self.seed: int = doc["seed"]
        self.steps = [(step["now_ns"], [event_of(e) for e in step["events"]]) for step in doc["steps"]]
        ends = [a for step in doc["steps"] for a in step["expect"]["actions"] if "refreshed" in a or "refresh_failed" in a]
        self.refreshes = len(ends)
        if not self.refreshes:
            raise SystemExit(f"{name}: no refresh ends in it")

    def open(self) -> Session:
        return Session(self.config, now_ns=self.now_ns, seed=self.seed)  # type: ignore[arg-type]

    def run(self, session: Session) -> int:
        """Steps through the scenario; returns how many refreshes ended."""
        ended = 0
        for now_ns, events in self.steps:
            actions, _ = session.step(now_ns, events)
            for action in actions:
                if isinstance(action, (Refreshed, RefreshFailed)):
                    refresh_outcome(session, action)
                    ended += 1
        return ended


def measure(s: Scenario, secs: float, batch: int, replay: Callable[[], int]) -> Dict[str, float]:
    """Runs ``replay`` (which returns the ns of the part it measures) for ``secs`` seconds;
    µs per refresh: the mean, and the median and p99 over batches."""
    for _ in range(batch):
        replay()
    samples: List[float] = []
    total = replays = 0
    deadline = time.perf_counter() + secs
    while time.perf_counter() < deadline:
        ns = sum(replay() for _ in range(batch))
        total += ns
        replays += batch
        samples.append(ns / 1e3 / (batch * s.refreshes))
    samples.sort()

    def rank(q: float) -> float:
        return samples[min(max(math.ceil(q * len(samples)), 1), len(samples)) - 1]

    return {"mean": total / 1e3 / (replays * s.refreshes), "p50": rank(0.5), "p99": rank(0.99), "replays": replays}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--secs", type=float, default=3.0, help="seconds per case (default 3)")
    parser.add_argument("--batch", type=int, default=20, help="replays per sample (default 20)")
    parser.add_argument("--conformance", type=Path, default=CONFORMANCE, help="the scenarios' directory")
    args = parser.parse_args()
    if Path(stagger.__file__).resolve().is_relative_to(HERE.parent.resolve()):
        raise SystemExit("run this against the installed wheel, not the source tree (bench/run.sh)")

    clock = time.perf_counter_ns

    def whole(s: Scenario) -> int:
        start = clock()
        session = s.open()
        if s.run(session) != s.refreshes:
            raise SystemExit(f"{s.name}: the replay diverged")
        session.close()
        return clock() - start

    def steps(s: Scenario) -> int:
        session = s.open()
        start = clock()
        if s.run(session) != s.refreshes:
            raise SystemExit(f"{s.name}: the replay diverged")
        took = clock() - start
        session.close()
        return took

    print(f"Python {sys.version.split()[0]}, stagger from {Path(stagger.__file__).parent}")
    print("| case | µs/refresh (mean) | p50 | p99 | replays |")
    print("|---|---:|---:|---:|---:|")
    cases: List[Tuple[str, Scenario, Callable[[Scenario], int]]] = []
    one_shot = Scenario(args.conformance, "one_shot_healthy")
    cases.append(("one_shot_healthy/refresh", one_shot, whole))
    for name in ("kept_connection", "spare_connection"):
        s = Scenario(args.conformance, name)
        cases += [(f"{name}/session", s, whole), (f"{name}/steps", s, steps)]
    for case, s, how in cases:
        r = measure(s, args.secs, args.batch, lambda: how(s))
        print(f"| {case} | {r['mean']:.2f} | {r['p50']:.2f} | {r['p99']:.2f} | {r['replays']:.0f} |", flush=True)
        print(json.dumps({"case": case, **{f"{k}_us": round(v, 3) for k, v in r.items() if k != "replays"}}), file=sys.stderr)


if __name__ == "__main__":
    main()
