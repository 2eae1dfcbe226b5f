"""Send operations and the ordered queue of those awaiting the broker's receipt.

The pending queue is a callback queue, not a send queue (seed 003): an op is written as soon as it
is appended, and stays until its receipt, failure or timeout. Receipts come back in order, so
matching is against the head only; after a reconnect the whole queue is written again in order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["OpSend", "PendingQueue"]


class OpSend:
    """One SEND: a batch, a single message, or one chunk of a chunked message.

    ``entry`` and ``checksum`` are kept so the op can be written again, under a new producer id,
    after a reconnect. ``done`` turns true after the op left the queue and its callbacks ran. ``callbacks`` holds one callback per message (empty for all but the last
    chunk of a chunked message), ``permits`` and ``memory`` what completing the op gives back.
    """

    __slots__ = (
        "sequence_id",
        "highest_sequence_id",
        "num_messages",
        "batched",
        "chunk",
        "entry",
        "checksum",
        "callbacks",
        "permits",
        "memory",
        "created",
        "deadline",
        "done",
    )

    def __init__(
        self,
        sequence_id: int,
        highest_sequence_id: int,
        num_messages: int,
        batched: bool,
        entry: bytes,
        checksum: int,
        callbacks: list[Callable[[Any, Any], None]],
        permits: int,
        memory: int,
        created: float,
        deadline: float | None,
        chunk: bool = False,
    ):
        self.sequence_id = sequence_id
        self.highest_sequence_id = highest_sequence_id
        self.num_messages = num_messages
        self.batched = batched
        self.chunk = chunk
        self.entry = entry
        self.checksum = checksum
        self.callbacks = callbacks
        self.permits = permits
        self.memory = memory
        self.created = created
        self.deadline = deadline
        self.done = False

    def matches(self, sequence_id: int) -> bool:
        """Whether a receipt for ``sequence_id`` acknowledges this op (any id in a batch's range)."""
        return self.sequence_id <= sequence_id <= self.highest_sequence_id


class PendingQueue:
    """Ops in the order they were (or will be) written."""

    __slots__ = ("_ops",)

    def __init__(self) -> None:
        self._ops: deque[OpSend] = deque()

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[OpSend]:
        return iter(self._ops)

    def append(self, op: OpSend) -> None:
        """Queue an op behind every earlier one."""
        self._ops.append(op)

    def head(self) -> OpSend | None:
        """The oldest op, which the next receipt must match."""
        return self._ops[0] if self._ops else None

    def tail(self) -> OpSend | None:
        """The newest op (what a flush waits for)."""
        return self._ops[-1] if self._ops else None

    def pop_head(self) -> OpSend:
        """Remove and return the oldest op (its producer marks it done once its callbacks ran)."""
        return self._ops.popleft()

    def pop_expired(self, now: float) -> list[OpSend]:
        """Remove the ops whose deadline has passed; they form a prefix, as ops are created in order."""
        expired = []
        ops = self._ops
        while ops and ops[0].deadline is not None and ops[0].deadline <= now:
            expired.append(self.pop_head())
        return expired

    def pop_all(self) -> list[OpSend]:
        """Remove every op (to fail them)."""
        ops = list(self._ops)
        self._ops.clear()
        return ops

    def messages(self) -> int:
        """Messages (not ops) still pending."""
        return sum(op.permits for op in self._ops)
