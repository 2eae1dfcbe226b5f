"""The blocking admin REST client."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from queue import SimpleQueue
from types import TracebackType
from typing import Any

import httpx

from .base import AdminBase
from .calls import Operation, T
from .exchange import Exchange


def _outcome(send: Callable[..., httpx.Response], *args: Any) -> httpx.Response | Exception:
    """The response, or the failure to get one (handed to the caller's thread, which waits for it)."""
    try:
        return send(*args)
    except Exception as exc:
        return exc


class PulsarAdmin(AdminBase):
    """Blocking admin REST client (``with PulsarAdmin(url) as admin: ...``).

    Topics are given in short (``"my-topic"``) or full (``"persistent://t/ns/my-topic"``) form;
    namespaces as ``"tenant/namespace"``. Failures raise :class:`AdminError` subclasses.
    """

    _http: httpx.Client
    _senders: ThreadPoolExecutor | None = None

    def _open(self, **options: Any) -> httpx.Client:
        self._senders = None  # a forked child starts its own threads (the parent's are not in it)
        return httpx.Client(**options)

    def _run(self, operation: Operation[T]) -> T:
        answered: SimpleQueue[tuple[Exchange[Any], httpx.Response | Exception]] = SimpleQueue()

        def send(exchange: Exchange[Any], request: httpx.Request) -> Future[None]:
            return self._sender_pool().submit(lambda: answered.put((exchange, _outcome(self._http.send, request))))

        with self._schedule(operation) as scheduler:
            while scheduler.send_ready(send):
                scheduler.complete(*answered.get())
            return scheduler.result

    def _sender_pool(self) -> ThreadPoolExecutor:
        # The bound on calls in flight across every thread using this client.
        if self._senders is None:
            self._senders = ThreadPoolExecutor(self.max_concurrent_requests, thread_name_prefix="pulsar-admin")
        return self._senders

    def close(self) -> None:
        """Close the HTTP connections; later calls raise AlreadyClosed."""
        if self._senders is not None:
            self._senders.shutdown(wait=True, cancel_futures=True)
        self._http.close()

    def __enter__(self) -> PulsarAdmin:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
