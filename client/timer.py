"""One timer thread per client: batch flush deadlines, ack grouping, negative acks, timeouts.

A single thread serves every producer and consumer of a client, so a thousand producers do not
mean a thousand threads. Callbacks run on the timer thread and must be short.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class TimerHandle:
    """A scheduled callback; ``cancel()`` stops it from running."""

    __slots__ = ("deadline", "callback", "cancelled")

    def __init__(self, deadline: float, callback: Callable[[], None]):
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run the callback (if it has not run yet)."""
        self.cancelled = True


class Timer:
    """A heap of deadlines served by one daemon thread, started on first use."""

    def __init__(self, name: str = "pulsar-timer"):
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._counter = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._name = name
        self._closed = False

    def call_later(self, delay_seconds: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once after ``delay_seconds``."""
        handle = TimerHandle(time.monotonic() + delay_seconds, callback)
        with self._cond:
            if self._closed:
                raise RuntimeError("timer is closed")
            heapq.heappush(self._heap, (handle.deadline, next(self._counter), handle))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            elif self._heap[0][2] is handle:
                self._cond.notify()
        return handle

    def call_every(self, interval_seconds: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` every ``interval_seconds`` until the returned handle is cancelled."""
        outer = TimerHandle(0.0, callback)

        def tick() -> None:
            if outer.cancelled:
                return
            callback()
            if not outer.cancelled and not self._closed:
                self.call_later(interval_seconds, tick)

        self.call_later(interval_seconds, tick)
        return outer

    def close(self) -> None:
        """Stop the thread; callbacks not yet due never run."""
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    if not self._heap:
                        self._cond.wait()
                        continue
                    wait = self._heap[0][0] - time.monotonic()
                    if wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._closed:
                    return
                _, _, handle = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            try:
                handle.callback()
            except Exception:  # one failing callback must not stop every other timer
                log.exception("timer callback failed")
