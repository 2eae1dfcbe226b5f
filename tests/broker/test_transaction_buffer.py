"""The transaction buffer as a restart rebuilds it from the stored entries, and the upgrade of a
database an older broker wrote (its entries gain the transaction columns)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from airflow_pulsar.broker.ledger import Ledger
from airflow_pulsar.broker.storage import Storage
from airflow_pulsar.broker.transactions.buffer import TXN_ABORT_MARKER, TXN_COMMIT_MARKER, TransactionBuffer
from airflow_pulsar.client.transaction.ids import TxnId


def test_the_buffer_rebuilt_from_stored_entries() -> None:
    # 0 plain, 1-2 committed (marker 3), 4 aborted (marker 5), 6 plain, 7 and 9 open, 8 plain
    ledger = Ledger(None, 1, [(entry, 1, 10) for entry in range(10)])  # type: ignore[arg-type]
    stored = [
        (1, 0, 1, None), (2, 0, 1, None), (3, 0, 1, TXN_COMMIT_MARKER),
        (4, 1, 7, None), (5, 1, 7, TXN_ABORT_MARKER),
        (7, 0, 2, None), (9, 0, 2, None),
    ]
    buffer = TransactionBuffer(ledger, stored)
    assert buffer.open_transactions() == {TxnId(0, 2)}
    assert buffer.max_read_entry() == 6, "dispatch stops before the open transaction's first entry"
    assert [entry for entry in range(10) if buffer.hides(entry)] == [3, 4, 5]
    assert buffer.last_dispatchable_entry() == 6
    assert buffer.transaction_stats(TxnId(0, 2)) == {"startPosition": "1:7", "aborted": False}
    assert buffer.transaction_stats(TxnId(1, 7)) == {"aborted": True}
    assert buffer.buffer_stats()["totalAbortedTransactions"] == 1
    # Counts since the topic was loaded, as Pulsar's: what the stored markers say is not counted again.
    assert buffer.stats() == {"ongoingTxnCount": 1, "abortedTxnCount": 0, "committedTxnCount": 0}


def test_the_last_dispatchable_entry_skips_markers_and_aborted_entries() -> None:
    ledger = Ledger(None, 1, [(entry, 1, 10) for entry in range(4)])  # type: ignore[arg-type]
    buffer = TransactionBuffer(ledger, [(2, 0, 3, None), (3, 0, 3, TXN_ABORT_MARKER)])
    assert buffer.max_read_entry() == 3
    assert buffer.last_dispatchable_entry() == 1


def test_an_older_database_gains_the_transaction_columns(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "broker.sqlite")
    conn.execute(
        "CREATE TABLE entries (ledger_id INTEGER NOT NULL, entry_id INTEGER NOT NULL, publish_time INTEGER NOT NULL,"
        " num_messages INTEGER NOT NULL, checksum INTEGER NOT NULL, producer_name TEXT, sequence_id INTEGER,"
        " sticky_key BLOB, data BLOB NOT NULL, PRIMARY KEY (ledger_id, entry_id))"
    )
    conn.execute("INSERT INTO entries VALUES (1, 0, 0, 1, 0, 'p', 0, NULL, x'00000000')")
    conn.commit()
    conn.close()
    storage = Storage(tmp_path)
    try:
        assert storage.load_entry_index(1) == [(0, 1, 4)]
        assert storage.load_transaction_entries(1) == []
    finally:
        storage.close()
