"""Flow control: the client-wide memory limit and the per-partition pending-messages limit.

Both are taken before a message is queued, as the Java client's ``canEnqueueRequest`` does: a
message takes a pending slot, then reserves its uncompressed payload bytes; with
``block_if_queue_full`` it waits (up to a deadline) for both, without it a full limit fails at
once. Everything taken is given back when the message's receipt, failure or timeout completes it.
A partition's pending slots are counted under the client memory limit's lock, so when both fit
(the common case) a message takes them in one round of one lock, and a run of receipts gives
them back in one.
"""

from __future__ import annotations

import threading
import time

from ..exceptions import PulsarException, Result, Timeout, exception_for

__all__ = ["MemoryLimit", "PendingLimit", "SendQuota"]


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
            self._give_back(units)

    def _give_back(self, units: int) -> None:
        # Under the lock.
        self.in_use -= units
        if self._waiters:
            self._cond.notify_all()

    def count_under(self, other: _Budget) -> None:
        """Count under ``other``'s lock from now on (called before any unit is taken), so both are
        taken in one round of it."""
        self._lock = other._lock
        self._cond = threading.Condition(self._lock)

    def is_full(self) -> bool:
        """Whether the next unit would have to wait."""
        return bool(self.limit) and self.in_use >= self.limit


class MemoryLimit(_Budget):
    """Uncompressed payload bytes held by all producers of one client (``memory_limit_bytes``); the client owns it."""


class PendingLimit(_Budget):
    """Messages a partition producer holds between ``send_async`` and their completion."""


class SendQuota:
    """What one message of a partition producer takes before it is queued: a pending slot and its bytes of client memory."""

    __slots__ = ("topic", "pending", "memory", "_lock", "_block", "_timeout")

    def __init__(
        self, topic: str, pending: PendingLimit, memory: MemoryLimit, block_if_queue_full: bool, send_timeout: float | None
    ):
        self.topic = topic
        self.pending = pending
        self.memory = memory
        pending.count_under(memory)
        self._lock = memory._lock
        self._block = block_if_queue_full
        self._timeout = send_timeout

    def reserve(self, size: int) -> PulsarException | None:
        """Take a pending slot and ``size`` bytes of client memory, or say why not."""
        pending, memory = self.pending, self.memory
        lock = self._lock
        lock.acquire()  # the common case, spelled out: both fit at once (see _Budget._fits)
        slots, used = pending.in_use, memory.in_use
        if (not pending.limit or slots < pending.limit or not slots) and (not memory.limit or used + size <= memory.limit or not used):
            pending.in_use, memory.in_use = slots + 1, used + size
            lock.release()
            return None
        lock.release()
        if self._block:
            timeout = self._timeout
            deadline = None if timeout is None else time.monotonic() + timeout
            if not pending.acquire(1, deadline):
                return Timeout(f"no pending slot on {self.topic} within the send timeout of {timeout:g} s")
            if not memory.acquire(size, deadline):
                pending.release(1)
                return Timeout(f"no client memory for {size} bytes within the send timeout of {timeout:g} s")
            return None
        if not pending.try_acquire(1):
            return exception_for(
                Result.ProducerQueueIsFull,
                f"{self.topic} has {pending.limit} messages pending (max_pending_messages)",
            )
        if not memory.try_acquire(size):
            pending.release(1)
            return exception_for(
                Result.MemoryBufferIsFull,
                f"client memory limit of {memory.limit} bytes is used up (memory_limit_bytes)",
            )
        return None

    def release(self, permits: int, memory: int) -> None:
        """Give back what completed messages held: ``permits`` slots and ``memory`` bytes."""
        with self._lock:
            self.pending._give_back(permits)
            self.memory._give_back(memory)

    def is_full(self) -> bool:
        """Whether the next message would wait for (or fail on) a pending slot."""
        return self.pending.is_full()
