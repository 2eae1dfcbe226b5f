"""A subscription's cursor: what it has acknowledged.

Entries up to and including the *mark-delete* position are acknowledged. Above it, the cursor
keeps the individually acknowledged entries and, for batches acknowledged one index at a time,
a bitset per entry in which a set bit means "not yet acknowledged" (Pulsar's ack_set).
"""

from __future__ import annotations

from typing import Any

from airflow_pulsar.client.protocol.batch import unacked_mask

NO_ENTRY = -1


class Cursor:
    """Acknowledgement state of one subscription on one topic partition."""

    __slots__ = ("name", "durable", "mark_delete", "acked", "batch_unacked")

    def __init__(self, name: str, durable: bool, mark_delete: int = NO_ENTRY):
        self.name = name
        self.durable = durable
        self.mark_delete = mark_delete
        self.acked: set[int] = set()
        self.batch_unacked: dict[int, int] = {}

    # ---- persistence ----

    def state(self) -> dict[str, Any]:
        """A JSON-able snapshot for storage."""
        return {
            "mark_delete": self.mark_delete,
            "acked": sorted(self.acked),
            "batch": {str(entry): bits for entry, bits in self.batch_unacked.items()},
        }

    @classmethod
    def from_state(cls, name: str, state: dict[str, Any]) -> Cursor:
        """Rebuild a durable cursor from a snapshot."""
        cursor = cls(name, True, state["mark_delete"])
        cursor.acked = set(state["acked"])
        cursor.batch_unacked = {int(entry): bits for entry, bits in state["batch"].items()}
        return cursor

    # ---- acknowledgement ----

    def is_acked(self, entry_id: int) -> bool:
        """Whether the whole entry is acknowledged."""
        return entry_id <= self.mark_delete or entry_id in self.acked

    def unacked_bits(self, entry_id: int) -> int | None:
        """The still-unacknowledged batch indexes of a partly acknowledged entry, else None."""
        return self.batch_unacked.get(entry_id)

    def ack(self, entry_id: int) -> bool:
        """Acknowledge a whole entry; returns whether anything changed."""
        if self.is_acked(entry_id):
            return False
        self.batch_unacked.pop(entry_id, None)
        if entry_id == self.mark_delete + 1:
            self.mark_delete = entry_id
            self._advance()
        else:
            self.acked.add(entry_id)
        return True

    def ack_batch_indexes(self, entry_id: int, unacked_words: list[int], batch_size: int) -> bool:
        """Acknowledge the batch indexes whose bits are clear in ``unacked_words``."""
        if self.is_acked(entry_id):
            return False
        full = (1 << batch_size) - 1 if batch_size > 0 else -1
        before = self.batch_unacked.get(entry_id, full)
        after = before & unacked_mask(unacked_words)
        # The official client leaves batch_size out: no bit left set then means all acknowledged.
        if after == 0 or (batch_size > 0 and after & full == 0):
            return self.ack(entry_id)
        if after == before:
            return False
        self.batch_unacked[entry_id] = after
        return True

    def ack_cumulative(self, entry_id: int) -> bool:
        """Acknowledge every entry up to and including ``entry_id``."""
        if entry_id <= self.mark_delete:
            return False
        self.mark_delete = entry_id
        self.acked = {e for e in self.acked if e > entry_id}
        self.batch_unacked = {e: b for e, b in self.batch_unacked.items() if e > entry_id}
        self._advance()
        return True

    def reset(self, mark_delete: int) -> None:
        """Move the cursor (seek): everything after ``mark_delete`` becomes unacknowledged."""
        self.mark_delete = mark_delete
        self.acked.clear()
        self.batch_unacked.clear()

    def _advance(self) -> None:
        # Fold individually acknowledged entries that now follow the mark-delete into it.
        acked = self.acked
        while self.mark_delete + 1 in acked:
            self.mark_delete += 1
            acked.discard(self.mark_delete)


def estimated_backlog_size(total_bytes: int, entries: int, mark_delete: int) -> int:
    """Pulsar's ``backlogSize`` of a cursor on a one-ledger topic: the ledger's bytes less those
    consumed up to the mark-delete, reckoned at the ledger's average entry size (exact only once
    everything is consumed); individual acks above the mark-delete do not count."""
    if entries <= 0 or mark_delete < 0:
        return total_bytes
    if mark_delete + 1 >= entries:
        return 0
    return total_bytes - (mark_delete + 1) * (total_bytes // entries)
