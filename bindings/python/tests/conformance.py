"""The conformance files (conformance/README.md) read for the Python host: each step's events
as ``stagger`` events, and the scenario's config as ``Session`` takes it.

``tests/test_conformance.py`` replays the files with it and ``bench/boundary.py`` times the
same replay, so both read a file one way. It lives beside the tests, not in the package: the
wheel ships nothing for reading these files (``bench/boundary.py`` puts this directory on its
``sys.path``).
"""

from __future__ import annotations

import json
from typing import Any, Dict, Tuple

import stagger
from stagger import (
    Cause,
    Closed,
    Connected,
    ErrorKind,
    IoError,
    Nonce,
    Received,
    RequestRefresh,
    Resolved,
    ResolveFailed,
    Secured,
    Token,
    TokenFailed,
)

class ScenarioConfig:
    """The scenario's config JSON, handed to the library exactly as the file holds it. A
    ``SessionConfig`` would rebuild it from its options; ``Session`` needs only ``to_json()``
    (and ``seeds``, for its repr)."""

    def __init__(self, doc: Dict[str, Any]) -> None:
        self.json = json.dumps(doc).encode()
        self.seeds = list(doc.get("seeds", []))

    def to_json(self) -> bytes:
        return self.json


def _address(text: str) -> Tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host.strip("[]"), int(port)


def event_of(obj: Dict[str, Any]) -> stagger.Event:
    """A file's event as a ``stagger`` event."""
    ((kind, f),) = obj.items()
    if kind == "connected":
        return Connected(f["conn"])
    if kind == "secured":
        return Secured(f["conn"])
    if kind == "received":
        return Received(f["conn"], bytes.fromhex(f["hex"]))
    if kind == "closed":
        return Closed(f["conn"], f["reset"])
    if kind == "io_error":
        return IoError(f["conn"], ErrorKind[f["kind"].upper()], f["detail"], f["code"])
    if kind == "resolved":
        return Resolved(f["lookup"], tuple(_address(a) for a in f["addresses"]))
    if kind == "resolve_failed":
        return ResolveFailed(f["lookup"], ErrorKind[f["kind"].upper()], f["detail"], f["code"])
    if kind == "nonce":
        return Nonce(f["conn"], bytes.fromhex(f["hex"]))
    if kind == "token":
        return Token(f["conn"], f["token"])
    if kind == "token_failed":
        return TokenFailed(f["conn"], f["why"])
    if kind == "request_refresh":
        return RequestRefresh(Cause[f["cause"].upper()], f["broker"])
    raise ValueError(f"unknown event {kind!r}")

