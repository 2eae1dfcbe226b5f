"""Durable storage for the standalone broker: SQLite in WAL mode with group commit.

Reads run on the caller's (event loop) thread through their own connection; every write goes to
one writer thread that commits whatever has queued up in a single transaction, so one fsync
covers a whole group of sends and acks. A write completes only after its commit (and fsync,
unless switched off), which is what lets the broker send a receipt. An entry's completion is a
:class:`Commit`, whose callbacks a committed group runs in one go on the event loop (an asyncio
future per entry would schedule each callback on its own); other writes return futures.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_pulsar.client.protocol.wire import signed64

from .commit import Commit
from .data_dir import make_private_file
from .storage_faults import StorageFaultSwitch
from .storage_schema import create_schema

log = logging.getLogger(__name__)


_INSERT_ENTRY = (
    "INSERT INTO entries (ledger_id, entry_id, publish_time, num_messages, checksum, producer_name,"
    " sequence_id, sticky_key, data, txn_most, txn_least, marker) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# Entries go in many rows per statement: the sqlite3 module lets go of the GIL around every
# statement step, and one step per row would hand the GIL to and fro with the event loop for
# every entry. Power-of-two row counts keep the distinct statements (and their cache) few.
_ROWS_PER_INSERT = 256
_SAVE_CURSOR = "INSERT OR REPLACE INTO cursors (ledger_id, name, state) VALUES (?, ?, ?)"
# SQLite integers are signed 64-bit, as Pulsar's Java longs; uint64 wire values above wrap as there.
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass(slots=True)
class StoredEntry:
    """One entry (a single message or a whole batch) as kept on disk.

    ``data`` is the checksum-covered region ``[u32 metadata size][metadata][payload]``. ``txn``:
    the (most, least) bits of the transaction it was sent in; ``marker``: the marker type of a
    transaction's commit or abort marker. Both are set when it is stored, not when it is read back.
    """

    entry_id: int
    publish_time: int
    num_messages: int
    checksum: int
    sticky_key: bytes | None
    data: bytes
    txn: tuple[int, int] | None = None
    marker: int | None = None


Done = Callable[[BaseException | None], None]


@dataclass(slots=True)
class _Write:
    sql: str
    params: tuple[Any, ...]
    done: list[Done]


class LedgerFencedError(Exception):
    """An entry refused without being written: an earlier entry of its ledger failed to commit, and
    the ledger takes no entry until it has settled every one in flight (see :meth:`Storage.unfence`)."""


class Storage:
    """The broker's database: topics, entries and cursors.

    ``max_bytes`` caps the database (SQLite's max_page_count): past it, commits fail as on a full
    disk. ``faults`` is the test-only switch of injected failures (:mod:`.storage_faults`).
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        fsync: bool = True,
        max_bytes: int | None = None,
        faults: StorageFaultSwitch | None = None,
    ):
        self.path = Path(data_dir) / "broker.sqlite"
        make_private_file(self.path)
        for suffix in ("-wal", "-shm"):  # SQLite creates these with the database file's mode
            companion = self.path.with_name(self.path.name + suffix)
            if companion.exists():  # left by an earlier run, maybe wider
                make_private_file(companion)
        self.fsync = fsync
        self.max_bytes = max_bytes
        self._faults = faults
        self._reader = self._connect()
        create_schema(self._reader)
        self._queue: list[_Write] = []
        # Cursor states coalesce: only the newest state of a cursor needs writing.
        self._cursor_writes: dict[tuple[int, str], _Write] = {}
        # The queue's lock, taken directly on the append path (a Condition's ``with`` costs more).
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._closing = False
        # Ledgers with a failed entry: later entries of theirs are refused, not written after a
        # gap (each a prefix of entries, in order), until their ledger unfences them.
        self._fenced_ledgers: set[int] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        # FULL syncs the WAL on every commit; with group commit that is one fsync per group.
        conn.execute(f"PRAGMA synchronous={'FULL' if self.fsync else 'OFF'}")
        if self.max_bytes is not None:
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count={max(1, self.max_bytes // page_size)}")
        return conn

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the writer thread; futures resolve on ``loop``."""
        self._loop = loop
        self._thread = threading.Thread(target=self._write_loop, name="storage-writer", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Commit what is queued, stop the writer and close both connections."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
        self._reader.close()

    # ---- reads (caller's thread) ----

    def load_topics(self) -> dict[str, int]:
        """Every non-partitioned topic (or partition) with its ledger id."""
        return dict(self._reader.execute("SELECT name, ledger_id FROM topics"))

    def load_partitioned_topics(self) -> dict[str, int]:
        """Every partitioned topic with its partition count."""
        return dict(self._reader.execute("SELECT name, partitions FROM partitioned_topics"))

    def load_entry_index(self, ledger_id: int) -> list[tuple[int, int, int]]:
        """(entry id, message count, size in bytes) of every entry of a ledger, in order."""
        return self._reader.execute(
            "SELECT entry_id, num_messages, length(data) FROM entries WHERE ledger_id = ? ORDER BY entry_id",
            (ledger_id,),
        ).fetchall()

    def load_namespaces(self) -> dict[str, dict[str, Any]]:
        """Every namespace created through the admin API, with its policies."""
        rows = self._reader.execute("SELECT name, policies FROM namespaces")
        return {name: json.loads(policies) for name, policies in rows}

    def load_tenants(self) -> dict[str, dict[str, Any]]:
        """Every tenant created through the admin API, with its TenantInfo."""
        rows = self._reader.execute("SELECT name, info FROM tenants")
        return {name: json.loads(info) for name, info in rows}

    def load_topic_policies(self) -> dict[str, dict[str, Any]]:
        """The topic-level policies of every topic that has some."""
        rows = self._reader.execute("SELECT name, policies FROM topic_policies")
        return {name: json.loads(policies) for name, policies in rows}

    def load_schemas(self) -> list[tuple[str, int, int, bytes, dict[str, str], int, bool]]:
        """Every schema version: (schema id, version, type, definition, properties, timestamp, deleted), in order."""
        rows = self._reader.execute(
            "SELECT schema_id, version, type, data, properties, timestamp, deleted FROM schemas ORDER BY schema_id, version"
        )
        return [(sid, version, kind, data, json.loads(props), stamp, bool(gone)) for sid, version, kind, data, props, stamp, gone in rows]

    def load_cursors(self, ledger_id: int) -> dict[str, dict[str, Any]]:
        """Every durable cursor of a ledger with its saved state."""
        rows = self._reader.execute("SELECT name, state FROM cursors WHERE ledger_id = ?", (ledger_id,))
        return {name: json.loads(state) for name, state in rows}

    def last_sequence_ids(self, ledger_id: int) -> dict[str, int]:
        """The highest persisted sequence id of each producer name, for deduplication."""
        rows = self._reader.execute(
            "SELECT producer_name, max(sequence_id) FROM entries WHERE ledger_id = ? AND producer_name IS NOT NULL"
            " GROUP BY producer_name",
            (ledger_id,),
        )
        return dict(rows)

    def load_transaction_entries(self, ledger_id: int) -> list[tuple[int, int, int, int | None]]:
        """(entry id, txn most bits, txn least bits, marker type or None) of every entry of a ledger
        sent in a transaction or marking one's end, in order."""
        return self._reader.execute(
            "SELECT entry_id, txn_most, txn_least, marker FROM entries WHERE ledger_id = ? AND txn_most IS NOT NULL"
            " ORDER BY entry_id",
            (ledger_id,),
        ).fetchall()

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """The rows of a read (on the caller's thread), for a part of the broker that owns its table."""
        return self._reader.execute(sql, params).fetchall()

    def read_entries(self, ledger_id: int, first: int, last: int, limit: int) -> list[StoredEntry]:
        """Up to ``limit`` entries with ids in ``[first, last]``, in order."""
        rows = self._reader.execute(
            "SELECT entry_id, publish_time, num_messages, checksum, sticky_key, data FROM entries"
            " WHERE ledger_id = ? AND entry_id BETWEEN ? AND ? ORDER BY entry_id LIMIT ?",
            (ledger_id, first, last, limit),
        )
        return [StoredEntry(*row) for row in rows]

    def first_entry_at_or_after(self, ledger_id: int, publish_time: int) -> int | None:
        """The first entry published at or after ``publish_time`` (ms), if any."""
        row = self._reader.execute(
            "SELECT min(entry_id) FROM entries WHERE ledger_id = ? AND publish_time >= ?",
            (ledger_id, min(max(publish_time, _INT64_MIN), _INT64_MAX)),
        ).fetchone()
        return row[0]

    # ---- writes (group-committed) ----

    def append(
        self,
        ledger_id: int,
        entry: StoredEntry,
        producer_name: str | None,
        sequence_id: int | None,
    ) -> Commit:
        """Queue an entry; the Commit finishes once it is committed."""
        commit = Commit()
        params = (
            ledger_id,
            entry.entry_id,
            signed64(entry.publish_time),
            entry.num_messages,
            entry.checksum,
            producer_name,
            sequence_id,
            entry.sticky_key,
            entry.data,
            *(entry.txn or (None, None)),
            entry.marker,
        )
        self._queue_write(_Write(_INSERT_ENTRY, params, [commit.finish]))
        return commit

    def save_cursor(self, ledger_id: int, name: str, state: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a cursor's state, replacing any older state of it not yet written."""
        future = self._new_future()
        params = (ledger_id, name, json.dumps(state, separators=(",", ":")))
        with self._cond:
            pending = self._cursor_writes.get((ledger_id, name))
            if pending is not None:
                pending.params = params
                pending.done.append(functools.partial(_settle, future))
            else:
                write = _Write(_SAVE_CURSOR, params, [functools.partial(_settle, future)])
                self._cursor_writes[(ledger_id, name)] = write
                self._queue.append(write)
                self._cond.notify()
        return future

    def delete_cursor(self, ledger_id: int, name: str) -> asyncio.Future[None]:
        """Queue the removal of a cursor."""
        with self._cond:
            self._cursor_writes.pop((ledger_id, name), None)
        return self.submit("DELETE FROM cursors WHERE ledger_id = ? AND name = ?", (ledger_id, name))

    def create_topic(self, name: str, ledger_id: int) -> asyncio.Future[None]:
        """Queue the creation of a topic (or partition) with its ledger id."""
        return self.submit("INSERT OR IGNORE INTO topics (name, ledger_id) VALUES (?, ?)", (name, ledger_id))

    def set_partitions(self, name: str, partitions: int) -> asyncio.Future[None]:
        """Queue the creation or update of a partitioned topic's metadata."""
        return self.submit(
            "INSERT OR REPLACE INTO partitioned_topics (name, partitions) VALUES (?, ?)", (name, partitions)
        )

    def save_namespace(self, name: str, policies: dict[str, Any]) -> asyncio.Future[None]:
        """Queue the creation of a namespace or the update of its policies."""
        return self.submit(
            "INSERT OR REPLACE INTO namespaces (name, policies) VALUES (?, ?)", (name, json.dumps(policies))
        )

    def delete_namespace(self, name: str) -> asyncio.Future[None]:
        """Queue the removal of a namespace with its policies."""
        return self.submit("DELETE FROM namespaces WHERE name = ?", (name,))

    def save_tenant(self, name: str, info: dict[str, Any]) -> asyncio.Future[None]:
        """Queue the creation of a tenant, or the update of its TenantInfo."""
        return self.submit("INSERT OR REPLACE INTO tenants (name, info) VALUES (?, ?)", (name, json.dumps(info)))

    def delete_tenant(self, name: str) -> asyncio.Future[None]:
        """Queue the removal of a tenant."""
        return self.submit("DELETE FROM tenants WHERE name = ?", (name,))

    def save_topic_policies(self, name: str, policies: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a topic's policies; none left removes its row."""
        if not policies:
            return self.submit("DELETE FROM topic_policies WHERE name = ?", (name,))
        return self.submit(
            "INSERT OR REPLACE INTO topic_policies (name, policies) VALUES (?, ?)", (name, json.dumps(policies))
        )

    def save_schema(
        self, schema_id: str, version: int, schema_type: int, data: bytes, properties: dict[str, str], timestamp: int, deleted: bool
    ) -> asyncio.Future[None]:
        """Queue one schema version (a deletion marker when ``deleted``)."""
        return self.submit(
            "INSERT OR REPLACE INTO schemas (schema_id, version, type, data, properties, timestamp, deleted)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (schema_id, version, schema_type, data, json.dumps(properties), timestamp, int(deleted)),
        )

    def delete_schemas(self, schema_id: str) -> asyncio.Future[None]:
        """Queue the removal of every version of a schema."""
        return self.submit("DELETE FROM schemas WHERE schema_id = ?", (schema_id,))

    def delete_partitioned(self, name: str) -> asyncio.Future[None]:
        """Queue the removal of a partitioned topic's metadata."""
        return self.submit("DELETE FROM partitioned_topics WHERE name = ?", (name,))

    def delete_topic(self, name: str, ledger_id: int) -> asyncio.Future[None]:
        """Queue the removal of a topic with its entries and cursors."""
        self.submit("DELETE FROM entries WHERE ledger_id = ?", (ledger_id,))
        self.submit("DELETE FROM cursors WHERE ledger_id = ?", (ledger_id,))
        self.submit("DELETE FROM pending_acks WHERE ledger_id = ?", (ledger_id,))
        return self.submit("DELETE FROM topics WHERE name = ?", (name,))

    def unfence(self, ledger_id: int) -> None:
        """Take entries of ``ledger_id`` again: its ledger has settled every entry it had in flight."""
        with self._lock:
            self._fenced_ledgers.discard(ledger_id)

    def _new_future(self) -> asyncio.Future[None]:
        assert self._loop is not None, "Storage.start() was not called"
        return self._loop.create_future()

    def submit(self, sql: str, params: tuple[Any, ...]) -> asyncio.Future[None]:
        """Queue one write of a part of the broker that owns its table; the future resolves once committed."""
        future = self._new_future()
        self._queue_write(_Write(sql, params, [functools.partial(_settle, future)]))
        return future

    def _queue_write(self, write: _Write) -> None:
        self._lock.acquire()
        try:
            if self._closing:
                raise RuntimeError("storage is closed")
            self._queue.append(write)
            if len(self._queue) == 1:  # the writer waits only on an empty queue
                self._cond.notify()
        finally:
            self._lock.release()

    def _write_loop(self) -> None:
        conn = self._connect()
        try:
            while True:
                with self._cond:
                    while not self._queue and not self._closing:
                        self._cond.wait()
                    if not self._queue:
                        return
                    group, refused = self._take_group()
                error = self._commit(conn, group) if group else None
                if error is not None:
                    with self._lock:
                        self._fenced_ledgers.update(w.params[0] for w in group if w.sql is _INSERT_ENTRY)
                assert self._loop is not None
                try:
                    if refused:
                        self._loop.call_soon_threadsafe(_resolve, refused, LedgerFencedError("an earlier entry failed"))
                    self._loop.call_soon_threadsafe(_resolve, group, error)
                except RuntimeError:  # the loop is already closed at shutdown
                    pass
        finally:
            conn.close()

    def _take_group(self) -> tuple[list[_Write], list[_Write]]:
        """The queued writes to commit, and the entries of fenced ledgers to refuse (lock held)."""
        group, self._queue = self._queue, []
        self._cursor_writes.clear()
        fenced = self._fenced_ledgers
        if not fenced:
            return group, []
        refused = [w for w in group if w.sql is _INSERT_ENTRY and w.params[0] in fenced]
        return [w for w in group if not (w.sql is _INSERT_ENTRY and w.params[0] in fenced)], refused

    def _commit(self, conn: sqlite3.Connection, group: list[_Write]) -> BaseException | None:
        try:
            conn.execute("BEGIN")
            run_start = 0
            # Consecutive writes of the same statement go through one executemany (entries: a few
            # multi-row inserts).
            for index in range(1, len(group) + 1):
                if index == len(group) or group[index].sql != group[run_start].sql:
                    if group[run_start].sql is _INSERT_ENTRY:
                        _insert_entries(conn, [w.params for w in group[run_start:index]])
                    elif index - run_start == 1:
                        conn.execute(group[run_start].sql, group[run_start].params)
                    else:
                        conn.executemany(group[run_start].sql, [w.params for w in group[run_start:index]])
                    run_start = index
            if self._faults is not None:
                self._faults.check()
            conn.execute("COMMIT")
            return None
        except Exception as exc:  # sqlite3.Error, or a value SQLite cannot hold: fail the group, keep the writer
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            return exc


def _insert_entries(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    done = 0
    while done < len(rows):
        count = min(_ROWS_PER_INSERT, 1 << ((len(rows) - done).bit_length() - 1))
        conn.execute(_insert_entries_sql(count), list(itertools.chain.from_iterable(rows[done : done + count])))
        done += count


@functools.cache
def _insert_entries_sql(rows: int) -> str:
    return _INSERT_ENTRY + ", (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" * (rows - 1)


def _resolve(group: list[_Write], error: BaseException | None) -> None:
    for write in group:
        for done in write.done:
            try:
                done(error)
            except Exception:  # one failing completion must not cost the rest of the group theirs
                log.exception("completing a storage write failed")


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
