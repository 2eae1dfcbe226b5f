"""The asyncio admin REST client."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

import httpx

from .base import AdminBase
from .calls import Operation, T
from .exchange import Exchange


class AsyncPulsarAdmin(AdminBase):
    """asyncio admin REST client, for triggers: the same methods as :class:`PulsarAdmin`, awaited.

    ``async with AsyncPulsarAdmin(url) as admin: await admin.backlog(topic, sub)``.
    """

    _http: httpx.AsyncClient
    _lanes: list[httpx.AsyncClient] = []

    def _open(self, **options: Any) -> httpx.AsyncClient:
        # Calls in flight go out on lanes: httpx clients of one kept-alive connection each, the
        # client's own (None among the idle lanes) and more made as calls overlap, up to
        # max_concurrent_requests. One pool of many connections costs httpx's asyncio pool a scan
        # of every connection per call (2 ms of CPU a call at 16 connections, measured).
        self._inherited_http.extend(self._lanes)  # after a fork: the parent's (see AdminBase)
        self._lane_options = {**options, "limits": httpx.Limits(max_connections=1, max_keepalive_connections=1)}
        self._lanes = []
        self._idle_lanes: list[httpx.AsyncClient | None] = [None]
        # Waiting here is not waiting for a pooled connection, so a long queue of calls does not hit
        # httpx's pool timeout.
        self._in_flight = asyncio.Semaphore(self.max_concurrent_requests)
        return httpx.AsyncClient(**self._lane_options)

    async def _run(self, operation: Operation[T]) -> T:
        answered: asyncio.Queue[tuple[Exchange[Any], httpx.Response | Exception]] = asyncio.Queue()

        def send(exchange: Exchange[Any], request: httpx.Request) -> asyncio.Task[None]:
            return asyncio.ensure_future(self._answer(answered, exchange, request))

        with self._schedule(operation) as scheduler:
            while scheduler.send_ready(send):
                scheduler.complete(*await answered.get())
            return scheduler.result

    async def _answer(self, answered: asyncio.Queue[Any], exchange: Exchange[Any], request: httpx.Request) -> None:
        """Send ``request`` on an idle lane (one made if none is idle) and put its outcome in ``answered``."""
        async with self._in_flight:
            if not self._idle_lanes:
                self._lanes.append(httpx.AsyncClient(**self._lane_options))
                self._idle_lanes.append(self._lanes[-1])
            lane = self._idle_lanes.pop()
            try:
                outcome: httpx.Response | Exception = await (lane or self._http).send(request)
            except Exception as exc:  # handed to _run, which waits for it
                outcome = exc
            finally:
                self._idle_lanes.append(lane)
        answered.put_nowait((exchange, outcome))

    async def aclose(self) -> None:
        """Close the HTTP connections; later calls raise AlreadyClosed."""
        for lane in [self._http, *self._lanes]:
            await lane.aclose()

    close = aclose

    async def __aenter__(self) -> AsyncPulsarAdmin:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
