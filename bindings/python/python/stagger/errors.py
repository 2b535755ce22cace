"""Every exception of the package. ``StaggerError`` is the base of all of them.

* ``ConfigError``: refused before any broker was contacted (a bad seed, knob, topic, SASL
  setting, ...); ``field`` names the setting by its dotted path (``settings.fanout.jitter``).
* ``RefreshError``: the policy gave up; it carries the last error and every broker's, as the
  Rust API's ``ClientError::Refresh`` does.
* ``ClosedError``: the client was closed.
* ``AbiError`` and its kinds: the library refused a call (a malformed batch, an unknown or
  poisoned session, a panic); ``AbiVersionError``: the library speaks another ABI version.

No message quotes a password or a token: the library never puts one in its errors, and
nothing here adds one.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Tuple

from ._types import AttemptError, AttemptReport, BrokerFailure

__all__ = [
    "StaggerError",
    "ConfigError",
    "RefreshError",
    "ClosedError",
    "AbiError",
    "MalformedBatchError",
    "UnknownHandleError",
    "PoisonedError",
    "PanicError",
    "ArgumentError",
    "AbiVersionError",
]


class StaggerError(Exception):
    """The base of every stagger exception."""


class ConfigError(StaggerError, ValueError):
    """A setting was refused; ``field`` is its dotted path (``seeds[1]``, ``sasl.password``,
    ``settings.fanout.jitter``), or ``None``."""

    def __init__(self, message: str, field: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class ClosedError(StaggerError):
    """The client was closed (or its loop is gone) before an answer came."""


class RefreshError(StaggerError):
    """A refresh gave up: every broker failed in every pass, the deadline passed, or a broker
    refused the credentials (``reason``: ``all_failed``, ``deadline_exceeded``, ``fatal``).

    ``str()`` is the core's message, which names the last error and lists every broker's.
    ``last_error`` is the last attempt's error (with its broker's address), ``brokers`` every
    candidate in attempt order with its last error, and ``attempts`` every attempt's report.
    """

    def __init__(
        self,
        message: str,
        reason: str,
        passes: Optional[int],
        last_error: Optional[AttemptError],
        brokers: Tuple[BrokerFailure, ...],
        attempts: Tuple[AttemptReport, ...] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.passes = passes
        self.last_error = last_error
        self.brokers = brokers
        self.attempts = attempts

    @classmethod
    def from_json(cls, text: str, attempts: Tuple[AttemptReport, ...] = ()) -> "RefreshError":
        """From the body of a ``REFRESH_FAILED`` action (docs/abi.md, "Refresh error")."""
        try:
            doc = json.loads(text)
        except ValueError:
            doc = {"message": text}
        if not isinstance(doc, dict):
            doc = {"message": str(doc)}
        last = doc.get("last_error")
        return cls(
            message=str(doc.get("message", "metadata refresh failed")),
            reason=str(doc.get("reason", "")),
            passes=doc.get("passes"),
            last_error=None if last is None else AttemptError.from_json(last),
            brokers=tuple(BrokerFailure.from_json(b) for b in doc.get("brokers") or ()),
            attempts=attempts,
        )

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        last = self.last_error.kind if self.last_error else None
        return f"RefreshError(reason={self.reason!r}, last_error={last!r}, brokers={len(self.brokers)})"


class AbiError(StaggerError):
    """The library refused a call. ``status`` is its ``STAGGER_ERR_*`` code, ``error`` its
    name (``malformed_batch``, ``unknown_handle``, ``poisoned``, ``panic``, ``argument``)."""

    def __init__(self, message: str, status: int = 0, error: str = "", field: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error = error
        self.field = field


class MalformedBatchError(AbiError, ValueError):
    """An event batch did not follow docs/abi.md; nothing of it was applied."""


class UnknownHandleError(AbiError):
    """No session has this handle (never created, or freed)."""


class PoisonedError(AbiError):
    """The session panicked in an earlier call; build another."""


class PanicError(AbiError):
    """This call panicked (a bug in stagger: please report it); the session is poisoned."""


class ArgumentError(AbiError, ValueError):
    """An unusable argument reached the library (a bug in this package)."""


class AbiVersionError(StaggerError, ImportError):
    """The native library speaks another ABI version than this Python package."""


_BY_STATUS = {
    2: MalformedBatchError,
    3: UnknownHandleError,
    4: PoisonedError,
    5: PanicError,
    6: ArgumentError,
}


def error_from_status(status: int, error: Mapping[str, Any]) -> StaggerError:
    """The exception for a status and the library's error JSON."""
    message = str(error.get("message") or f"stagger call failed with status {status}")
    field = error.get("field")
    if status == 1:
        return ConfigError(message, field)
    kind = _BY_STATUS.get(status, AbiError)
    return kind(message, status=status, error=str(error.get("error", "")), field=field)
