"""A topic partition's transaction buffer: which of its entries open, committed and aborted
transactions hold, as Pulsar's TopicTransactionBuffer keeps it.

A message sent in a transaction is stored at once, as an entry that carries the transaction's id;
the transaction's end appends a *marker* entry on the partition (commit or abort). Consumers and
readers see nothing at or after the first entry of the oldest transaction still open (Pulsar's max
read position), so what follows an open transaction waits for it too. The entries of an aborted
transaction and every marker are never delivered: dispatch acknowledges them as it reads past them.
The buffer is rebuilt at load from the stored transaction ids and markers.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

from airflow_pulsar.client.protocol import checksum
from airflow_pulsar.client.protocol.PulsarApi_pb2 import MessageMetadata
from airflow_pulsar.client.protocol.wire import U64_MASK
from airflow_pulsar.client.transaction.ids import TxnId

from ..commit import Commit
from ..ledger import Ledger
from ..storage import StoredEntry

# Pulsar's MarkerType values of a transaction's end (TXN_COMMIT, TXN_ABORT; 20 is TXN_COMMITTING,
# which Pulsar never writes), and the producer name its markers carry.
TXN_COMMIT_MARKER = 21
TXN_ABORT_MARKER = 22
MARKER_PRODUCER = "pulsar.txn.marker"


def marker_entry(txn: TxnId, commit: bool) -> StoredEntry:
    """The marker entry of a transaction's end: metadata only, as Pulsar's Markers.newTxnMarker
    writes it (sequence id -1, no payload)."""
    marker = TXN_COMMIT_MARKER if commit else TXN_ABORT_MARKER
    metadata = MessageMetadata(
        producer_name=MARKER_PRODUCER,
        sequence_id=U64_MASK,
        publish_time=int(time.time() * 1000),
        marker_type=marker,
        txnid_least_bits=txn.least_bits,
        txnid_most_bits=txn.most_bits,
    ).SerializeToString()
    data = struct.pack(">I", len(metadata)) + metadata
    return StoredEntry(-1, int(time.time() * 1000), 1, checksum.crc32c(data), None, data, (txn.most_bits, txn.least_bits), marker)


class TransactionBuffer:
    """The transaction state of one topic partition's entries."""

    def __init__(self, ledger: Ledger, stored: list[tuple[int, int, int, int | None]] = ()):  # type: ignore[assignment]
        self.ledger = ledger
        # Entries of each transaction not yet ended here, in order.
        self._open: dict[TxnId, list[int]] = {}
        # Markers, and entries of aborted transactions: never delivered.
        self._hidden: set[int] = set()
        # The transaction of each entry sent in one, and of each marker (the admin API's headers name it).
        self._txn_of: dict[int, TxnId] = {}
        # Transactions whose marker is stored here, True if committed: a second end (a restart
        # finishing one) adds none.
        self._ended: dict[TxnId, bool] = {}
        self.loaded_at = int(time.time() * 1000)
        # Transactions ended on this partition since it was loaded (Pulsar's committedTxnCount, abortedTxnCount).
        self.committed = 0
        self.aborted = 0
        # Called when an end moved the max read position or hid entries: dispatch may go on.
        self.on_end: list[Callable[[], None]] = []
        for entry_id, most, least, marker in stored:
            txn = self._txn_of[entry_id] = TxnId(most, least)
            if marker is None:
                self._open.setdefault(txn, []).append(entry_id)
            else:
                self._settle(txn, marker == TXN_COMMIT_MARKER, entry_id, count=False)

    def add(self, txn: TxnId, entry_id: int) -> None:
        """A committed entry sent in ``txn``."""
        self._txn_of[entry_id] = txn
        self._open.setdefault(txn, []).append(entry_id)

    def open_transactions(self) -> set[TxnId]:
        """The transactions with entries here and no marker yet."""
        return set(self._open)

    def max_read_entry(self) -> int:
        """The last entry dispatch may read: before the first entry of the oldest open transaction."""
        if self._open:
            return min(entries[0] for entries in self._open.values()) - 1
        return self.ledger.last_entry_id

    def hides(self, entry_id: int) -> bool:
        """Whether the entry is a marker or was sent in an aborted transaction."""
        return entry_id in self._hidden

    def transaction_of(self, entry_id: int) -> tuple[TxnId, bool] | None:
        """The transaction an entry was sent in (or whose marker it is), and whether it aborted; None for others."""
        txn = self._txn_of.get(entry_id)
        return None if txn is None else (txn, self._ended.get(txn) is False)

    def last_dispatchable_entry(self) -> int:
        """The last entry a reader may be given (Pulsar's last dispatchable position); -1 if none."""
        entry_id = self.max_read_entry()
        while entry_id >= 0 and entry_id in self._hidden:
            entry_id -= 1
        return entry_id

    def end(self, txn: TxnId, commit: bool) -> Commit:
        """Append the transaction's marker; once it is stored, its entries become visible
        (commit) or hidden (abort), and dispatch is told."""
        if txn in self._ended:
            finished = Commit()
            finished.finish(None)
            return finished
        entry = marker_entry(txn, commit)
        appended = self.ledger.append(entry, None, None)

        def stored(done: Commit) -> None:
            if done.exception() is None:
                self._settle(txn, commit, entry.entry_id, count=True)
                for listener in self.on_end:
                    listener()

        appended.add_done_callback(stored)
        return appended

    def _settle(self, txn: TxnId, commit: bool, marker_entry_id: int, count: bool) -> None:
        self._txn_of[marker_entry_id] = txn
        entries = self._open.pop(txn, [])
        self._ended[txn] = commit
        if not commit:
            self._hidden.update(entries)
        self._hidden.add(marker_entry_id)
        if count:
            if commit:
                self.committed += 1
            else:
                self.aborted += 1

    def stats(self) -> dict[str, int]:
        """Pulsar's transaction counts in a topic's stats."""
        return {"ongoingTxnCount": len(self._open), "abortedTxnCount": self.aborted, "committedTxnCount": self.committed}

    def buffer_stats(self) -> dict[str, Any]:
        """Pulsar's TransactionBufferStats (no snapshots here: the state is rebuilt from the stored entries)."""
        return {
            "state": "Ready",
            "maxReadPosition": f"{self.ledger.ledger_id}:{self.max_read_entry()}",
            "lastSnapshotTimestamps": 0,
            "ongoingTxnSize": len(self._open),
            "recoverStartTime": self.loaded_at,
            "recoverEndTime": self.loaded_at,
            "totalAbortedTransactions": sum(1 for committed in self._ended.values() if not committed),
        }

    def transaction_stats(self, txn: TxnId) -> dict[str, Any]:
        """Pulsar's TransactionInBufferStats: where the transaction's entries start while it is open, and whether it aborted."""
        entries = self._open.get(txn)
        started = {} if not entries else {"startPosition": f"{self.ledger.ledger_id}:{entries[0]}"}
        return started | {"aborted": self._ended.get(txn) is False}
