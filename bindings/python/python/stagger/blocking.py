"""The blocking API: ``metadata_blocking(seeds)`` for one refresh, ``Client`` for long-lived
metadata, for programs without an event loop.

Both run the asyncio host (the same code the asyncio API and its tests run), on a private
event loop: ``metadata_blocking`` on the calling thread's own loop, kept between calls (or
in a worker thread when the calling thread already runs a loop, as a notebook does),
``Client`` on one thread of its own, which owns the session and its sockets, watches the
session's timers (periodic refresh, kept connection) between calls, and answers callers
from any thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from typing import Any, Coroutine, Iterable, List, Optional, TypeVar, Union

from . import aio
from ._options import Options
from ._types import Metadata, Report
from ._wire import Cause
from .errors import ClosedError

__all__ = ["metadata_blocking", "bootstrap_servers_blocking", "Client"]

T = TypeVar("T")


class _ThreadLoop:
    """The event loop the one-shot blocking calls of one thread run on, kept between calls:
    creating and tearing down a loop per call (``asyncio.run``) cost about 0.3 ms of each
    refresh, a tenth of a healthy one (docs/performance/peers.md). Closed when its thread
    ends (its thread-local holder is collected) or at exit."""

    __slots__ = ("loop", "__weakref__")

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        # The loop of a thread that lives to the end (the main thread's) is closed at exit.
        weakref.finalize(self, self.loop.close)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Runs ``coro`` to completion; if this thread is interrupted meanwhile (Ctrl-C), the
        call is cancelled and run until its connections are closed, then the interruption
        goes on."""
        task = self.loop.create_task(coro)
        try:
            return self.loop.run_until_complete(task)
        except BaseException:
            if not task.done():
                task.cancel()
                try:
                    self.loop.run_until_complete(task)
                except BaseException:
                    pass
            raise


_local = threading.local()


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Runs ``coro`` on this thread's loop (``_ThreadLoop``)."""
    holder: Optional[_ThreadLoop] = getattr(_local, "holder", None)
    if holder is None or holder.loop.is_closed():
        holder = _local.holder = _ThreadLoop()
    return holder.run(coro)


def _run_anywhere(coro: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(coro)
    # This thread runs an event loop (blocking it is the caller's choice): run ours beside it.
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="stagger") as pool:
        return pool.submit(_run, coro).result()


def metadata_blocking(seeds: Union[str, Iterable[str]], options: Optional[Options] = None, **changes: Any) -> Metadata:
    """``stagger.metadata()`` for blocking code: same options, same result and errors."""
    return _run_anywhere(aio.metadata(seeds, options, **changes))


def bootstrap_servers_blocking(
    seeds: Union[str, Iterable[str]], options: Optional[Options] = None, **changes: Any
) -> List[str]:
    """``stagger.bootstrap_servers()`` for blocking code."""
    return _run_anywhere(aio.bootstrap_servers(seeds, options, **changes))


def _shutdown(loop: asyncio.AbstractEventLoop, client: aio.AsyncClient, thread: threading.Thread) -> None:
    """Stops a Client's loop thread (``close()``, or the client collected unclosed)."""
    if loop.is_closed():
        return
    if thread.is_alive():
        try:
            asyncio.run_coroutine_threadsafe(client.close(), loop).result(30)
        except BaseException:
            pass
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join(30)
    if not thread.is_alive():
        loop.close()


class Client:
    """Long-lived cluster metadata for blocking code: ``AsyncClient`` on a thread of its own.

    ``options`` and keyword arguments: as for ``metadata()``. Methods may be called from any
    thread; concurrent callers share one refresh. ``timeout``
    (seconds) bounds a call's wait (``TimeoutError``); the refresh itself is bounded by the
    policy's deadline. ``close()`` (or leaving a ``with`` block) closes every connection and
    stops the thread.
    """

    def __init__(self, seeds: Union[str, Iterable[str]], options: Optional[Options] = None, **changes: Any) -> None:
        # Validated here, before any thread starts.
        self._client = aio.AsyncClient(seeds, options, **changes)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="stagger-client", daemon=True)
        self._thread.start()
        self._closed = False
        self._finalizer = weakref.finalize(self, _shutdown, self._loop, self._client, self._thread)
        # The session's timers (periodic refresh) run from now on.
        self._call(self._client.__aenter__(), None)

    def _call(self, coro: Coroutine[Any, Any, T], timeout: Optional[float]) -> T:
        if self._closed:
            coro.close()
            raise ClosedError("the stagger client is closed")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer from the stagger client within {timeout} s") from None

    @property
    def options(self) -> Options:
        """The client's options."""
        return self._client.options

    def metadata(self, timeout: Optional[float] = None) -> Metadata:
        """The metadata: the cached copy while the latest refresh succeeded, else a fresh one."""
        return self._call(self._client.metadata(), timeout)

    def refresh(
        self, cause: Cause = Cause.REQUESTED, broker: Optional[str] = None, timeout: Optional[float] = None
    ) -> Metadata:
        """Fresh metadata now, saying why (see ``AsyncClient.refresh``)."""
        return self._call(self._client.refresh(cause, broker), timeout)

    def cached(self) -> Optional[Metadata]:
        """The latest metadata, however old, without contacting anyone."""
        return self._client.cached()

    def report(self) -> Report:
        """The session's counters, the refresh running and the last one with every attempt."""
        return self._client.report()

    def close(self) -> None:
        """Closes every connection, answers waiting callers with ``ClosedError``, stops the
        thread."""
        if self._closed:
            return
        self._closed = True
        self._finalizer()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running"
        return f"<stagger.Client {state} seeds={self._client.seeds!r}>"
