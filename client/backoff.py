"""Exponential backoff with jitter, for reconnects and retried requests."""

from __future__ import annotations

import random


class Backoff:
    """Delays that double from ``initial`` up to ``maximum`` seconds, with +-10% jitter."""

    def __init__(self, initial: float = 0.1, maximum: float = 30.0):
        self.initial = initial
        self.maximum = maximum
        self._next = initial

    def next(self) -> float:
        """The delay before the next attempt."""
        delay = self._next
        self._next = min(self._next * 2, self.maximum)
        return delay * random.uniform(0.9, 1.1)

    def reset(self) -> None:
        """Start again from ``initial`` (after a success)."""
        self._next = self.initial
