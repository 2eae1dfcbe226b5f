"""The callback a sync send or a future send waits on."""

from __future__ import annotations

from concurrent.futures import Future

from ..exceptions import PulsarException, Result, exception_for
from ..protocol.message_id import MessageId
from .batch_container import SendCallback

__all__ = ["SendWaiter"]


class SendWaiter:
    """The callback of a sync send or a future send: resolves a Future with the id or the error."""

    __slots__ = ("future", "_then")

    def __init__(self) -> None:
        self.future: Future[MessageId] = Future()
        self._then: SendCallback | None = None

    def after(self, first: SendCallback) -> SendWaiter:
        """Run ``first`` (the interceptors) before resolving the future."""
        self._then = first
        return self

    def __call__(self, result: Result, message_id: MessageId | None) -> None:
        if self._then is not None:
            self._then(result, message_id)
        if result is Result.Ok:
            self.future.set_result(message_id)  # type: ignore[arg-type]
        else:
            self.future.set_exception(exception_for(result))

    def fail(self, error: PulsarException) -> None:
        """Fail with the exception itself, keeping its message."""
        if self._then is not None:
            self._then(error.result, None)
        self.future.set_exception(error)

    def wait(self) -> MessageId:
        """Block until resolved; raise the send's exception on failure."""
        return self.future.result()
