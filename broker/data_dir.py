"""The data directory: private to the broker's user, and locked by one broker at a time.

The database holds every message, and the topics' policies and grants, so the broker creates the
directory 0700 and its files 0600, whatever the umask; a database file left wider by an earlier
version is narrowed at start, and a directory the broker did not create keeps its mode, with a
warning if others may read it.

Two brokers writing one SQLite database would each keep their own idea of the next entry id and
of every cursor, and overwrite each other's data. The first broker holds an exclusive ``flock`` on
``broker.lock`` for as long as it runs (the kernel lets go of it when the process dies, kill -9
included), and a second one refuses to start, naming the holder's pid.
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
from pathlib import Path

from .config import ConfigError

log = logging.getLogger(__name__)

LOCK_FILE = "broker.lock"
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) mode 0700; warn if an existing one is open to others."""
    try:
        path.mkdir(mode=PRIVATE_DIR_MODE, parents=True)
    except FileExistsError:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            log.warning(
                "data dir %s is open to other users (mode %s): its database holds every message; chmod 700 %s",
                path, oct(mode), path,
            )  # fmt: skip
        return
    os.chmod(path, PRIVATE_DIR_MODE)  # mkdir's mode is cut by the umask


def make_private_file(path: Path) -> None:
    """Create ``path`` if missing, and leave it mode 0600 whatever the umask or its mode before."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)


class DataDirLock:
    """An exclusive lock on a data directory, held from :meth:`acquire` until :meth:`release`."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, data_dir: Path) -> DataDirLock:
        """Lock ``data_dir`` (created if missing); ConfigError if another broker holds it."""
        make_private_dir(data_dir)
        path = data_dir / LOCK_FILE
        make_private_file(path)
        fd = os.open(path, os.O_RDWR)
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
