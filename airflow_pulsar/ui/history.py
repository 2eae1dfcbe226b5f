"""The backlog history: the readings backlog sensors and triggers took, kept for the page's charts.

A SQLite file under ``AIRFLOW_HOME`` (``pulsar/backlog-history.sqlite3``). The readings are taken
in the triggerer and in workers and shown by the api-server: in Airflow 3 neither the triggerer's
trigger code nor a task may write the metadata database, XComs hold only a task's final result,
and Variables are the users' own namespace, whereas a SQLite file in WAL mode takes writes from
many processes on the host and reads alongside them. Deployments whose components run on several
hosts share ``AIRFLOW_HOME`` or set ``AIRFLOW_PULSAR_HISTORY_FILE`` to a shared path.

Bounded: each subscription keeps its newest :data:`READINGS_KEPT` readings, none older than
:data:`MAX_AGE_SECONDS`. Recording is best effort: a reading that cannot be written is logged and
dropped, and never fails the sensor or the trigger.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

READINGS_KEPT = 240
MAX_AGE_SECONDS = 7 * 24 * 3600
# A writer waits this long for another's lock, then gives the reading up.
LOCK_WAIT_SECONDS = 2.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS readings (
    conn_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    subscription TEXT NOT NULL,
    read_at REAL NOT NULL,
    messages INTEGER NOT NULL,
    entries INTEGER NOT NULL,
    exact INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS readings_by_series ON readings (conn_id, topic, subscription, read_at);
"""


class Reading(Protocol):
    """What a backlog reading gives the history (``BacklogReading`` of the triggers has it)."""

    @property
    def messages(self) -> int: ...
    @property
    def entries(self) -> int: ...
    @property
    def exact(self) -> bool: ...
    @property
    def read_at(self) -> float: ...


@dataclass(frozen=True)
class Point:
    """One recorded reading of a subscription's backlog."""

    read_at: float  # epoch seconds
    messages: int
    entries: int
    exact: bool


def history_file() -> Path:
    """Where the history lives: ``AIRFLOW_PULSAR_HISTORY_FILE``, else under ``AIRFLOW_HOME``."""
    explicit = os.environ.get("AIRFLOW_PULSAR_HISTORY_FILE")
    if explicit:
        return Path(explicit)
    from airflow.configuration import AIRFLOW_HOME

    return Path(AIRFLOW_HOME) / "pulsar" / "backlog-history.sqlite3"


@contextmanager
def _database(path: Path) -> Iterator[sqlite3.Connection]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, timeout=LOCK_WAIT_SECONDS, isolation_level=None)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(_SCHEMA)
        yield db


def record_reading(conn_id: str, topic: str, subscription: str, reading: Reading, path: Path | None = None) -> None:
    """Add a reading to the subscription's history and trim it to its bounds (best effort)."""
    try:
        with _database(path or history_file()) as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute(
                "INSERT INTO readings VALUES (?, ?, ?, ?, ?, ?, ?)",
                (conn_id, topic, subscription, reading.read_at, reading.messages, reading.entries, int(reading.exact)),
            )
            db.execute(
                """DELETE FROM readings WHERE conn_id = ? AND topic = ? AND subscription = ? AND (read_at < ? OR read_at <
                   (SELECT read_at FROM readings WHERE conn_id = ? AND topic = ? AND subscription = ?
                    ORDER BY read_at DESC LIMIT 1 OFFSET ?))""",
                (conn_id, topic, subscription, time.time() - MAX_AGE_SECONDS, conn_id, topic, subscription, READINGS_KEPT - 1),
            )
            db.execute("COMMIT")
    except (sqlite3.Error, OSError) as exc:
        log.warning("Could not record the backlog of %s / %s in the history: %s", topic, subscription, exc)


async def arecord_reading(conn_id: str, topic: str, subscription: str, reading: Reading) -> None:
    """:func:`record_reading` off the event loop (for triggers)."""
    await asyncio.to_thread(record_reading, conn_id, topic, subscription, reading)


def series(conn_id: str, path: Path | None = None) -> dict[tuple[str, str], list[Point]]:
    """Every subscription's recorded readings on the connection, oldest first, by (topic, subscription)."""
    path = path or history_file()
    if not path.exists():
        return {}
    found: dict[tuple[str, str], list[Point]] = {}
    with _database(path) as db:
        rows = db.execute(
            "SELECT topic, subscription, read_at, messages, entries, exact FROM readings WHERE conn_id = ? AND read_at >= ? "
            "ORDER BY topic, subscription, read_at",
            (conn_id, time.time() - MAX_AGE_SECONDS),
        )
        for topic, subscription, read_at, messages, entries, exact in rows:
            found.setdefault((topic, subscription), []).append(Point(read_at, messages, entries, bool(exact)))
    return found
