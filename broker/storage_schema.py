"""The broker database's tables, and the upgrade of a database an older broker wrote.

Entries sent in a transaction carry its id (``txn_most``, ``txn_least``); a transaction marker,
the entry its commit or abort writes on each partition, carries the id and its ``marker`` type
(Pulsar's MarkerType: 20 commit, 21 abort). A partial index finds a ledger's transaction entries
without reading the others. ``transactions`` is the coordinators' log, ``pending_acks`` each
subscription's acknowledgements held by open transactions.
"""

from __future__ import annotations

import sqlite3

_TABLES = """
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY,
    ledger_id INTEGER NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS partitioned_topics (
    name TEXT PRIMARY KEY,
    partitions INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    ledger_id INTEGER NOT NULL,
    entry_id INTEGER NOT NULL,
    publish_time INTEGER NOT NULL,
    num_messages INTEGER NOT NULL,
    checksum INTEGER NOT NULL,
    producer_name TEXT,
    sequence_id INTEGER,
    sticky_key BLOB,
    data BLOB NOT NULL,
    txn_most INTEGER,
    txn_least INTEGER,
    marker INTEGER,
    PRIMARY KEY (ledger_id, entry_id)
);
CREATE TABLE IF NOT EXISTS cursors (
    ledger_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (ledger_id, name)
);
CREATE TABLE IF NOT EXISTS namespaces (
    name TEXT PRIMARY KEY,
    policies TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS topic_policies (
    name TEXT PRIMARY KEY,
    policies TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tenants (
    name TEXT PRIMARY KEY,
    info TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS schemas (
    schema_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    type INTEGER NOT NULL,
    data BLOB NOT NULL,
    properties TEXT NOT NULL,
    timestamp INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    PRIMARY KEY (schema_id, version)
);
CREATE TABLE IF NOT EXISTS transactions (
    coordinator INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    status TEXT NOT NULL,
    opened INTEGER NOT NULL,
    timeout_at INTEGER NOT NULL,
    partitions TEXT NOT NULL,
    subscriptions TEXT NOT NULL,
    PRIMARY KEY (coordinator, sequence)
);
CREATE TABLE IF NOT EXISTS pending_acks (
    ledger_id INTEGER NOT NULL,
    subscription TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (ledger_id, subscription)
);
"""
_TRANSACTION_COLUMNS = ("txn_most", "txn_least", "marker")
_TRANSACTION_INDEX = (
    "CREATE INDEX IF NOT EXISTS entries_in_transactions ON entries (ledger_id, entry_id) WHERE txn_most IS NOT NULL"
)


def create_schema(conn: sqlite3.Connection) -> None:
    """Create whatever tables are missing, and add the transaction columns to an older ``entries``."""
    conn.executescript(_TABLES)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(entries)")}
    for column in _TRANSACTION_COLUMNS:
        if column not in columns:  # cheap in SQLite: existing rows are not rewritten
            conn.execute(f"ALTER TABLE entries ADD COLUMN {column} INTEGER")
    conn.execute(_TRANSACTION_INDEX)
