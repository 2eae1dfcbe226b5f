"""The acknowledgement grouping tracker (seed 002).

Acknowledgements are collected and sent as one ACK command carrying many message ids, every
``group_time`` seconds or as soon as ``max_size`` are pending. Individual acks of whole entries
are a set of (ledger, entry); batch-index acks keep, per entry, the bitset of indexes still
unacknowledged (Pulsar's ack_set, 1 = unacknowledged); a cumulative ack keeps only the newest
position. With ``group_time`` 0 every ack is sent at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ..protocol.batch import ack_set_words
from ..protocol.PulsarApi_pb2 import MessageIdData
from ..timer import Timer, TimerHandle

_U64 = (1 << 64) - 1


@dataclass
class PendingAcks:
    """What one flush sends: individual ids (ack_set for partial batches) and a cumulative id."""

    individual: list[MessageIdData] = field(default_factory=list)
    cumulative: MessageIdData | None = None

    def __bool__(self) -> bool:
        return bool(self.individual) or self.cumulative is not None


def id_data(ledger: int, entry: int, unacked: int | None = None, batch_size: int = 0) -> MessageIdData:
    """A MessageIdData for an ACK: ledger and entry, plus the ack_set of a partly acked batch."""
    data = MessageIdData(ledgerId=ledger & _U64, entryId=entry & _U64)
    if unacked is not None:
        data.ack_set.extend(ack_set_words(unacked, batch_size))
        data.batch_size = batch_size
    return data


class AckGroupingTracker:
    """Groups acknowledgements of one partition consumer; ``send`` writes them, False if it could not."""

    def __init__(
        self,
        send: Callable[[PendingAcks], bool],
        timer: Timer,
        group_time: float = 0.1,
        max_size: int = 1000,
    ):
        self._send = send
        self._timer = timer
        self.group_time = group_time
        self.max_size = max_size
        self._lock = threading.Lock()
        self._entries: set[tuple[int, int]] = set()
        self._batches: dict[tuple[int, int], tuple[int, int]] = {}  # -> (unacked mask, batch size)
        self._cumulative: tuple[int, int, int | None, int] | None = None  # ledger, entry, mask, size
        self._scheduled: TimerHandle | None = None
        self.acks_sent = 0

    @property
    def pending(self) -> int:
        """Ids waiting for the next flush."""
        return len(self._entries) + len(self._batches) + (self._cumulative is not None)

    def add_entry(self, ledger: int, entry: int) -> None:
        """Acknowledge a whole entry (a message, or every message of a batch)."""
        with self._lock:
            self._entries.add((ledger, entry))
            self._batches.pop((ledger, entry), None)
        self._after_add()

    def add_batch_indexes(self, ledger: int, entry: int, unacked: int, batch_size: int) -> None:
        """Acknowledge the batch indexes whose bits are clear in ``unacked``."""
        with self._lock:
            if (ledger, entry) not in self._entries:
                self._batches[(ledger, entry)] = (unacked, batch_size)
        self._after_add()

    def add_cumulative(self, ledger: int, entry: int, unacked: int | None = None, batch_size: int = 0) -> None:
        """Acknowledge everything up to an entry (with ``unacked``: up to an index inside it)."""
        current = self._cumulative
        if unacked is None and current is not None and current[:3] == (ledger, entry, None):
            return  # already pending, as when a reader acks each message of a batch in turn
        with self._lock:
            current = self._cumulative
            # Only the newest position matters; an older one is already covered.
            if current is None or (ledger, entry, _index_rank(unacked)) > (current[0], current[1], _index_rank(current[2])):
                self._cumulative = (ledger, entry, unacked, batch_size)
        self._after_add()

    def is_duplicate(self, ledger: int, entry: int) -> bool:
        """Whether a (re)delivered entry is already covered by an ack not yet flushed."""
        cumulative = self._cumulative
        if cumulative is not None and (ledger, entry) < (cumulative[0], cumulative[1]):
            return True
        return (ledger, entry) in self._entries

    def _after_add(self) -> None:
        if self.group_time <= 0 or self.pending >= self.max_size:
            self.flush()
            return
        with self._lock:
            if self._scheduled is not None:
                return
            self._scheduled = self._timer.call_later(self.group_time, self._on_timer)

    def _on_timer(self) -> None:
        with self._lock:
            self._scheduled = None
        self.flush()

    def take(self) -> PendingAcks:
        """Remove and return everything pending (for a flush with a receipt)."""
        with self._lock:
            pending = PendingAcks(
                [id_data(ledger, entry) for ledger, entry in self._entries]
                + [id_data(ledger, entry, mask, size) for (ledger, entry), (mask, size) in self._batches.items()],
                id_data(*self._cumulative) if self._cumulative is not None else None,
            )
            self._entries = set()
            self._batches = {}
            self._cumulative = None
        return pending

    def flush(self) -> None:
        """Send what is pending; if the connection is down, keep it for the next flush."""
        pending = self.take()
        if not pending:
            return
        if self._send(pending):
            self.acks_sent += len(pending.individual) + (pending.cumulative is not None)
        else:
            self.restore(pending)

    def restore(self, pending: PendingAcks) -> None:
        """Put back acks that could not be sent (they go out after the reconnect)."""
        with self._lock:
            for data in pending.individual:
                key = (_signed(data.ledgerId), _signed(data.entryId))
                if data.ack_set:
                    self._batches.setdefault(key, (_mask(data.ack_set), data.batch_size))
                else:
                    self._entries.add(key)
            if pending.cumulative is not None and self._cumulative is None:
                data = pending.cumulative
                mask = _mask(data.ack_set) if data.ack_set else None
                self._cumulative = (_signed(data.ledgerId), _signed(data.entryId), mask, data.batch_size)

    def close(self) -> None:
        """Stop the timer (flush first if the acks matter)."""
        with self._lock:
            if self._scheduled is not None:
                self._scheduled.cancel()
                self._scheduled = None


def _index_rank(unacked: int | None) -> int:
    # A partial cumulative ack (some indexes still unacked) ranks below the whole entry.
    return 1 << 62 if unacked is None else (unacked & -unacked).bit_length()


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _mask(words: list[int]) -> int:
    mask = 0
    for i, word in enumerate(words):
        mask |= (word & _U64) << (64 * i)
    return mask
