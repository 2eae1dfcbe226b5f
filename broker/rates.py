"""Message and byte rates over a sliding window, for the admin stats' ``msgRate*`` fields."""

from __future__ import annotations

import time
from collections import deque

WINDOW_SECONDS = 10.0


class RateMeter:
    """Counts events and reports their per-second rate over the last window."""

    __slots__ = ("_buckets", "_window")

    def __init__(self, window: float = WINDOW_SECONDS):
        self._window = window
        self._buckets: deque[list[float]] = deque()  # [second, messages, bytes]

    def record(self, messages: int, size: int) -> None:
        """Count ``messages`` totalling ``size`` bytes now."""
        second = int(time.monotonic())
        buckets = self._buckets
        if buckets and buckets[-1][0] == second:
            bucket = buckets[-1]
            bucket[1] += messages
            bucket[2] += size
        else:
            buckets.append([second, messages, size])
            while buckets[0][0] <= second - self._window:
                buckets.popleft()

    def rates(self) -> tuple[float, float]:
        """(messages per second, bytes per second) over the window."""
        cutoff = time.monotonic() - self._window
        messages = sum(b[1] for b in self._buckets if b[0] >= cutoff)
        size = sum(b[2] for b in self._buckets if b[0] >= cutoff)
        return messages / self._window, size / self._window
