"""The asyncio admin REST client."""

from __future__ import annotations

from types import TracebackType
from typing import Any

import httpx

from .base import AdminBase
from .calls import Operation, T


class AsyncPulsarAdmin(AdminBase):
    """asyncio admin REST client, for triggers: the same methods as :class:`PulsarAdmin`, awaited.

    ``async with AsyncPulsarAdmin(url) as admin: await admin.backlog(topic, sub)``.
    """

    _http: httpx.AsyncClient

    def _open(self, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(**options)

    async def _run(self, operation: Operation[T]) -> T:
        exchange = self._exchange(operation)
        while exchange.request is not None:
            try:
                response = await self._http.send(exchange.request)
            except httpx.RequestError as exc:
                exchange.failed(exc)
            else:
                exchange.received(response)
        return exchange.result

    async def aclose(self) -> None:
        """Close the HTTP connections; later calls raise AlreadyClosed."""
        await self._http.aclose()

    close = aclose

    async def __aenter__(self) -> AsyncPulsarAdmin:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
