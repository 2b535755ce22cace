"""The two batch encodings of the ABI (docs/abi.md), the host's side: events as a host writes
them, actions as a host reads them. A mirror of ``abi/src/host.rs`` in pure Python, so it is
usable (and testable) without the native library.

Every number comes from ``abi/src/codes.rs``; a test checks each against the constants the
native library's header exports, so the two cannot drift.

Reprs never show a token, a nonce or the bytes of a SEND or RECEIVED (SASL frames carry
credentials): only their length.
"""

from __future__ import annotations

import enum
import ipaddress
import struct
from dataclasses import dataclass, field
from typing import Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

__all__ = [
    "ABI_VERSION",
    "NO_WAKEUP",
    "DEFAULT_MAX_FRAME_SIZE",
    "ErrorKind",
    "Cause",
    "Connected",
    "Secured",
    "Received",
    "Closed",
    "IoError",
    "Resolved",
    "ResolveFailed",
    "Nonce",
    "Token",
    "TokenFailed",
    "RequestRefresh",
    "RawEvent",
    "Event",
    "Dial",
    "Send",
    "Close",
    "Resolve",
    "NeedNonce",
    "NeedToken",
    "Refreshed",
    "RefreshFailed",
    "Rebootstrapped",
    "RefreshRequested",
    "Action",
    "Actions",
    "BatchError",
    "encode_events",
    "decode_actions",
]

#: ``STAGGER_ABI_VERSION``: the functions, signatures and byte layouts this package speaks.
ABI_VERSION = 1
#: ``STAGGER_NO_WAKEUP``: an action batch's next wake-up when nothing is ever due.
NO_WAKEUP = 0xFFFF_FFFF_FFFF_FFFF
#: ``STAGGER_DEFAULT_MAX_FRAME_SIZE``: the default largest response frame (32 MiB).
DEFAULT_MAX_FRAME_SIZE = 33_554_432
#: The longest error detail a session keeps (longer ones are cut there).
MAX_DETAIL = 1024
#: The bytes of a SCRAM nonce (``NONCE`` events).
NONCE_LEN = 18


class ErrorKind(enum.IntEnum):
    """Why an attempt failed: the kind byte of ``IO_ERROR`` and ``RESOLVE_FAILED``
    (``STAGGER_ERROR_*``). The policy reads it: a refused connection moves on at once."""

    DNS = 1
    REFUSED = 2
    CONNECT_TIMEOUT = 3
    RESPONSE_TIMEOUT = 4
    CLOSED = 5
    PROTOCOL = 6
    FRAME_TOO_LARGE = 7
    BROKER = 8
    NO_BROKERS = 9
    TLS = 10
    AUTHENTICATION = 11
    AUTHORIZATION = 12
    IO = 13


class Cause(enum.IntEnum):
    """Why a refresh is asked for (``STAGGER_CAUSE_*``): the policy is gentle after a
    failover (``STALE_METADATA``, ``CONNECTION_LOST``: every client sees it at once) and quick
    after one client's evidence of a hung broker (``REQUEST_TIMED_OUT``)."""

    REQUESTED = 0
    BOOTSTRAP = 1
    PERIODIC = 2
    STALE_METADATA = 3
    CONNECTION_LOST = 4
    REQUEST_TIMED_OUT = 5


class _EventKind(enum.IntEnum):
    CONNECTED = 1
    SECURED = 2
    RECEIVED = 3
    CLOSED = 4
    IO_ERROR = 5
    RESOLVED = 6
    RESOLVE_FAILED = 7
    NONCE = 8
    TOKEN = 9
    TOKEN_FAILED = 10
    REQUEST_REFRESH = 11


class _ActionKind(enum.IntEnum):
    DIAL = 1
    SEND = 2
    CLOSE = 3
    RESOLVE = 4
    NEED_NONCE = 5
    NEED_TOKEN = 6
    REFRESHED = 7
    REFRESH_FAILED = 8
    REBOOTSTRAPPED = 9
    REFRESH_REQUESTED = 10


# ---------------------------------------------------------------------------------------------
# Events (host -> session)


@dataclass(frozen=True)
class Connected:
    """The TCP connection of a ``DIAL`` is up."""

    conn: int


@dataclass(frozen=True)
class Secured:
    """Its TLS handshake completed (sessions with ``tls``); then send what was queued."""

    conn: int


@dataclass(frozen=True)
class Received:
    """Bytes read from a connection, raw, in whatever pieces the socket gave."""

    conn: int
    data: bytes = field(repr=False)

    def __repr__(self) -> str:
        return f"Received(conn={self.conn}, <{len(self.data)} bytes>)"


@dataclass(frozen=True)
class Closed:
    """The peer ended the connection: cleanly (end of stream) or with a reset."""

    conn: int
    reset: bool = False


@dataclass(frozen=True)
class IoError:
    """Dialling, reading, writing or TLS failed; the host has dropped the connection.
    ``code`` is the Kafka error code when ``kind`` is ``BROKER``."""

    conn: int
    kind: ErrorKind
    detail: str = ""
    code: int = 0


@dataclass(frozen=True)
class Resolved:
    """The addresses a ``RESOLVE`` found, each ``(ip, port)``."""

    lookup: int
    addresses: Tuple[Tuple[str, int], ...]


@dataclass(frozen=True)
class ResolveFailed:
    """A ``RESOLVE`` failed (kind ``DNS``, usually)."""

    lookup: int
    kind: ErrorKind
    detail: str = ""
    code: int = 0


@dataclass(frozen=True)
class Nonce:
    """The answer to ``NEED_NONCE``: 18 random bytes from the OS (``os.urandom``)."""

    conn: int
    nonce: bytes = field(repr=False)

    def __repr__(self) -> str:
        return f"Nonce(conn={self.conn}, <redacted>)"


@dataclass(frozen=True)
class Token:
    """The answer to ``NEED_TOKEN``: an OAUTHBEARER token."""

    conn: int
    token: str = field(repr=False)

    def __repr__(self) -> str:
        return f"Token(conn={self.conn}, <redacted>)"


@dataclass(frozen=True)
class TokenFailed:
    """No token for ``NEED_TOKEN``: fails that attempt (fatal for the refresh)."""

    conn: int
    why: str


@dataclass(frozen=True)
class RequestRefresh:
    """Ask for fresh metadata, saying why and, optionally, which broker (``host:port``, as
    the session's actions named it) was in trouble: it is tried last. Answered by
    ``RefreshRequested`` with the refresh's epoch (a running refresh is joined)."""

    cause: Cause = Cause.REQUESTED
    broker: str = ""


@dataclass(frozen=True)
class RawEvent:
    """Any record, raw: for tests of what the session does with malformed input."""

    kind: int
    body: bytes = field(repr=False)

    def __repr__(self) -> str:
        return f"RawEvent(kind={self.kind}, <{len(self.body)} bytes>)"


Event = Union[
    Connected,
    Secured,
    Received,
    Closed,
    IoError,
    Resolved,
    ResolveFailed,
    Nonce,
    Token,
    TokenFailed,
    RequestRefresh,
    RawEvent,
]

# ---------------------------------------------------------------------------------------------
# Actions (session -> host)


@dataclass(frozen=True)
class Dial:
    """Open a connection to ``address`` (``host:port``), call it ``conn``; with TLS, verify
    the certificate against ``server_name`` (use it as ``server_hostname``)."""

    conn: int
    address: str
    server_name: Optional[str] = None

    @property
    def tls(self) -> bool:
        return self.server_name is not None


@dataclass(frozen=True)
class Send:
    """Write ``data`` on ``conn`` after everything sent before (queue it until the connection
    is up). SASL requests carry credentials: never log the bytes."""

    conn: int
    data: bytes = field(repr=False)

    def __repr__(self) -> str:
        return f"Send(conn={self.conn}, <{len(self.data)} bytes>)"


@dataclass(frozen=True)
class Close:
    """Close ``conn`` and forget it; later events about it are ignored."""

    conn: int


@dataclass(frozen=True)
class Resolve:
    """Look ``name`` (``host:port``) up; answer ``Resolved`` or ``ResolveFailed``."""

    lookup: int
    name: str


@dataclass(frozen=True)
class NeedNonce:
    """Answer ``Nonce(conn, os.urandom(18))``."""

    conn: int


@dataclass(frozen=True)
class NeedToken:
    """Answer ``Token`` or ``TokenFailed`` (OAUTHBEARER with ``fresh_tokens``)."""

    conn: int


@dataclass(frozen=True)
class Refreshed:
    """The refresh ``epoch`` succeeded; the session's ``metadata()`` has its answer.
    ``broker`` is the answering broker's index in the session's book, ``address`` its
    ``host:port``."""

    epoch: int
    broker: int
    address: str


@dataclass(frozen=True)
class RefreshFailed:
    """The refresh ``epoch`` gave up; ``error`` is the JSON of the last error and every
    broker's (``RefreshError.from_json`` reads it)."""

    epoch: int
    error: str


@dataclass(frozen=True)
class Rebootstrapped:
    """News: the session forgot the brokers it had discovered and starts from the seeds."""


@dataclass(frozen=True)
class RefreshRequested:
    """The epoch a ``RequestRefresh`` joined or started (one per such event, in order)."""

    epoch: int


Action = Union[
    Dial, Send, Close, Resolve, NeedNonce, NeedToken, Refreshed, RefreshFailed, Rebootstrapped, RefreshRequested
]


class Actions(NamedTuple):
    """One step's answer: every action, in order, and when to step next (host ns, from the
    same clock as ``now_ns``), or ``None`` when nothing is due until an event comes."""

    actions: List[Action]
    next_wakeup_ns: Optional[int]


class BatchError(ValueError):
    """A batch that does not follow docs/abi.md: what and where."""


# ---------------------------------------------------------------------------------------------
# Encoding events

_U64 = struct.Struct("<Q")
_HEADER = struct.Struct("<HHI")
_RECORD = struct.Struct("<BI")
_ERROR = struct.Struct("<QBh")


def _addresses(addresses: Iterable[Tuple[str, int]]) -> bytes:
    out = bytearray()
    for host, port in addresses:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
        out.append(4 if ip.version == 4 else 6)
        out += ip.packed
        out += struct.pack("<H", port)
    return bytes(out)


def _body(event: Event) -> Tuple[int, bytes]:
    if isinstance(event, Connected):
        return _EventKind.CONNECTED, _U64.pack(event.conn)
    if isinstance(event, Secured):
        return _EventKind.SECURED, _U64.pack(event.conn)
    if isinstance(event, Received):
        return _EventKind.RECEIVED, _U64.pack(event.conn) + bytes(event.data)
    if isinstance(event, Closed):
        return _EventKind.CLOSED, _U64.pack(event.conn) + (b"\x01" if event.reset else b"\x00")
    if isinstance(event, IoError):
        return _EventKind.IO_ERROR, _ERROR.pack(event.conn, int(event.kind), event.code) + _detail(event.detail)
    if isinstance(event, Resolved):
        return _EventKind.RESOLVED, _U64.pack(event.lookup) + _addresses(event.addresses)
    if isinstance(event, ResolveFailed):
        return _EventKind.RESOLVE_FAILED, _ERROR.pack(event.lookup, int(event.kind), event.code) + _detail(event.detail)
    if isinstance(event, Nonce):
        if len(event.nonce) != NONCE_LEN:
            raise BatchError(f"a nonce is {NONCE_LEN} bytes, not {len(event.nonce)}")
        return _EventKind.NONCE, _U64.pack(event.conn) + bytes(event.nonce)
    if isinstance(event, Token):
        return _EventKind.TOKEN, _U64.pack(event.conn) + event.token.encode()
    if isinstance(event, TokenFailed):
        return _EventKind.TOKEN_FAILED, _U64.pack(event.conn) + _detail(event.why)
    if isinstance(event, RequestRefresh):
        return _EventKind.REQUEST_REFRESH, bytes([int(event.cause)]) + event.broker.encode()
    if isinstance(event, RawEvent):
        return event.kind, bytes(event.body)
    raise TypeError(f"not a stagger event: {type(event).__name__}")


def _detail(text: str) -> bytes:
    """UTF-8, cut at MAX_DETAIL bytes on a character boundary (the session would cut it too)."""
    raw = text.encode()
    if len(raw) <= MAX_DETAIL:
        return raw
    return raw[:MAX_DETAIL].decode(errors="ignore").encode()


def encode_events(events: Sequence[Event]) -> bytes:
    """One event batch (docs/abi.md, "Event batch")."""
    out = bytearray(_HEADER.pack(ABI_VERSION, 0, len(events)))
    for event in events:
        kind, body = _body(event)
        out += _RECORD.pack(kind, len(body))
        out += body
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# Decoding actions


_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


class _Reader:
    """Checked little-endian reads from ``data[at:end]``; ``where`` says, when a read fails,
    which record (its index, kind and offset: formatted only then)."""

    __slots__ = ("data", "at", "end", "index", "kind", "start")

    def __init__(self, data: bytes, at: int, end: int, index: int = -1, kind: int = 0) -> None:
        self.data, self.at, self.end = data, at, end
        self.index, self.kind, self.start = index, kind, at

    @property
    def where(self) -> str:
        if self.index < 0:
            return "action batch"
        if self.kind == 0:
            return f"action {self.index}"
        try:
            name = _ActionKind(self.kind).name
        except ValueError:
            name = str(self.kind)
        return f"action {self.index} ({name}) at byte {self.start - 5}"

    def _need(self, n: int, what: str) -> int:
        at = self.at
        if self.end - at < n:
            raise BatchError(f"{self.where}: {what} needs {n} bytes, {self.end - at} left (byte {at})")
        self.at = at + n
        return at

    def take(self, n: int, what: str) -> bytes:
        at = self._need(n, what)
        return self.data[at : at + n]

    def u8(self, what: str) -> int:
        return int(_U8.unpack_from(self.data, self._need(1, what))[0])

    def u16(self, what: str) -> int:
        return int(_U16.unpack_from(self.data, self._need(2, what))[0])

    def u32(self, what: str) -> int:
        return int(_U32.unpack_from(self.data, self._need(4, what))[0])

    def u64(self, what: str) -> int:
        return int(_U64.unpack_from(self.data, self._need(8, what))[0])

    def rest(self) -> bytes:
        piece = self.data[self.at : self.end]
        self.at = self.end
        return piece

    def text(self, what: str, n: Optional[int] = None) -> str:
        raw = self.take(self.end - self.at if n is None else n, what)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError:
            raise BatchError(f"{self.where}: {what} is not UTF-8") from None


def _action(kind: int, b: _Reader) -> Action:
    if kind == _ActionKind.DIAL:
        conn, tls = b.u64("conn"), b.u8("tls")
        if tls > 1:
            raise BatchError(f"{b.where}: tls is {tls}, not 0 or 1")
        address = b.text("the address", b.u16("the address length"))
        name = b.text("the server name")
        return Dial(conn, address, name if tls else None)
    if kind == _ActionKind.SEND:
        return Send(b.u64("conn"), b.rest())
    if kind == _ActionKind.CLOSE:
        return Close(b.u64("conn"))
    if kind == _ActionKind.RESOLVE:
        return Resolve(b.u64("lookup"), b.text("the name"))
    if kind == _ActionKind.NEED_NONCE:
        return NeedNonce(b.u64("conn"))
    if kind == _ActionKind.NEED_TOKEN:
        return NeedToken(b.u64("conn"))
    if kind == _ActionKind.REFRESHED:
        return Refreshed(b.u32("epoch"), b.u32("broker"), b.text("the address"))
    if kind == _ActionKind.REFRESH_FAILED:
        return RefreshFailed(b.u32("epoch"), b.text("the error"))
    if kind == _ActionKind.REBOOTSTRAPPED:
        return Rebootstrapped()
    if kind == _ActionKind.REFRESH_REQUESTED:
        return RefreshRequested(b.u32("epoch"))
    raise BatchError(f"{b.where}: unknown action kind {kind}")


def decode_actions(batch: Union[bytes, bytearray, memoryview]) -> Actions:
    """Reads an action batch (docs/abi.md, "Action batch"); refuses one that does not follow
    it with a ``BatchError`` saying where."""
    data = bytes(batch)
    try:
        return _decode_plain(data)
    except Exception:
        # Not a well-formed batch: the checked reader says where and why.
        return _decode_checked(data)


_BATCH_HEADER = struct.Struct("<HHIQ")
_DIAL = struct.Struct("<QBH")
_TWO_U32 = struct.Struct("<II")
_DIAL_KIND, _SEND_KIND, _CLOSE_KIND, _RESOLVE_KIND, _NEED_NONCE_KIND, _NEED_TOKEN_KIND = range(1, 7)
_REFRESHED_KIND, _REFRESH_FAILED_KIND, _REBOOTSTRAPPED_KIND, _REFRESH_REQUESTED_KIND = range(7, 11)


def _decode_plain(data: bytes) -> Actions:
    """``decode_actions`` for a well-formed batch, reading each record with one ``struct``
    call; anything it does not expect raises, and ``_decode_checked`` reads that batch."""
    end = len(data)
    version, flags, count, wakeup = _BATCH_HEADER.unpack_from(data, 0)
    if version != ABI_VERSION or flags != 0:
        raise BatchError("action batch: header")
    actions: List[Action] = []
    add = actions.append
    u64, u32, record = _U64.unpack_from, _U32.unpack_from, _RECORD.unpack_from
    at = 16
    for _ in range(count):
        kind, length = record(data, at)
        at += 5
        stop = at + length
        if stop > end:
            raise BatchError("action batch: short")
        if kind == _SEND_KIND and length >= 8:
            add(Send(u64(data, at)[0], data[at + 8 : stop]))
        elif kind == _DIAL_KIND and length >= 11:
            conn, tls, n = _DIAL.unpack_from(data, at)
            if tls > 1 or 11 + n > length:
                raise BatchError("action batch: dial")
            address = str(data[at + 11 : at + 11 + n], "utf-8")
            name = str(data[at + 11 + n : stop], "utf-8")
            add(Dial(conn, address, name if tls else None))
        elif kind == _CLOSE_KIND and length == 8:
            add(Close(u64(data, at)[0]))
        elif kind == _REFRESH_REQUESTED_KIND and length == 4:
            add(RefreshRequested(u32(data, at)[0]))
        elif kind == _REFRESHED_KIND and length >= 8:
            epoch, broker = _TWO_U32.unpack_from(data, at)
            add(Refreshed(epoch, broker, str(data[at + 8 : stop], "utf-8")))
        elif kind == _REFRESH_FAILED_KIND and length >= 4:
            add(RefreshFailed(u32(data, at)[0], str(data[at + 4 : stop], "utf-8")))
        elif kind == _RESOLVE_KIND and length >= 8:
            add(Resolve(u64(data, at)[0], str(data[at + 8 : stop], "utf-8")))
        elif kind == _NEED_NONCE_KIND and length == 8:
            add(NeedNonce(u64(data, at)[0]))
        elif kind == _NEED_TOKEN_KIND and length == 8:
            add(NeedToken(u64(data, at)[0]))
        elif kind == _REBOOTSTRAPPED_KIND and length == 0:
            add(Rebootstrapped())
        else:
            raise BatchError("action batch: record")
        at = stop
    if at != end:
        raise BatchError("action batch: bytes after")
    return Actions(actions, None if wakeup == NO_WAKEUP else wakeup)


def _decode_checked(data: bytes) -> Actions:
    """``decode_actions`` field by field, naming the record, field and byte where a batch
    departs from docs/abi.md."""
    r = _Reader(data, 0, len(data))
    version, flags, count = r.u16("the version"), r.u16("the flags"), r.u32("the count")
    if version != ABI_VERSION:
        raise BatchError(f"action batch: version {version}, this package speaks {ABI_VERSION}")
    if flags != 0:
        raise BatchError(f"action batch: flags {flags:#x}, none are defined")
    wakeup = r.u64("the next wake-up")
    actions: List[Action] = []
    for index in range(count):
        r.index = index
        kind, length = r.u8("the kind"), r.u32("the body length")
        start = r._need(length, "the body")
        body = _Reader(data, start, start + length, index, kind)
        actions.append(_action(kind, body))
        if body.at != body.end:
            raise BatchError(f"{body.where}: {body.end - body.at} bytes after the body's last field")
    if r.at != r.end:
        r.index = -1
        raise BatchError(f"action batch: {r.end - r.at} bytes after the last action")
    return Actions(actions, None if wakeup == NO_WAKEUP else wakeup)
