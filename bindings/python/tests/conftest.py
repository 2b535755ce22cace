"""Fixtures: the installed package (never the source tree), fake brokers, a blackholed address
and the real Kafka cluster of the test run.

The real cluster is the one ``scripts/kafka.sh`` started, named by ``STAGGER_KAFKA_DIR`` (as
for the Rust tests; ``scripts/test.sh`` starts one and exports it). Without it the real-Kafka
tests are skipped with a sentence saying so, unless ``STAGGER_REQUIRE_KAFKA=1``, which makes
that a failure.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

import stagger

from fakebroker import Cluster, FakeBroker


def pytest_report_header(config):
    return f"stagger {stagger.__version__} from {Path(stagger.__file__).parent} (ABI {stagger.abi_version()})"


def pytest_sessionstart(session):
    # The wheel is what is tested: refuse to run against a source checkout on sys.path.
    here = Path(stagger.__file__).resolve()
    if "site-packages" not in here.parts and os.environ.get("STAGGER_ALLOW_SOURCE_TREE") != "1":
        raise pytest.UsageError(f"stagger was imported from {here}, not from an installed wheel")


# --- fake brokers and faults ----------------------------------------------------------------


@pytest.fixture
def fake_broker() -> Iterator[FakeBroker]:
    with FakeBroker() as broker:
        yield broker


@pytest.fixture
def make_broker():
    made: List[FakeBroker] = []

    def make(cluster: Optional[Cluster] = None, mode: str = "answer", delay: float = 0.0) -> FakeBroker:
        broker = FakeBroker(cluster, mode, delay)
        made.append(broker)
        return broker

    yield make
    for b in made:
        b.close()


def closed_port() -> str:
    """A loopback address where nothing listens: connecting is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


class Blackhole:
    """A loopback listener whose TCP handshake never completes for new clients (the technique
    of testing/faults/src/blackhole.rs): backlog 1, never accepting, its accept queue filled
    (Linux keeps backlog + 1 there) so the kernel drops further SYNs. Checked: a connect hangs.
    """

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        host, port = self.listener.getsockname()
        self.address = f"{host}:{port}"
        self.fill: List[socket.socket] = []
        for _ in range(8):
            s = socket.socket()
            s.settimeout(0.2)
            try:
                s.connect((host, port))
            except (socket.timeout, TimeoutError):
                s.close()
                break  # this SYN was dropped: the queue is full
            self.fill.append(s)
        probe = socket.socket()
        probe.settimeout(0.5)
        try:
            probe.connect((host, port))
        except (socket.timeout, TimeoutError):
            pass
        else:
            self.close()
            raise RuntimeError("blackhole check: a connect completed")
        finally:
            probe.close()

    def close(self) -> None:
        for s in self.fill:
            s.close()
        self.listener.close()


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    hole = Blackhole()
    try:
        yield hole
    finally:
        hole.close()


# --- the real cluster -----------------------------------------------------------------------


@dataclass
class Kafka:
    """The cluster ``scripts/kafka.sh`` started (its ``cluster.env``)."""

    dir: Path
    env: Dict[str, str]

    def list(self, key: str) -> List[str]:
        return [a for a in self.env.get(key, "").split(",") if a]

    @property
    def plaintext(self) -> List[str]:
        return self.list("KAFKA_PLAINTEXT")

    @property
    def ssl(self) -> List[str]:
        return self.list("KAFKA_SSL")

    @property
    def sasl_plaintext(self) -> List[str]:
        return self.list("KAFKA_SASL_PLAINTEXT")

    @property
    def sasl_ssl(self) -> List[str]:
        return self.list("KAFKA_SASL_SSL")

    @property
    def ca(self) -> str:
        return self.env["KAFKA_CA"]

    @property
    def username(self) -> str:
        return self.env["KAFKA_SASL_USERNAME"]

    @property
    def password(self) -> str:
        return self.env["KAFKA_SASL_PASSWORD"]

    @property
    def cluster_id(self) -> str:
        return self.env["KAFKA_CLUSTER_ID"]

    def pid(self, node: int) -> int:
        """Node ``node``'s broker process now (it changes with a restart)."""
        return int((self.dir / f"node-{node}" / "pid").read_text().strip())

    def restart(self, node: int) -> None:
        """Starts node ``node`` again and waits until it serves metadata (kafka.sh restart)."""
        script = kafka_script()
        if script is None:
            raise RuntimeError("STAGGER_REPO is not set: cannot find scripts/kafka.sh to restart a broker")
        subprocess.run(
            ["bash", str(script), "restart", "--node", str(node), "--dir", str(self.dir)],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=180,
        )


def kafka_script() -> Optional[Path]:
    repo = os.environ.get("STAGGER_REPO")
    if not repo:
        return None
    script = Path(repo) / "scripts" / "kafka.sh"
    return script if script.exists() else None


def _no_kafka(reason: str):
    if os.environ.get("STAGGER_REQUIRE_KAFKA") == "1":
        pytest.fail(f"{reason}, and STAGGER_REQUIRE_KAFKA=1 requires the real-Kafka tests to run", pytrace=False)
    pytest.skip(f"real-Kafka test skipped: {reason}")


@pytest.fixture(scope="session")
def kafka_cluster() -> Optional[Kafka]:
    directory = os.environ.get("STAGGER_KAFKA_DIR")
    if not directory:
        return None
    path = Path(directory)
    env_file = path / "cluster.env"
    if not env_file.exists() or not (path / "ready").exists():
        raise RuntimeError(
            f"STAGGER_KAFKA_DIR={directory} names no running cluster "
            f"(start one with `bash scripts/kafka.sh start --dir {directory}`)"
        )
    env = {}
    for line in env_file.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            env[key.strip()] = value.strip().strip("'\"")
    return Kafka(path, env)


@pytest.fixture
def kafka(kafka_cluster) -> Kafka:
    if kafka_cluster is None:
        _no_kafka("STAGGER_KAFKA_DIR is not set (scripts/test.sh starts a cluster and sets it)")
    return kafka_cluster


def is_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (state T), as SIGSTOP leaves them."""
    tasks = Path(f"/proc/{pid}/task")
    try:
        states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks.iterdir()]
    except (OSError, IndexError):
        return False
    return bool(states) and all(s in ("T", "t") for s in states)


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting until {what}")
        time.sleep(0.01)
