"""The unacknowledged-message tracker: a time wheel that redelivers after the ack timeout.

The wheel has ``ack_timeout / tick`` buckets. A message the application receives goes into the
newest bucket; an ack takes it out. Every tick the oldest bucket falls off the wheel and whatever
is still in it is redelivered, and a fresh bucket joins at the other end, so a message is
redelivered between ``ack_timeout`` and ``ack_timeout + tick`` after it was received.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from ..protocol.message_id import MessageId
from ..timer import Timer, TimerHandle

MIN_ACK_TIMEOUT_MS = 1000
MAX_TICK_MS = 1000


class UnackedMessageTracker:
    """Redelivers messages not acknowledged within ``ack_timeout_ms``."""

    def __init__(
        self,
        ack_timeout_ms: int,
        timer: Timer,
        redeliver: Callable[[list[MessageId]], None],
        tick_ms: int | None = None,
    ):
        tick_ms = tick_ms or min(MAX_TICK_MS, max(ack_timeout_ms // 10, 1))
        # One bucket more than the timeout spans: a message added just before a tick must still sit
        # out ``ack_timeout`` whole ticks after it.
        spans = -(-ack_timeout_ms // tick_ms)
        self._buckets: deque[set[MessageId]] = deque(set() for _ in range(spans + 1))
        self._where: dict[MessageId, set[MessageId]] = {}
        self._lock = threading.Lock()
        self._redeliver = redeliver
        self.timeouts = 0
        self._handle: TimerHandle = timer.call_every(tick_ms / 1000, self._on_tick)

    @property
    def pending(self) -> int:
        """Messages received and not yet acknowledged."""
        return len(self._where)

    def add(self, message_id: MessageId) -> None:
        """Start the clock for a message handed to the application."""
        with self._lock:
            if message_id not in self._where:
                bucket = self._buckets[-1]
                bucket.add(message_id)
                self._where[message_id] = bucket

    def remove(self, message_id: MessageId) -> None:
        """Stop the clock: the message was acknowledged (or nacked)."""
        with self._lock:
            bucket = self._where.pop(message_id, None)
            if bucket is not None:
                bucket.discard(message_id)

    def remove_up_to(self, message_id: MessageId) -> None:
        """A cumulative ack: stop the clock for every message at or before ``message_id``."""
        with self._lock:
            for tracked in [m for m in self._where if m <= message_id]:
                self._where.pop(tracked).discard(tracked)

    def clear(self) -> None:
        """Forget everything (the consumer asked for all its messages again)."""
        with self._lock:
            for bucket in self._buckets:
                bucket.clear()
            self._where.clear()

    def _on_tick(self) -> None:
        with self._lock:
            expired = self._buckets.popleft()
            self._buckets.append(set())
            for message_id in expired:
                del self._where[message_id]
        if expired:
            self.timeouts += len(expired)
            self._redeliver(sorted(expired))

    def close(self) -> None:
        """Stop the wheel."""
        self._handle.cancel()
