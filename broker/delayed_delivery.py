"""Delayed delivery: entries whose ``deliver_at_time`` (the producer's ``deliver_at`` /
``deliver_after``) lies in the future are held back, and handed back once due by a timer set for
the earliest of them. Shared and Key_Shared subscriptions hold them back; Exclusive and Failover
ones deliver them at once, in order, as Pulsar does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from airflow_pulsar.client.protocol.frames import split_entry
from airflow_pulsar.client.protocol.PulsarApi_pb2 import MessageMetadata
from airflow_pulsar.client.protocol.wire import tag

from .storage import StoredEntry

# The key protobuf writes before a MessageMetadata's deliver_at_time (two bytes).
_DELIVER_AT_TAG = tag(MessageMetadata, "deliver_at_time")


def deliver_at(data: bytes) -> int:
    """The ``deliver_at_time`` (ms) of a stored entry, 0 when it has none.

    Most entries have none: a search of the metadata bytes for the field's tag rules that out
    without decoding them (a match may be a false one, which the decoding then tells).
    """
    end = 4 + int.from_bytes(data[:4], "big")
    if data.find(_DELIVER_AT_TAG, 4, end) < 0:
        return 0
    metadata, _ = split_entry(data)
    return metadata.deliver_at_time if metadata.HasField("deliver_at_time") else 0


class DelayedEntries:
    """The entries of one subscription held back until their time; ``release`` gets the ids of
    those that came due (or all of them, on :meth:`release_all`)."""

    def __init__(self, release: Callable[[list[int]], None]):
        self.due_at: dict[int, int] = {}  # entry id -> deliver_at_time (ms)
        self._release = release
        self._timer: asyncio.TimerHandle | None = None
        self._next_due = float("inf")

    def __len__(self) -> int:
        return len(self.due_at)

    def hold_back(self, entry: StoredEntry) -> bool:
        """Hold back an entry that is not due yet; False if it is due."""
        due = deliver_at(entry.data)
        if due <= time.time() * 1000:
            return False
        self.due_at[entry.entry_id] = due
        if due < self._next_due:
            self._schedule()
        return True

    def release_due(self, everything: bool = False) -> None:
        """Hand back the entries now due (or all of them)."""
        now = time.time() * 1000
        due = [entry_id for entry_id, at in self.due_at.items() if everything or at <= now]
        for entry_id in due:
            del self.due_at[entry_id]
        self._schedule()
        self._release(due)

    def release_all(self) -> None:
        """Hand back every held entry (the subscription stopped delaying)."""
        self.release_due(everything=True)

    def clear(self) -> None:
        """Forget every held entry (the cursor moved)."""
        self.due_at.clear()
        self._schedule()

    def _schedule(self) -> None:
        """Set the timer for the earliest held entry (none when nothing is held)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._next_due = min(self.due_at.values(), default=float("inf"))
        if self.due_at:
            wait = max(self._next_due / 1000 - time.time(), 0.0)
            self._timer = asyncio.get_running_loop().call_later(wait, self.release_due)
