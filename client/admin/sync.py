"""The blocking admin REST client."""

from __future__ import annotations

from types import TracebackType
from typing import Any

import httpx

from .base import AdminBase
from .calls import Operation, T


class PulsarAdmin(AdminBase):
    """Blocking admin REST client (``with PulsarAdmin(url) as admin: ...``).

    Topics are given in short (``"my-topic"``) or full (``"persistent://t/ns/my-topic"``) form;
    namespaces as ``"tenant/namespace"``. Failures raise :class:`AdminError` subclasses.
    """

    _http: httpx.Client

    def _open(self, **options: Any) -> httpx.Client:
        return httpx.Client(**options)

    def _run(self, operation: Operation[T]) -> T:
        exchange = self._exchange(operation)
        while exchange.request is not None:
            try:
                response = self._http.send(exchange.request)
            except httpx.RequestError as exc:
                exchange.failed(exc)
            else:
                exchange.received(response)
        return exchange.result

    def close(self) -> None:
        """Close the HTTP connections; later calls raise AlreadyClosed."""
        self._http.close()

    def __enter__(self) -> PulsarAdmin:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
