"""Storage faults injected for tests: a switch the storage writer reads before each commit.

Tests start the broker with ``--test-storage-fault-file F`` and write a :class:`StorageFault`'s
value into ``F`` (or remove it) while the broker runs. Every group commit then fails as SQLite
fails on a full disk or an I/O error: after its statements ran, before COMMIT, so the group rolls
back the way a real failure rolls it back. Without the option the storage never looks.
"""

from __future__ import annotations

import enum
import os
import sqlite3
from pathlib import Path


class StorageFault(enum.Enum):
    """A failure a group commit can be made to meet, named by what SQLite reports for it."""

    DISK_FULL = "disk-full"
    IO_ERROR = "io-error"

    @property
    def message(self) -> str:
        """SQLite's own message for the failure (SQLITE_FULL, SQLITE_IOERR)."""
        return "database or disk is full" if self is StorageFault.DISK_FULL else "disk I/O error"


class InjectedStorageFault(sqlite3.OperationalError):
    """A commit failed because a test switched a :class:`StorageFault` on."""

    def __init__(self, fault: StorageFault):
        super().__init__(fault.message)
        self.fault = fault


class StorageFaultSwitch:
    """The file a test writes a fault into; the storage writer checks it before each commit."""

    def __init__(self, path: Path):
        self.path = path

    def current(self) -> StorageFault | None:
        """The fault switched on, None when the file is absent or empty."""
        try:
            text = self.path.read_text().strip()
        except FileNotFoundError:
            return None
        return StorageFault(text) if text else None

    def check(self) -> None:
        """Raise the fault switched on, if any (the writer thread, inside the commit's transaction)."""
        fault = self.current()
        if fault is not None:
            raise InjectedStorageFault(fault)

    def switch(self, fault: StorageFault | None) -> None:
        """Switch ``fault`` on, or every fault off with None (the test's side); atomic for the reader."""
        if fault is None:
            self.path.unlink(missing_ok=True)
            return
        staging = self.path.with_name(self.path.name + ".new")
        staging.write_text(fault.value)
        os.replace(staging, self.path)
