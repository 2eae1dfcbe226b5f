"""One operation run without I/O: calls become ``httpx.Request`` s, responses become results or errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic

import httpx

from .calls import AdminCall, Concurrently, Operation, T, UnexpectedResponse
from .errors import AdminConnectionError, AdminError, AdminTimeoutError, error_class

_MAX_REDIRECTS = 5
_REDIRECTS = (307, 308)  # method- and body-preserving; Pulsar answers 307 toward the owning broker
_REASON_LIMIT = 300

# Builds the request of a call: to the client's base URL, or to a redirect target (which carries the query).
RequestBuilder = Callable[[AdminCall, httpx.URL | None], httpx.Request]


def display_url(url: httpx.URL) -> str:
    """The URL without credentials or query, for messages."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


def _reason(response: httpx.Response) -> str:
    """Pulsar's ``{"reason": ...}``, else the start of the body, else the status phrase."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("reason"):
        return str(body["reason"])
    text = " ".join(response.text.split())
    if text:
        return text[:_REASON_LIMIT] + ("..." if len(text) > _REASON_LIMIT else "")
    return response.reason_phrase or "no reason given"


class Exchange(Generic[T]):
    """Runs one operation without I/O: the client sends ``request`` and reports back.

    While ``request`` is not None the client sends it and calls :meth:`received` with the
    response or :meth:`failed` with the transport error. While ``waiting_on`` is not None the
    operation waits on sub-operations, whose results :meth:`resume` hands it (or whose error
    :meth:`throw` raises in it). Once :attr:`done`, ``result`` or ``error`` holds the outcome.
    Errors are thrown into the operation, so they carry its frame and an operation may handle them.
    Redirects are followed here, so every hop's request is built by ``build_request`` with the
    client's headers (httpx drops the auth headers across hosts).
    """

    def __init__(self, operation: Operation[T], build_request: RequestBuilder):
        self._operation = operation
        self._build_request = build_request
        self._call: AdminCall | None = None
        self._hops = 0
        self.request: httpx.Request | None = None
        self.waiting_on: tuple[Operation[Any], ...] | None = None
        self.result: T
        self.error: Exception | None = None
        self._advance(lambda: next(operation))

    @property
    def done(self) -> bool:
        """Whether the operation has returned or raised."""
        return self.request is None and self.waiting_on is None

    def _advance(self, step: Callable[[], AdminCall | Concurrently]) -> None:
        self._call, self.request, self.waiting_on = None, None, None
        try:
            asked = step()
        except StopIteration as stop:
            self.result = stop.value
            return
        except Exception as exc:  # the operation's own failure, raised to whoever waits on it
            self.error = exc
            return
        if isinstance(asked, Concurrently):
            self.waiting_on = asked.operations
            return
        self._call, self._hops = asked, 0
        self.request = self._build_request(asked, None)

    def resume(self, results: list[Any]) -> None:
        """Hand the operation the results of the sub-operations it waited on."""
        self._advance(lambda: self._operation.send(results))

    def throw(self, error: Exception) -> None:
        """Raise ``error`` in the operation, where it waits (on a call or on sub-operations)."""
        self._advance(lambda: self._operation.throw(error))

    def close(self) -> None:
        """Abandon the operation: nothing more is asked of it, or handed to it."""
        self._call, self.request, self.waiting_on = None, None, None
        self._operation.close()

    def received(self, response: httpx.Response) -> None:
        """Take a response: follow a redirect, or feed the decoded result (or the error) to the operation."""
        call, request = self._call, self.request
        assert call is not None and request is not None
        path = request.url.path
        if response.status_code in _REDIRECTS and "location" in response.headers:
            target = request.url.join(response.headers["location"])
            self._hops += 1
            if self._hops > _MAX_REDIRECTS:
                reason = f"more than {_MAX_REDIRECTS} redirects"
            elif request.url.scheme == "https" and target.scheme != "https":
                reason = f"refusing a redirect from https to {display_url(target)}"
            else:
                self.request = self._build_request(call, target)
                return
            self.throw(AdminError(reason, operation=call.operation, method=call.method, path=path))
            return
        if not response.is_success:
            status = response.status_code
            cls = error_class(status)
            self.throw(cls(_reason(response), operation=call.operation, method=call.method, path=path, status=status))
            return
        try:
            value = call.decode(response)
        except UnexpectedResponse as exc:
            self.throw(
                AdminError(
                    f"unexpected response: {exc}",
                    operation=call.operation,
                    method=call.method,
                    path=path,
                    status=response.status_code,
                )
            )
            return
        self._advance(lambda: self._operation.send(value))

    def failed(self, exc: httpx.RequestError) -> None:
        """Take a transport failure (no HTTP answer)."""
        call, request = self._call, self.request
        assert call is not None and request is not None
        cls = AdminTimeoutError if isinstance(exc, httpx.TimeoutException) else AdminConnectionError
        error = cls(
            f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__,
            operation=call.operation,
            method=call.method,
            path=request.url.path,
            url=display_url(request.url),
        )
        error.__cause__ = exc
        self.throw(error)
