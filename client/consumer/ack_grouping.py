"""The acknowledgement grouping tracker: one partition consumer's acks and batch-index state.

Acknowledgements are collected and sent as one ACK command carrying many message ids, every
``group_time`` seconds or as soon as ``max_size`` are pending. Individual acks of whole entries
are a set of (ledger, entry); a cumulative ack keeps only the newest position. With
``group_time`` 0 every ack is sent at once.

The tracker is the one owner of the per-entry batch bitsets: for each batch entry delivered, the
indexes still unacknowledged (Pulsar's ack_set, 1 = unacknowledged), shared with the entry's
messages so that acking a message needs no lookup. An entry is acknowledged whole once its last
index is; before that, with batch-index acks enabled, its bitset goes out as a partial ack. It
also keeps the chunk ids of each chunked message, so acknowledging the message acknowledges
every chunk.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ..protocol.batch import ack_set_words
from ..protocol.frames import encode_command
from ..protocol.message_id import MessageId
from ..protocol.PulsarApi_pb2 import CommandAck, MessageIdData
from ..protocol.wire import U64_MASK, encode_ack
from ..timer import Timer, TimerHandle

Position = tuple[int, int]  # (ledger id, entry id)
# A cumulative ack: ledger, entry, the indexes left unacknowledged in it (None: the whole entry), batch size.
CumulativePosition = tuple[int, int, int | None, int]


class UnackedIndexes:
    """The indexes of a batch entry not yet acknowledged, as a bitset (bit i set: message i is not).

    One per entry, shared by every delivery of it, so acks of its messages need no lookup.
    """

    __slots__ = ("bits",)

    def __init__(self, bits: int):
        self.bits = bits


def id_data(ledger: int, entry: int, unacked: int | None = None, batch_size: int = 0) -> MessageIdData:
    """A MessageIdData for an ACK: ledger and entry, plus the ack_set of a partly acked batch."""
    data = MessageIdData(ledgerId=ledger & U64_MASK, entryId=entry & U64_MASK)
    if unacked is not None:
        data.ack_set.extend(ack_set_words(unacked, batch_size))
        data.batch_size = batch_size
    return data


def _in_order(entries: set[Position]) -> dict[int, list[int]]:
    """Each ledger's entry ids, ledgers and ids ascending: sorting ints, not (ledger, entry) tuples."""
    by_ledger: dict[int, list[int]] = {}
    for ledger, entry in entries:
        ids = by_ledger.get(ledger)
        if ids is None:
            by_ledger[ledger] = ids = []
        ids.append(entry)
    for ids in by_ledger.values():
        ids.sort()
    return dict(sorted(by_ledger.items()))


@dataclass
class PendingAcks:
    """What one flush sends: whole entries, partly acked batches and a cumulative position."""

    entries: set[Position] = field(default_factory=set)
    batches: dict[Position, tuple[int, int]] = field(default_factory=dict)  # -> (unacked mask, batch size)
    up_to: CumulativePosition | None = None

    def __bool__(self) -> bool:
        return bool(self.entries) or bool(self.batches) or self.up_to is not None

    @property
    def individual(self) -> list[MessageIdData]:
        """The ids of the Individual ACK: whole entries, then partly acked batches with their ack_set."""
        return [id_data(ledger, entry) for ledger, ids in _in_order(self.entries).items() for entry in ids] + [
            id_data(ledger, entry, mask, size) for (ledger, entry), (mask, size) in self.batches.items()
        ]

    @property
    def cumulative(self) -> MessageIdData | None:
        """The id of the Cumulative ACK, if there is one."""
        return None if self.up_to is None else id_data(*self.up_to)

    def frames(self, consumer_id: int) -> bytes:
        """The ACK frames that send these for ``consumer_id``, hand-encoded (as :meth:`commands` would be)."""
        frames = b""
        if self.entries or self.batches:
            partly = [(ledger, entry, ack_set_words(mask, size), size) for (ledger, entry), (mask, size) in self.batches.items()]
            # In order, as the official clients send them: a broker's cursor then advances its
            # mark-delete position entry by entry instead of holding the acks as gaps.
            frames = encode_command(encode_ack(consumer_id, CommandAck.Individual, _in_order(self.entries), partly))
        if self.up_to is not None:
            ledger, entry, unacked, size = self.up_to
            if unacked is None:
                ack = encode_ack(consumer_id, CommandAck.Cumulative, {ledger: (entry,)})
            else:
                ack = encode_ack(consumer_id, CommandAck.Cumulative, {}, [(ledger, entry, ack_set_words(unacked, size), size)])
            frames += encode_command(ack)
        return frames

    def commands(self) -> list[tuple[int, list[MessageIdData]]]:
        """(ack type, message ids) of each ACK command that sends these."""
        groups: list[tuple[int, list[MessageIdData]]] = []
        if self.entries or self.batches:
            groups.append((CommandAck.Individual, self.individual))
        cumulative = self.cumulative
        if cumulative is not None:
            groups.append((CommandAck.Cumulative, [cumulative]))
        return groups


class AckGroupingTracker:
    """Groups acknowledgements of one partition consumer; ``send`` writes them, False if it could not.

    With ``batch_index_ack`` a batch entry partly acknowledged is sent as its bitset; without, it
    waits until every index is acknowledged.
    """

    def __init__(
        self,
        send: Callable[[PendingAcks], bool],
        timer: Timer,
        group_time: float = 0.1,
        max_size: int = 1000,
        batch_index_ack: bool = False,
    ):
        self._send = send
        self._timer = timer
        self.group_time = group_time
        self.max_size = max_size
        self.batch_index_ack = batch_index_ack
        self._lock = threading.Lock()
        self._entries: set[Position] = set()
        self._batches: dict[Position, tuple[int, int]] = {}  # -> (unacked mask, batch size)
        self._cumulative: CumulativePosition | None = None
        self._unacked: dict[Position, UnackedIndexes] = {}  # batch entry -> indexes still unacked
        self._chunk_ids: dict[Position, list[MessageId]] = {}  # last chunk -> every chunk
        self._scheduled: TimerHandle | None = None
        self.acks_sent = 0

    @property
    def pending(self) -> int:
        """Ids waiting for the next flush."""
        return len(self._entries) + len(self._batches) + (self._cumulative is not None)

    # ---- what was delivered ----

    def track_batch(self, ledger: int, entry: int, unacked: int) -> UnackedIndexes:
        """A batch entry arrived with the indexes in ``unacked`` still to acknowledge: its shared ack state."""
        with self._lock:
            state = self._unacked.get((ledger, entry))
            if state is None:
                state = self._unacked[(ledger, entry)] = UnackedIndexes(unacked)
            else:  # a redelivery: acks of messages from either delivery count
                state.bits = unacked
        return state

    def track_chunks(self, ledger: int, entry: int, chunk_ids: list[MessageId]) -> None:
        """A chunked message was completed by this entry: acknowledging it acknowledges every chunk."""
        with self._lock:
            self._chunk_ids[(ledger, entry)] = chunk_ids

    def is_duplicate(self, ledger: int, entry: int) -> bool:
        """Whether a (re)delivered entry is already covered by an ack not yet flushed."""
        cumulative = self._cumulative
        if cumulative is not None and (ledger, entry) < (cumulative[0], cumulative[1]):
            return True
        return (ledger, entry) in self._entries

    # ---- acknowledging ----

    def add_message(self, ledger: int, entry: int, index: int = -1, batch_size: int = 0, state: UnackedIndexes | None = None) -> bool:
        """Acknowledge one message (``index`` -1: a message that is a whole entry); True if an ack is now pending.

        ``state`` is the entry's ack state when the caller holds it (a received message does).
        A batch message whose entry still has other indexes unacknowledged is pending only with
        batch-index acks.
        """
        key = (ledger, entry)
        remaining = 0
        due = False
        lock = self._lock
        lock.acquire()  # cheaper than ``with`` on this path: one round of the lock per ack
        try:
            if index >= 0 and batch_size > 0:
                if state is None:
                    state = self._unacked.get(key)
                    if state is None:
                        state = self._unacked[key] = UnackedIndexes((1 << batch_size) - 1)
                remaining = state.bits = state.bits & ~(1 << index)
                if not remaining:
                    self._unacked.pop(key, None)
            if not remaining:
                if self._chunk_ids or self._batches:
                    self._pend_entry(key)
                else:  # the usual case, spelled out
                    self._entries.add(key)
                # With the timer set, only a full group is due: counted here, without a call.
                if self._scheduled is None or len(self._entries) + len(self._batches) + (self._cumulative is not None) >= self.max_size:
                    due = self._due()
        finally:
            lock.release()
        if not remaining:
            if due:
                self.flush()
            return True
        if not self.batch_index_ack:
            return False
        self.add_batch_indexes(ledger, entry, remaining, batch_size)
        return True

    def add_entry(self, ledger: int, entry: int) -> None:
        """Acknowledge a whole entry (a message, every message of a batch, or a chunked message's every chunk)."""
        with self._lock:
            self._pend_entry((ledger, entry))
        self._after_add()

    def add_batch_indexes(self, ledger: int, entry: int, unacked: int, batch_size: int) -> None:
        """Acknowledge the batch indexes whose bits are clear in ``unacked``."""
        with self._lock:
            if (ledger, entry) not in self._entries:
                self._batches[(ledger, entry)] = (unacked, batch_size)
        self._after_add()

    def _pend_entry(self, key: Position) -> None:
        # Under the lock.
        chunk_ids = self._chunk_ids.pop(key, None) if self._chunk_ids else None
        for chunk in chunk_ids or ():
            self._entries.add((chunk.ledger_id(), chunk.entry_id()))
        self._entries.add(key)
        self._batches.pop(key, None)

    def add_cumulative_message(self, ledger: int, entry: int, index: int, batch_size: int) -> None:
        """Acknowledge every message up to message ``index`` of an entry (-1: the whole entry)."""
        partial = 0 <= index < batch_size - 1
        with self._lock:
            for key in [k for k in self._unacked if k[1] < entry or (k[1] == entry and not partial)]:
                del self._unacked[key]
        if not partial:
            self.add_cumulative(ledger, entry)
        elif self.batch_index_ack:
            # Everything after ``index`` stays unacknowledged in this entry.
            self.add_cumulative(ledger, entry, ((1 << batch_size) - 1) & ~((1 << (index + 1)) - 1), batch_size)
        else:
            self.add_cumulative(ledger, entry - 1)

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

    # ---- flushing ----

    def _after_add(self) -> None:
        with self._lock:
            due = self._due()
        if due:
            self.flush()

    def _due(self) -> bool:
        """Under the lock: whether what is pending goes out now; if not, the timer is set to send it."""
        if self.group_time <= 0 or len(self._entries) + len(self._batches) + (self._cumulative is not None) >= self.max_size:
            return True
        if self._scheduled is None:
            self._scheduled = self._timer.call_later(self.group_time, self._on_timer)
        return False

    def _on_timer(self) -> None:
        with self._lock:
            self._scheduled = None
        self.flush()

    def take(self) -> PendingAcks:
        """Remove and return everything pending (for a flush with a receipt)."""
        with self._lock:
            pending = PendingAcks(self._entries, self._batches, self._cumulative)
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
            self.acks_sent += len(pending.entries) + len(pending.batches) + (pending.up_to is not None)
        else:
            self.restore(pending)

    def restore(self, pending: PendingAcks) -> None:
        """Put back acks that could not be sent (they go out after the reconnect)."""
        with self._lock:
            self._entries |= pending.entries
            for key, batch in pending.batches.items():
                self._batches.setdefault(key, batch)
            if self._cumulative is None:
                self._cumulative = pending.up_to

    def close(self) -> None:
        """Stop the timer (flush first if the acks matter)."""
        with self._lock:
            if self._scheduled is not None:
                self._scheduled.cancel()
                self._scheduled = None


def _index_rank(unacked: int | None) -> int:
    # A partial cumulative ack (some indexes still unacked) ranks below the whole entry.
    return 1 << 62 if unacked is None else (unacked & -unacked).bit_length()
