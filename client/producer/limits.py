"""Flow control: the client-wide memory limit and the per-partition pending-messages limit.

Both follow seed 003's ``canEnqueueRequest``: a message takes a pending slot, then reserves its
uncompressed payload bytes; with ``block_if_queue_full`` it waits (up to a deadline) for both,
without it a full limit fails at once. Everything taken is given back when the message's receipt,
failure or timeout completes it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ["MemoryLimit", "PendingLimit", "memory_limit_of"]

_ATTACH_LOCK = threading.Lock()


class _Budget:
    """A counter of units in use, bounded by ``limit`` (0 means unbounded).

    Taking and giving back units holds a plain lock only; the condition is used (and notified)
    only when some sender is actually waiting, which keeps the hot path cheap.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.in_use = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiters = 0

    def _fits(self, units: int) -> bool:
        # A request larger than the whole limit fits once nothing else is in use, so one big
        # message cannot wait forever.
        return not self.limit or self.in_use + units <= self.limit or not self.in_use

    def try_acquire(self, units: int) -> bool:
        """Take ``units`` if they fit now."""
        lock = self._lock
        lock.acquire()  # cheaper than ``with``: every message comes through here
        in_use = self.in_use
        fits = not self.limit or in_use + units <= self.limit or not in_use
        if fits:
            self.in_use = in_use + units
        lock.release()
        return fits

    def acquire(self, units: int, deadline: float | None) -> bool:
        """Take ``units``, waiting until they fit or ``deadline`` (monotonic) passes; None waits forever."""
        with self._lock:
            if not self._fits(units):
                self._waiters += 1
                try:
                    while not self._fits(units):
                        remaining = None if deadline is None else deadline - time.monotonic()
                        if remaining is not None and remaining <= 0:
                            return False
                        self._cond.wait(remaining)
                finally:
                    self._waiters -= 1
            self.in_use += units
            return True

    def release(self, units: int) -> None:
        """Give back ``units`` and wake blocked senders."""
        with self._lock:
            self.in_use -= units
            if self._waiters:
                self._cond.notify_all()

    def is_full(self) -> bool:
        """Whether the next unit would have to wait."""
        return bool(self.limit) and self.in_use >= self.limit


class MemoryLimit(_Budget):
    """Uncompressed payload bytes held by all producers of one client (``memory_limit_bytes``)."""


class PendingLimit(_Budget):
    """Messages a partition producer holds between ``send_async`` and their completion."""


def memory_limit_of(client: Any) -> MemoryLimit:
    """The client's shared MemoryLimit, attached to it on first use."""
    limit = getattr(client, "memory_limit", None)
    if limit is None:
        with _ATTACH_LOCK:
            limit = getattr(client, "memory_limit", None)
            if limit is None:
                limit = MemoryLimit(int(getattr(client, "memory_limit_bytes", 0) or 0))
                client.memory_limit = limit
    return limit
