"""The sans-IO session: bytes and time in, actions out, for anyone with their own loop (trio,
gevent, a selector loop, a simulator). It never touches a socket, a clock or the OS's
randomness: ``now_ns`` comes from the caller (any monotonic clock in nanoseconds, such as
``time.monotonic_ns()``), nonces and tokens come in as events.

The loop (docs/abi.md, "The host loop")::

    session = Session(SessionConfig(seeds=["127.0.0.1:9092"], one_shot=True))
    events = [RequestRefresh(Cause.BOOTSTRAP)]
    while True:
        actions, next_wakeup_ns = session.step(time.monotonic_ns(), events)
        events = []
        for action in actions:          # in order
            ...                         # Dial -> Connected/Secured or IoError; Send; Close;
                                        # NeedNonce -> Nonce(conn, os.urandom(18)); ...
                                        # Refreshed -> session.metadata(); RefreshFailed
        # wait for I/O or until next_wakeup_ns (None: until I/O), collecting events

Each step answers with every action there is; between steps the session asks nothing.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, Iterable, Optional

from . import _abi, _wire
from ._config import SessionConfig
from ._types import Metadata, Report
from ._wire import Actions, Event

__all__ = ["Session"]


class Session:
    """One stagger session over the native library: the policy, the Kafka conversation
    (ApiVersions, SASL, Metadata), connection keeping and reports, all inside.

    ``seed`` seeds its randomness (jitter, the shuffled order of the seeds); by
    default 8 bytes of ``os.urandom``. The same config, seed and events give the same actions.
    A session is freed by ``close()``, by leaving a ``with`` block, or when collected.
    Calls are serialised by a lock, so a session may be shared between threads.
    """

    def __init__(self, config: SessionConfig, *, now_ns: Optional[int] = None, seed: Optional[int] = None) -> None:
        if now_ns is None:
            now_ns = time.monotonic_ns()
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        self._handle = _abi.Handle(config.to_json(), now_ns, seed)
        self.config = config

    def step(self, now_ns: int, events: Iterable[Event] = ()) -> Actions:
        """One wake-up: the time and everything that happened since the last step, in; every
        action to carry out (in order) and when to step next, out: ``(actions,
        next_wakeup_ns)``, ``next_wakeup_ns`` ``None`` when nothing is due until an event.

        A malformed batch raises ``MalformedBatchError`` and changes nothing."""
        events = events if isinstance(events, (list, tuple)) else list(events)
        batch = _wire.encode_events(events) if events else b""
        return _wire.decode_actions(self._handle.step(now_ns, batch))

    def step_raw(self, now_ns: int, batch: bytes) -> bytes:
        """``step`` with an encoded event batch in and the encoded action batch out (for
        hosts that keep their own codec, and for replaying recorded batches)."""
        return self._handle.step(now_ns, batch)

    def metadata(self, answered_by: Optional[str] = None) -> Optional[Metadata]:
        """The latest metadata (``None`` before the first successful refresh)."""
        doc = json.loads(self._handle.metadata_json())
        return None if doc is None else Metadata.from_json(doc, answered_by=answered_by)

    def report(self) -> Report:
        """Counters, the refresh running, the last one finished with every attempt."""
        return Report.from_json(json.loads(self._handle.report_json()))

    def report_json(self) -> Dict[str, Any]:
        """The report as the library writes it (docs/abi.md, "Report")."""
        doc: Dict[str, Any] = json.loads(self._handle.report_json())
        return doc

    def close(self) -> None:
        """Frees the session. Its connections are the host's to close."""
        self._handle.free()

    @property
    def closed(self) -> bool:
        return not self._handle.handle

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"handle={self._handle.handle}"
        return f"<stagger.Session {state} seeds={list(self.config.seeds)!r}>"
