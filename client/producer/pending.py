"""Send operations and the ordered queue of those awaiting the broker's receipt.

The pending queue is a callback queue, not a send queue: an op is written as soon as it
is appended, and stays until its receipt, failure or timeout. Receipts come back in order, so
matching is against the head only; after a reconnect the whole queue is written again in order.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ..exceptions import PulsarException, Result
from ..protocol.frames import encode_payload_command
from ..protocol.message_id import MessageId
from ..protocol.wire import SendEncoder
from .batch_container import SendCallback
from .entry_builder import Entry

__all__ = ["OpSend", "PendingQueue", "Receipt", "fail_callback"]

log = logging.getLogger(__name__)


class Receipt(Protocol):
    """What matching reads of a SEND_RECEIPT."""

    @property
    def sequence_id(self) -> int: ...


R = TypeVar("R", bound=Receipt)


# Positional arguments allowed: the unbatched send builds one op per message, and keywords cost it
# more than half a microsecond; the other sites name every field.
@dataclass(slots=True, eq=False)
class OpSend:
    """One SEND: a batch, a single message, or one chunk of a chunked message.

    ``entry`` is kept so the op can be written again, under a new producer id, after a reconnect.
    ``callbacks`` holds one callback per message of a batch (None where nobody waits), and for an
    unbatched message its callback if it has one, as a tuple (the cheaper to build; none for all but
    the last chunk of a chunked message); ``permits`` and ``memory`` are what completing the op
    gives back. ``done`` turns true after the op left the queue and its callbacks ran. ``ranged`` is
    false for a key-based batch: its SEND names no highest sequence id, as the official clients
    send it, since the ranges of a flush's key batches interleave and the broker would take every
    batch after the first for a duplicate of it.
    """

    sequence_id: int
    highest_sequence_id: int
    num_messages: int
    batched: bool
    entry: Entry
    callbacks: Sequence[SendCallback | None]
    permits: int
    memory: int
    created: float
    deadline: float | None
    chunk: bool = False
    done: bool = False
    ranged: bool = True
    txn: tuple[int, int] | None = None

    def matches(self, sequence_id: int) -> bool:
        """Whether a receipt for ``sequence_id`` acknowledges this op (any id in a batch's range)."""
        return self.sequence_id <= sequence_id <= self.highest_sequence_id

    def frame(self, send: SendEncoder) -> bytes:
        """The SEND frame of this op for the producer id ``send`` encodes."""
        highest = self.highest_sequence_id if self.batched and self.ranged else None
        command = send.encode(self.sequence_id, self.num_messages, highest, self.chunk, self.txn)
        entry = self.entry
        return encode_payload_command(command, entry.data, entry.checksum)

    def succeed(self, partition: int, ledger_id: int, entry_id: int) -> None:
        """Call each message's callback with its message id (a batch index for batched messages).

        Only for an op with a callback (not None) among its ``callbacks``: its receipt's id is read only then.
        """
        callbacks = self.callbacks
        ok = Result.Ok
        count = len(callbacks) if self.batched else 0
        # Message ids are built only for callbacks that exist.
        for index, callback in enumerate(callbacks):
            if callback is None:
                continue
            try:
                if count:
                    callback(ok, MessageId(partition, ledger_id, entry_id, index, count))
                else:
                    callback(ok, MessageId(partition, ledger_id, entry_id))
            except Exception:  # one failing callback must not cost the others theirs, nor kill the reader
                log.exception("send callback failed")

    def fail(self, error: PulsarException) -> None:
        """Call each message's callback with ``error``."""
        for callback in self.callbacks:
            fail_callback(callback, error)


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

    def pop_receipted(self, receipts: Iterable[R]) -> tuple[list[tuple[OpSend, R]], R | None]:
        """Remove the ops that ``receipts`` (in arrival order) complete, each with its receipt.

        A receipt older than the head is skipped (its op already timed out). The second value is
        the first receipt ahead of the head, if any: the broker lost ops, the receipts after it
        are not matched.
        """
        ops = self._ops
        completed: list[tuple[OpSend, R]] = []
        for receipt in receipts:
            if not ops:
                break
            op = ops[0]
            sequence_id = receipt.sequence_id
            if sequence_id < op.sequence_id:
                continue
            if sequence_id > op.highest_sequence_id:
                return completed, receipt
            completed.append((ops.popleft(), receipt))
        return completed, None

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


def fail_callback(callback: SendCallback | None, error: PulsarException) -> None:
    """Tell a send callback its message failed (None: nobody waits)."""
    if callback is None:
        return
    fail = getattr(callback, "fail", None)
    try:
        if fail is not None:
            fail(error)  # our own waiters keep the exception's message
        else:
            callback(error.result, None)
    except Exception:
        log.exception("send callback failed")
