"""The negative-acknowledgement tracker: redelivery of nacked messages after a delay.

A nacked message is remembered with the time it becomes due (now + the redelivery delay). One
timer, ticking at a third of the delay while anything is pending, collects the due entries and
hands them to the consumer in a single redelivery request. Ids are kept per entry (ledger,
entry): the broker redelivers whole entries.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..timer import Timer, TimerHandle

MIN_DELAY_MS = 100


class NegativeAcksTracker:
    """Delays the redelivery of nacked entries; ``redeliver`` receives the due (ledger, entry) pairs."""

    def __init__(self, delay_ms: int, timer: Timer, redeliver: Callable[[list[tuple[int, int]]], None]):
        self.delay = max(delay_ms, MIN_DELAY_MS) / 1000
        self._tick = self.delay / 3
        self._timer = timer
        self._redeliver = redeliver
        self._lock = threading.Lock()
        self._due: dict[tuple[int, int], float] = {}
        self._handle: TimerHandle | None = None
        self.nacked = 0

    @property
    def pending(self) -> int:
        """Entries waiting for their delay to pass."""
        return len(self._due)

    def add(self, ledger: int, entry: int) -> None:
        """Nack an entry (or a message of a batch entry)."""
        with self._lock:
            self._due.setdefault((ledger, entry), time.monotonic() + self.delay)
            self.nacked += 1
            if self._handle is None:
                self._handle = self._timer.call_later(self._tick, self._on_tick)

    def discard(self, ledger: int, entry: int) -> None:
        """Forget an entry acknowledged after all."""
        with self._lock:
            self._due.pop((ledger, entry), None)

    def _on_tick(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [key for key, when in self._due.items() if when <= now]
            for key in due:
                del self._due[key]
            self._handle = self._timer.call_later(self._tick, self._on_tick) if self._due else None
        if due:
            self._redeliver(sorted(due))

    def close(self) -> None:
        """Stop the timer; pending nacks are dropped (the broker redelivers on reconnect anyway)."""
        with self._lock:
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None
            self._due.clear()
