"""Typed results: the metadata, the attempts of a refresh and the session's report, read from
the ABI's JSON payloads (docs/abi.md, "JSON payloads")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type, TypeVar

T = TypeVar("T")

__all__ = [
    "Broker",
    "Partition",
    "Topic",
    "Metadata",
    "AttemptReport",
    "AttemptError",
    "BrokerFailure",
    "RefreshRecord",
    "SessionStats",
    "Report",
]


_new = object.__new__


def _built(cls: Type[T], values: Dict[str, Any]) -> T:
    """``cls(**values)`` for a frozen dataclass, every field given: filled in directly rather
    than through the generated ``__init__``, which sets each field with ``object.__setattr__``.
    A refresh's outcome builds a dozen or more of these, and this halves their cost
    (docs/performance/boundary.md)."""
    obj = _new(cls)
    obj.__dict__.update(values)
    return obj


def address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


@dataclass(frozen=True)
class Broker:
    """A broker as the metadata lists it (its advertised address on the listener asked)."""

    node_id: int
    host: str
    port: int
    rack: Optional[str] = None

    @property
    def address(self) -> str:
        """``host:port`` (what a client's ``bootstrap_servers`` takes)."""
        return address(self.host, self.port)


@dataclass(frozen=True)
class Partition:
    """One partition: its leader (-1 when none), replicas and in-sync replicas."""

    id: int
    leader: int
    replicas: Tuple[int, ...] = ()
    isr: Tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True)
class Topic:
    """One topic with its partitions; ``error_code`` is Kafka's (3: unknown topic)."""

    name: str
    partitions: Tuple[Partition, ...] = ()
    error_code: int = 0
    is_internal: bool = False


@dataclass(frozen=True)
class AttemptReport:
    """One attempt of a refresh, the core's report row (the CLI's ``--json`` attempt rows):
    milliseconds since the refresh began, and how it ended: ``outcome`` is ``won``,
    ``failed`` (``error``, ``error_kind`` and, for a broker's error, its Kafka
    ``error_code``), ``cancelled`` (``reason``), ``resolved``
    (``addresses``) or ``in_flight``."""

    attempt: int
    broker: str
    started_ms: float
    outcome: str
    connected_ms: Optional[float] = None
    answered_ms: Optional[float] = None
    ended_ms: Optional[float] = None
    error: Optional[str] = None
    error_kind: Optional[str] = None
    error_code: Optional[int] = None
    reason: Optional[str] = None
    addresses: Optional[Tuple[str, ...]] = None

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> "AttemptReport":
        kind: Any = row.get("error_kind")
        code: Any = None
        if isinstance(kind, dict):  # {"kind": "broker_error", "code": 3}, {"kind": "refused"}
            kind, code = kind.get("kind"), kind.get("code")
        addresses = row.get("addresses")
        return _built(
            cls,
            {
                "attempt": int(row.get("attempt", 0)),
                "broker": str(row.get("broker", "")),
                "started_ms": float(row.get("started_ms") or 0.0),
                "outcome": str(row.get("outcome", "")),
                "connected_ms": row.get("connected_ms"),
                "answered_ms": row.get("answered_ms"),
                "ended_ms": row.get("ended_ms"),
                "error": row.get("error"),
                "error_kind": None if kind is None else str(kind),
                "error_code": None if code is None else int(code),
                "reason": row.get("reason"),
                "addresses": None if addresses is None else tuple(str(a) for a in addresses),
            },
        )


@dataclass(frozen=True)
class Metadata:
    """Cluster metadata, as the broker that answered first sent it.

    ``answered_by`` is that broker's ``host:port`` (as the seeds or the earlier metadata
    named it), ``attempts`` every attempt of the refresh that got it, and ``seeds`` the seeds
    the session was given (as given), when known (``metadata()``, ``bootstrap_servers()`` and
    the clients set all three; ``Session.metadata()`` only ``answered_by``)."""

    brokers: Tuple[Broker, ...]
    topics: Tuple[Topic, ...]
    cluster_id: Optional[str] = None
    controller_id: int = -1
    error_code: int = 0
    answered_by: Optional[str] = None
    attempts: Tuple[AttemptReport, ...] = field(default=(), compare=False)
    seeds: Tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def from_json(
        cls,
        doc: Mapping[str, Any],
        answered_by: Optional[str] = None,
        attempts: Tuple[AttemptReport, ...] = (),
        seeds: Tuple[str, ...] = (),
    ) -> "Metadata":
        brokers = tuple(
            _built(Broker, {"node_id": int(b["node_id"]), "host": str(b["host"]), "port": int(b["port"]), "rack": b.get("rack")})
            for b in doc.get("brokers", ())
        )
        topics = tuple(
            _built(
                Topic,
                {
                    "name": str(t.get("name")),
                    "partitions": tuple(
                        _built(
                            Partition,
                            {
                                "id": int(p["id"]),
                                "leader": int(p.get("leader", -1)),
                                "replicas": tuple(p.get("replicas", ())),
                                "isr": tuple(p.get("isr", ())),
                                "error_code": int(p.get("error_code", 0)),
                            },
                        )
                        for p in t.get("partitions", ())
                    ),
                    "error_code": int(t.get("error_code", 0)),
                    "is_internal": bool(t.get("is_internal", False)),
                },
            )
            for t in doc.get("topics", ())
        )
        return _built(
            cls,
            {
                "brokers": brokers,
                "topics": topics,
                "cluster_id": doc.get("cluster_id"),
                "controller_id": int(doc.get("controller_id", -1)),
                "error_code": int(doc.get("error_code", 0)),
                "answered_by": answered_by,
                "attempts": attempts,
                "seeds": tuple(seeds),
            },
        )

    def broker(self, node_id: int) -> Optional[Broker]:
        """The broker with this node id, if listed."""
        return next((b for b in self.brokers if b.node_id == node_id), None)

    def topic(self, name: str) -> Optional[Topic]:
        """The topic of this name, if listed."""
        return next((t for t in self.topics if t.name == name), None)

    def bootstrap_servers(self) -> List[str]:
        """An ordered ``bootstrap_servers`` list for another Kafka client, without duplicates:
        ``answered_by``, the broker that answered first; then every other broker the cluster
        lists (its advertised address, in ``brokers`` order) and every seed of ``seeds`` (as
        given), leaving out each address stagger saw failing in this refresh: one with an
        attempt (``attempts``, matched on the exact ``broker`` string) whose ``outcome`` is
        ``failed``, or ``cancelled`` before the broker answered anything (``answered_ms`` is
        ``None``) though it started no later than the winning attempt: it had at least the
        winner's whole time and stayed silent (hung or blackholed).

        A broker whose attempt was cancelled after it answered (it was only slower than the
        one that answered first) stays, and so does every broker and seed stagger did not try.
        So does a broker whose attempt started after the winning one: it had less time than
        the winner took, so its silence says nothing of it.
        The failing ones are left out rather than put last because Kafka's metadata still
        lists a hung broker (a stopped process stays registered until its session times out)
        and aiokafka (like franz-go and sarama) starts at a random seed of the list it is
        given: a hung broker anywhere in it would still cost it a whole timeout now and then.
        The list is what this one refresh saw; it does not follow a broker that comes back or
        fails later."""
        won = [a.started_ms for a in self.attempts if a.outcome == "won"]
        failing = {
            a.broker
            for a in self.attempts
            if a.outcome == "failed"
            or (a.outcome == "cancelled" and a.answered_ms is None and (not won or a.started_ms <= won[0]))
        }
        out: List[str] = []
        if self.answered_by:
            # It answered: first, whatever an earlier attempt to it in the refresh did.
            out.append(self.answered_by)
        seen = set(out)
        for candidate in [b.address for b in self.brokers] + list(self.seeds):
            if candidate and candidate not in failing and candidate not in seen:
                seen.add(candidate)
                out.append(candidate)
        return out


@dataclass(frozen=True)
class AttemptError:
    """An attempt's error: its kind (``refused``, ``connect_timeout``, ``broker_error``, ...),
    the Kafka code for a broker error, the detail, and the whole in words. On a
    ``RefreshError.last_error`` also the broker's index and address."""

    kind: str
    message: str
    detail: str = ""
    code: Optional[int] = None
    address: Optional[str] = None
    broker: Optional[int] = None

    @classmethod
    def from_json(cls, e: Mapping[str, Any]) -> "AttemptError":
        return cls(
            kind=str(e.get("kind", "")),
            message=str(e.get("message", "")),
            detail=str(e.get("detail") or ""),
            code=e.get("code"),
            address=e.get("address"),
            broker=e.get("broker"),
        )

    def __str__(self) -> str:
        return f"{self.address}: {self.message}" if self.address else self.message


@dataclass(frozen=True)
class BrokerFailure:
    """One broker's part in a refresh that gave up: how many attempts, its last error, why
    the policy cancelled its latest attempt (if it did), and its line in words."""

    broker: int
    address: str
    attempts: int
    error: Optional[AttemptError]
    cancelled: Optional[str]
    story: str

    @classmethod
    def from_json(cls, b: Mapping[str, Any]) -> "BrokerFailure":
        error = b.get("error")
        return cls(
            broker=int(b.get("broker", 0)),
            address=str(b.get("address", "")),
            attempts=int(b.get("attempts", 0)),
            error=None if error is None else AttemptError.from_json(error),
            cancelled=b.get("cancelled"),
            story=str(b.get("story", "")),
        )


@dataclass(frozen=True)
class RefreshRecord:
    """One refresh as the report tells it: its epoch, cause, times (host ns), outcome
    (``refreshed``, ``failed``, ``running``), the winner's address and every attempt."""

    epoch: int
    cause: str
    started_ns: int
    ended_ns: Optional[int]
    outcome: str
    winner: Optional[str]
    attempts: Tuple[AttemptReport, ...]
    error: Optional[Dict[str, Any]] = None
    stats: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, r: Mapping[str, Any]) -> "RefreshRecord":
        winner = r.get("winner")
        return cls(
            epoch=int(r.get("epoch", 0)),
            cause=str(r.get("cause", "")),
            started_ns=int(r.get("started_ns") or 0),
            ended_ns=r.get("ended_ns"),
            outcome=str(r.get("outcome", "")),
            winner=winner.get("address") if isinstance(winner, dict) else None,
            attempts=tuple(AttemptReport.from_json(a) for a in r.get("attempts", ())),
            error=r.get("error"),
            stats=dict(r.get("stats") or {}),
        )


@dataclass(frozen=True)
class SessionStats:
    """What a session has done: refreshes, attempts, connections opened and reused, losers'
    connections kept as spares, the kept connection's broker, the connections kept now,
    rebootstraps."""

    refreshes: int = 0
    attempts: int = 0
    connections_opened: int = 0
    connections_reused: int = 0
    spares_kept: int = 0
    kept: Optional[str] = None
    kept_connections: int = 0
    rebootstraps: int = 0

    @classmethod
    def from_json(cls, s: Mapping[str, Any]) -> "SessionStats":
        return cls(
            refreshes=int(s.get("refreshes", 0)),
            attempts=int(s.get("attempts", 0)),
            connections_opened=int(s.get("connections_opened", 0)),
            connections_reused=int(s.get("connections_reused", 0)),
            spares_kept=int(s.get("spares_kept", 0)),
            kept=s.get("kept"),
            kept_connections=int(s.get("kept_connections", 0)),
            rebootstraps=int(s.get("rebootstraps", 0)),
        )


@dataclass(frozen=True)
class Report:
    """A session's report: counters, the refresh running, the last one finished (with every
    attempt), open and kept connections, buffered bytes, ignored events."""

    stats: SessionStats
    running: Optional[RefreshRecord]
    last_refresh: Optional[RefreshRecord]
    open_connections: Tuple[int, ...] = ()
    kept_connection: Optional[int] = None
    buffered_bytes: int = 0
    ignored_events: int = 0

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Report":
        running, last = doc.get("running"), doc.get("last_refresh")
        return cls(
            stats=SessionStats.from_json(doc.get("stats") or {}),
            running=None if running is None else RefreshRecord.from_json(running),
            last_refresh=None if last is None else RefreshRecord.from_json(last),
            open_connections=tuple(doc.get("open_connections") or ()),
            kept_connection=doc.get("kept_connection"),
            buffered_bytes=int(doc.get("buffered_bytes") or 0),
            ignored_events=int(doc.get("ignored_events") or 0),
        )
