"""The asyncio API: ``await metadata(seeds)`` for one refresh, ``AsyncClient`` for an
application's long-lived metadata.

Both run a session (the policy and the Kafka conversation live there) and a host that only
moves bytes on the running loop. Cancelling a call closes every connection it opened before
the cancellation returns to the caller; ``AsyncClient.close()`` closes the client's.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable, List, Optional, Union

from ._host import Host, Outcome
from ._options import Options, build, given
from ._types import Metadata, Report
from ._wire import Cause
from .errors import ClosedError
from .session import Session

__all__ = ["metadata", "bootstrap_servers", "AsyncClient"]


async def metadata(seeds: Union[str, Iterable[str]], options: Optional[Options] = None, **changes: Any) -> Metadata:
    """Cluster metadata from the first of ``seeds`` to answer, staggering past the ones that
    do not (one refresh; seeds tried in an order shuffled by the session's seed, as librdkafka,
    the Java client, franz-go and Sarama do; ``settings={"shuffle_seeds": False}`` keeps the
    order given).

    ``seeds``: ``host:port`` strings, or one comma-separated string. ``options``: an
    ``Options`` (TLS, SASL, policy, topics, …); keyword arguments name its fields and replace
    them (``metadata(seeds, topics=[])``).

    Raises ``ConfigError`` before contacting anyone for bad options or settings,
    ``RefreshError`` (with the last error and every broker's) when the policy gives up.
    """
    built = build(seeds, given(options, changes), one_shot=True)
    session = Session(built.config, seed=built.seed)
    try:
        host = Host(session, ssl_context=built.ssl_context, token_source=built.token_source)
    except BaseException:
        session.close()
        raise
    try:
        answer = host.request(Cause.BOOTSTRAP)
        while True:
            host.step()
            if answer.done():
                return answer.result()
            await host.wait()
    finally:
        # Every connection is closed before the call returns, even a cancelled one.
        await host.aclose()


async def bootstrap_servers(
    seeds: Union[str, Iterable[str]], options: Optional[Options] = None, **changes: Any
) -> List[str]:
    """An ordered ``bootstrap_servers`` list for another Kafka client (aiokafka,
    confluent-kafka, kafka-python): the seed that answered first, then every other broker the
    cluster lists and every seed, except those stagger saw failing during this refresh (an
    attempt that failed, or was cancelled before the broker answered: hung or blackholed);
    brokers and seeds it did not try stay (see ``Metadata.bootstrap_servers``). Takes
    ``metadata()``'s options, and asks for brokers only unless topics are named (``topics``
    given as a keyword, or not ``None`` in ``options``)."""
    if "topics" not in changes and not (isinstance(options, Options) and options.topics is not None):
        changes["topics"] = []
    return (await metadata(seeds, options, **changes)).bootstrap_servers()


class AsyncClient:
    """Long-lived cluster metadata for an asyncio application.

    The session keeps the winning connection for the next refresh, refreshes by itself every
    ``refresh_interval`` (a knob; 5 minutes by default) while the client runs, rebootstraps
    from the seeds when every discovered broker fails, and shares one refresh between
    concurrent callers. The settings are validated here; no broker is contacted until the
    first call (or ``async with``, which starts the periodic refresh at once).

    ``options`` and keyword arguments: as for ``metadata()`` (``self.options`` keeps them).
    ``metadata()`` answers from the cache while the session's latest refresh succeeded (the
    periodic refresh keeps it fresh), else refreshes; ``refresh()`` always asks now.
    """

    def __init__(self, seeds: Union[str, Iterable[str]], options: Optional[Options] = None, **changes: Any) -> None:
        self.options = given(options, changes)
        self._built = build(seeds, self.options, one_shot=False)
        self._session = Session(self._built.config, seed=self._built.seed)
        self._host: Optional[Host] = None
        self._task: Optional["asyncio.Task[None]"] = None
        self._cache: Optional[Metadata] = None
        self._fresh = False
        self._closed = False
        self._failure: Optional[BaseException] = None

    @property
    def seeds(self) -> List[str]:
        return list(self._built.config.seeds)

    def _start(self) -> Host:
        if self._closed:
            raise ClosedError("the stagger client is closed")
        if self._failure is not None:
            raise ClosedError(f"the stagger client stopped: {self._failure!r}") from self._failure
        if self._host is None:
            self._host = Host(
                self._session,
                ssl_context=self._built.ssl_context,
                token_source=self._built.token_source,
                on_end=self._ended,
            )
            self._task = self._host.loop.create_task(self._run(self._host), name="stagger-client")
        return self._host

    async def _run(self, host: Host) -> None:
        try:
            while True:
                host.step()
                await host.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # a bug: answer every caller with it rather than hang
            self._failure = e
            host.close(e)
            raise

    def _ended(self, epoch: int, outcome: Outcome) -> None:
        if isinstance(outcome, Metadata):
            self._cache, self._fresh = outcome, True
        else:
            self._fresh = False

    async def metadata(self) -> Metadata:
        """The metadata: the cached copy while the latest refresh succeeded, else a fresh one."""
        if self._cache is not None and self._fresh and not self._closed:
            return self._cache
        return await self.refresh()

    async def refresh(self, cause: Cause = Cause.REQUESTED, broker: Optional[str] = None) -> Metadata:
        """Fresh metadata now. Concurrent callers share one refresh. ``cause`` says why, so the
        policy can read it (after a refused or reset connection, ``CONNECTION_LOST``, or
        NOT_LEADER-style errors, ``STALE_METADATA``, the refresh is gentle: a failover every
        client sees at once); ``broker``, the ``host:port`` the trouble came from, is tried
        last."""
        host = self._start()
        return await host.request(cause, broker)

    def cached(self) -> Optional[Metadata]:
        """The latest metadata, however old, without contacting anyone."""
        return self._cache

    def report(self) -> Report:
        """The session's counters, the refresh running and the last one with every attempt."""
        if self._closed:
            raise ClosedError("the stagger client is closed")
        return self._session.report()

    async def close(self) -> None:
        """Stops the client: every connection is closed and every waiting caller gets
        ``ClosedError`` before this returns."""
        if self._closed:
            return
        self._closed = True
        task, host = self._task, self._host
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except BaseException:  # its cancellation, or the failure already reported
                pass
        if host is not None:
            await host.aclose()
        else:
            self._session.close()

    async def __aenter__(self) -> "AsyncClient":
        self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("running" if self._task else "idle")
        return f"<stagger.AsyncClient {state} seeds={self.seeds!r}>"
