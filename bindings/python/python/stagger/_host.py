"""The session's host over asyncio: carries out its actions (dial, TLS, send, close, look a
name up, a nonce from the OS, a token from the token source) and reports what the sockets did.
It decides nothing and speaks no Kafka: the session does both. It adds no timeouts of its
own: attempt timeouts, the stagger, backoff and the deadline are the session's timers, and
when the session gives up on a connection it says ``Close``.

One host drives one session. Its callers (the one-shot ``metadata()``, the ``AsyncClient``'s
background task) alternate ``step()`` and ``await wait()``; connections are asyncio
protocols that queue events and wake the loop.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import socket
import ssl as _ssl
import time
from collections import deque
from typing import Any, Callable, Coroutine, Deque, Dict, List, Optional, Set, Tuple, Union, cast

from . import _wire
from ._types import AttemptReport, Metadata
from ._wire import (
    Cause,
    Close,
    Closed,
    Connected,
    Dial,
    ErrorKind,
    IoError,
    NeedNonce,
    NeedToken,
    Nonce,
    Rebootstrapped,
    Received,
    Refreshed,
    RefreshFailed,
    RefreshRequested,
    RequestRefresh,
    Resolve,
    Resolved,
    ResolveFailed,
    Secured,
    Send,
    Token,
    TokenFailed,
)
from .errors import ClosedError, RefreshError
from .session import Session

log = logging.getLogger("stagger")

Outcome = Union[Metadata, BaseException]


def split_address(address: str) -> Tuple[str, int]:
    """``host:port`` (``[v6]:port``) into its parts."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{address!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def connect_error_kind(e: BaseException) -> ErrorKind:
    """How the policy should read a failed connect (docs/abi.md, "Codes"): a refusal moves on
    at once, a timeout is a timeout, a name that does not resolve is DNS."""
    if isinstance(e, ConnectionRefusedError):
        return ErrorKind.REFUSED
    if isinstance(e, socket.gaierror):
        return ErrorKind.DNS
    if isinstance(e, TimeoutError):
        return ErrorKind.CONNECT_TIMEOUT
    if isinstance(e, (_ssl.SSLError, _ssl.CertificateError)):
        return ErrorKind.TLS
    return ErrorKind.IO


def _handshake_kind(e: BaseException) -> ErrorKind:
    """The kind of a failed TLS handshake: ``TLS`` when the ``ssl`` module refused the peer
    (its certificate, an alert, bytes that are not TLS), which the next pass would meet again
    and so ends the refresh when every broker of a pass does it; ``CLOSED`` when the broker
    closed or reset the connection under it and ``IO`` when the socket failed otherwise,
    which a next pass may not meet."""
    if isinstance(e, (_ssl.SSLEOFError, _ssl.SSLZeroReturnError, ConnectionError, EOFError)):
        return ErrorKind.CLOSED
    if isinstance(e, (_ssl.SSLError, _ssl.CertificateError)):
        return ErrorKind.TLS
    return ErrorKind.IO


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and not isinstance(e, _ssl.SSLError) and e.errno and e.strerror:
        return e.strerror if isinstance(e, socket.gaierror) else os.strerror(e.errno)
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def refresh_outcome(session: Session, action: Union[Refreshed, RefreshFailed]) -> Outcome:
    """What the callers of a refresh get when it ends: the session's metadata with the broker
    that answered and the refresh's attempts, or the ``RefreshError`` with them."""
    attempts = _attempts(session, action.epoch)
    if isinstance(action, RefreshFailed):
        return RefreshError.from_json(action.error, attempts)
    doc = json.loads(session._handle.metadata_json())
    if doc is None:  # pragma: no cover - REFRESHED always follows a success
        return ClosedError("the session has no metadata")
    return Metadata.from_json(doc, answered_by=action.address, attempts=attempts, seeds=tuple(session.config.seeds))


def _attempts(session: Session, epoch: int) -> Tuple[AttemptReport, ...]:
    """The attempts of the refresh ``epoch``, if it is the report's last one (the rows of
    ``Report.last_refresh.attempts``, without reading the rest of the report)."""
    last = session.report_json().get("last_refresh")
    if last is None or int(last.get("epoch", 0)) != epoch:
        return ()
    return tuple(AttemptReport.from_json(a) for a in last.get("attempts", ()))


class _Conn(asyncio.Protocol):
    """One connection: an asyncio protocol that reports to its host."""

    def __init__(self, host: "Host", conn: int) -> None:
        self.host = host
        self.id = conn
        self.transport: Optional[asyncio.Transport] = None
        self.ready = False
        self.pending: List[bytes] = []
        self.task: Optional["asyncio.Task[None]"] = None
        self.done = False  # reported closed or failed, or closed by the session

    def send(self, data: bytes) -> None:
        if self.ready and self.transport is not None:
            self.transport.write(data)
        else:
            self.pending.append(data)

    def close(self) -> None:
        """The session's ``Close``: end it at once (no flush, no TLS close_notify to wait
        for: a loser may be a hung broker), report nothing more."""
        self.done = True
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.transport is not None:
            self.transport.abort()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.done:
            self.host.received(self.id, data)

    def eof_received(self) -> bool:
        if not self.done:
            self.done = True
            self.host.lost(self.id, Closed(self.id, reset=False))
        return False  # close the transport

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        if self.done or not self.ready:
            # Before it is ready, the dialling task reports (it sees the same failure).
            return
        self.done = True
        if exc is None:
            event: _wire.Event = Closed(self.id, reset=False)
        elif isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            event = Closed(self.id, reset=True)
        elif isinstance(exc, _ssl.SSLError):
            event = IoError(self.id, ErrorKind.TLS, _describe(exc))
        else:
            event = IoError(self.id, ErrorKind.IO, _describe(exc))
        self.host.lost(self.id, event)


class Host:
    """Carries out one session's actions on the running event loop."""

    def __init__(
        self,
        session: Session,
        *,
        ssl_context: Optional[_ssl.SSLContext] = None,
        token_source: Optional[Callable[[], object]] = None,
        on_end: Optional[Callable[[int, Outcome], None]] = None,
    ) -> None:
        self.session = session
        self.loop = asyncio.get_running_loop()
        self.ssl_context = ssl_context
        self.token_source = token_source
        self.on_end = on_end
        self.conns: Dict[int, _Conn] = {}
        self.tasks: Set["asyncio.Task[None]"] = set()
        # What happened since the last step: events, and markers ("rx", conn) where bytes
        # received on conn go (gathered in self.rx, so a burst of reads is one event).
        self.events: List[object] = []
        self.rx: Dict[int, bytearray] = {}
        self.wake = asyncio.Event()
        self.next_wakeup_ns: Optional[int] = None
        self.requests: Deque["asyncio.Future[Metadata]"] = deque()
        self.waiting: Dict[int, List["asyncio.Future[Metadata]"]] = {}
        self.closed = False

    # --- callers ----------------------------------------------------------------------------

    def request(self, cause: Cause = Cause.REQUESTED, broker: Optional[str] = None) -> "asyncio.Future[Metadata]":
        """Asks for fresh metadata (joining a running refresh); the future gets the metadata
        or the ``RefreshError``."""
        if self.closed:
            raise ClosedError("the stagger client is closed")
        future: "asyncio.Future[Metadata]" = self.loop.create_future()
        self.requests.append(future)
        self.push(RequestRefresh(Cause(cause), broker or ""))
        return future

    def step(self) -> None:
        """Steps the session with everything that happened and the time, carries out the
        actions, and steps again at once while that produced events (nonces, tokens)."""
        while True:
            self.wake.clear()  # everything that woke it is in this step
            events = self._take_events()
            actions, self.next_wakeup_ns = self.session.step(time.monotonic_ns(), events)
            if log.isEnabledFor(logging.DEBUG) and (events or actions):
                log.debug("step: %r -> %r (next wake-up %s)", events, actions, self.next_wakeup_ns)
            for action in actions:
                self._act(action)
            if not self.events:
                return

    async def wait(self) -> None:
        """Until something happened or the session's next wake-up is due."""
        if self.events:
            return
        timer = None
        if self.next_wakeup_ns is not None:
            delay = max(0.0, (self.next_wakeup_ns - time.monotonic_ns()) / 1e9)
            timer = self.loop.call_later(delay, self.wake.set)
        try:
            await self.wake.wait()
        finally:
            if timer is not None:
                timer.cancel()
            self.wake.clear()

    def close(self, error: Optional[BaseException] = None) -> List["asyncio.Task[None]"]:
        """Closes every connection, stops every lookup and token fetch, answers every waiting
        caller (``ClosedError``, or ``error``) and frees the session. Returns the tasks it
        cancelled (``aclose`` waits for them)."""
        if self.closed:
            return []
        self.closed = True
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()
        cancelled = list(self.tasks)
        for task in cancelled:
            task.cancel()
        self.tasks.clear()
        error = error or ClosedError("the stagger client is closed")
        for future in list(self.requests) + [f for fs in self.waiting.values() for f in fs]:
            if not future.done():
                future.set_exception(error)
        self.requests.clear()
        self.waiting.clear()
        self.session.close()
        return cancelled

    async def aclose(self, error: Optional[BaseException] = None) -> None:
        """``close``, then waits until the cancelled dials, lookups and token fetches have
        ended and the sockets are closed."""
        cancelled = self.close(error)
        if cancelled:
            await asyncio.gather(*cancelled, return_exceptions=True)
        await asyncio.sleep(0)  # the transports' connection_lost callbacks close the sockets

    # --- what the connections say ------------------------------------------------------------

    def push(self, event: object) -> None:
        self.events.append(event)
        self.wake.set()

    def received(self, conn: int, data: bytes) -> None:
        buf = self.rx.get(conn)
        if buf is None:
            self.rx[conn] = bytearray(data)
            self.push(("rx", conn))
        else:
            buf += data

    def lost(self, conn: int, event: _wire.Event) -> None:
        self.conns.pop(conn, None)
        self.push(event)

    def _take_events(self) -> List[_wire.Event]:
        out: List[_wire.Event] = []
        for e in self.events:
            if isinstance(e, tuple):
                out.append(Received(e[1], bytes(self.rx.pop(e[1], b""))))
            else:
                out.append(e)  # type: ignore[arg-type]
        self.events = []
        return out

    # --- carrying out actions ----------------------------------------------------------------

    def _act(self, action: _wire.Action) -> None:
        if isinstance(action, Send):
            conn = self.conns.get(action.conn)
            if conn is not None:
                conn.send(action.data)
        elif isinstance(action, Dial):
            conn = _Conn(self, action.conn)
            self.conns[action.conn] = conn
            conn.task = self._spawn(self._dial(conn, action.address, action.server_name))
        elif isinstance(action, Close):
            conn = self.conns.pop(action.conn, None)
            if conn is not None:
                conn.close()
            self.rx.pop(action.conn, None)
        elif isinstance(action, NeedNonce):
            self.events.append(Nonce(action.conn, os.urandom(_wire.NONCE_LEN)))
        elif isinstance(action, NeedToken):
            self._token(action.conn)
        elif isinstance(action, Resolve):
            self._spawn(self._resolve(action.lookup, action.name))
        elif isinstance(action, RefreshRequested):
            if self.requests:
                self.waiting.setdefault(action.epoch, []).append(self.requests.popleft())
        elif isinstance(action, (Refreshed, RefreshFailed)):
            self._end(action.epoch, refresh_outcome(self.session, action))
        elif isinstance(action, Rebootstrapped):
            log.info("stagger: back to the seed brokers (rebootstrap)")

    def _end(self, epoch: int, outcome: Outcome) -> None:
        if self.on_end is not None:
            self.on_end(epoch, outcome)
        for future in self.waiting.pop(epoch, ()):
            if future.done():
                continue  # its caller stopped waiting
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> "asyncio.Task[None]":
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def _dial(self, conn: _Conn, address: str, server_name: Optional[str]) -> None:
        try:
            host, port = split_address(address)
            transport, _ = await self.loop.create_connection(lambda: conn, host, port)
        except asyncio.CancelledError:
            raise
        except (OSError, ValueError) as e:
            if not conn.done:
                conn.done = True
                self.lost(conn.id, IoError(conn.id, connect_error_kind(e), f"{address}: {_describe(e)}"))
            return
        if conn.done:  # closed by the session meanwhile
            transport.close()
            return
        self.push(Connected(conn.id))
        if server_name is not None:
            context = self.ssl_context or _ssl.create_default_context()
            try:
                secured = await self.loop.start_tls(transport, conn, context, server_hostname=server_name)
            except asyncio.CancelledError:
                transport.abort()
                raise
            except (OSError, _ssl.SSLError, _ssl.CertificateError, EOFError) as e:
                transport.abort()
                if not conn.done:
                    conn.done = True
                    self.lost(conn.id, IoError(conn.id, _handshake_kind(e), f"{address}: {_describe(e)}"))
                return
            if secured is None or conn.done:
                transport.abort()
                return
            conn.transport = secured
            self.push(Secured(conn.id))
        conn.ready = True
        pending, conn.pending = conn.pending, []
        for data in pending:
            conn.send(data)

    async def _resolve(self, lookup: int, name: str) -> None:
        try:
            host, port = split_address(name)
            infos = await self.loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except asyncio.CancelledError:
            raise
        except (OSError, ValueError) as e:
            self.push(ResolveFailed(lookup, ErrorKind.DNS, f"{name}: {_describe(e)}"))
            return
        seen: List[Tuple[str, int]] = []
        for family, _, _, _, sockaddr in infos:
            if family in (socket.AF_INET, socket.AF_INET6):
                entry = (str(sockaddr[0]), port)
                if entry not in seen:
                    seen.append(entry)
        self.push(Resolved(lookup, tuple(seen)))

    def _token(self, conn: int) -> None:
        source = self.token_source
        if source is None:
            self.events.append(TokenFailed(conn, "no OAUTHBEARER token source"))
            return
        try:
            token = source()
        except Exception as e:  # the caller's code: any failure fails the attempt
            self.events.append(TokenFailed(conn, f"the token source failed: {type(e).__name__}"))
            return
        if inspect.isawaitable(token):
            self._spawn(self._await_token(conn, token))
        else:
            self.events.append(self._token_event(conn, token))

    async def _await_token(self, conn: int, pending: object) -> None:
        try:
            token = await pending  # type: ignore[misc]
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.push(TokenFailed(conn, f"the token source failed: {type(e).__name__}"))
            return
        self.push(self._token_event(conn, token))

    @staticmethod
    def _token_event(conn: int, token: object) -> _wire.Event:
        if isinstance(token, str) and token:
            return Token(conn, token)
        return TokenFailed(conn, f"the token source returned {type(token).__name__}, not a token string")
