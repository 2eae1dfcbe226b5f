"""The data directory's lock: one broker per data directory.

Two brokers writing one SQLite database would each keep their own idea of the next entry id and
of every cursor, and overwrite each other's data. The first broker holds an exclusive ``flock`` on
``broker.lock`` for as long as it runs (the kernel lets go of it when the process dies, kill -9
included), and a second one refuses to start, naming the holder's pid.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .config import ConfigError

LOCK_FILE = "broker.lock"


class DataDirLock:
    """An exclusive lock on a data directory, held from :meth:`acquire` until :meth:`release`."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, data_dir: Path) -> DataDirLock:
        """Lock ``data_dir`` (created if missing); ConfigError if another broker holds it."""
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ConfigError(
                f"data dir {data_dir} is in use by another broker (pid {holder}); "
                "two brokers cannot share one data dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return cls(path, fd)

    def release(self) -> None:
        """Let go of the lock (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
