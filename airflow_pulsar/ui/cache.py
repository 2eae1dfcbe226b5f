"""Short-lived results shared by concurrent requests: a page left open in several browsers costs
one refresh of each connection per :data:`REFRESH_SECONDS`, whoever asks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

REFRESH_SECONDS = 5.0


class RefreshCache(Generic[V]):
    """A result per key, read again once it is ``ttl`` seconds old; requests that arrive while a
    read is under way wait for that read instead of starting their own."""

    def __init__(self, ttl: float = REFRESH_SECONDS) -> None:
        self.ttl = ttl
        self._reads: dict[Hashable, tuple[float, asyncio.Task[V]]] = {}

    async def get(self, key: Hashable, read: Callable[[], Awaitable[V]]) -> V:
        """The key's result: the cached one while fresh (or still being read), else a new read."""
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        held = self._reads.get(key)
        if held is not None:
            started, task = held
            if task.get_loop() is loop and (not task.done() or now - started < self.ttl):
                return await asyncio.shield(task)

        async def run() -> V:
            return await read()

        task = loop.create_task(run())
        self._reads[key] = (now, task)
        return await asyncio.shield(task)
