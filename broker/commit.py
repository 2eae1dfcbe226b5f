"""The completion of one appended entry, as the broker's publish path waits on it."""

from __future__ import annotations

from collections.abc import Callable


class Commit:
    """The completion of one appended entry: the future-like part of it the broker uses.

    Callbacks run on the event loop once the entry's group is committed (or failed), in the
    order they were added; one added after that runs at once.
    """

    __slots__ = ("_done", "_error", "_callbacks")

    def __init__(self) -> None:
        self._done = False
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Commit], None]] = []

    def done(self) -> bool:
        """Whether the commit has finished, well or not."""
        return self._done

    def exception(self) -> BaseException | None:
        """The storage error that failed the entry, if any."""
        return self._error

    def add_done_callback(self, callback: Callable[[Commit], None]) -> None:
        """Call ``callback(commit)`` once finished."""
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def finish(self, error: BaseException | None) -> None:
        """Record the outcome and run the callbacks (the storage calls it on the event loop)."""
        self._done, self._error = True, error
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)
