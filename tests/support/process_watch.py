"""Every process below some roots while a block of a test runs: command lines and environments,
read from /proc over and over, so that processes living a moment (a Python worker) are seen too."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.process_tree import Process, descendants

# Often enough to catch a Spark task's Python worker, which lives for a second or more.
_POLL_SECONDS = 0.05


@dataclass
class SeenProcesses:
    """The processes seen, by (pid, start time), with their environment as last read."""

    processes: dict[tuple[int, int], Process] = field(default_factory=dict)
    environments: dict[tuple[int, int], bytes] = field(default_factory=dict)

    def add(self, process: Process) -> None:
        key = (process.pid, process.started)
        self.processes[key] = process
        try:
            self.environments[key] = (Path("/proc") / str(process.pid) / "environ").read_bytes()
        except OSError:  # it ended meanwhile
            pass

    def running(self, text: str) -> list[Process]:
        """Those with ``text`` in an argument of their command line."""
        return [process for process in self.processes.values() if process.runs(text)]

    def commands_with(self, secret: str) -> list[Process]:
        """Those with ``secret`` anywhere on their command line."""
        return [process for process in self.processes.values() if secret in "\0".join(process.command)]

    def environment(self, process: Process) -> dict[str, str]:
        """The environment of ``process`` as last read (empty if never read)."""
        raw = self.environments.get((process.pid, process.started), b"")
        pairs = (entry.decode(errors="replace").partition("=") for entry in raw.split(b"\0") if entry)
        return {name: value for name, _, value in pairs}


@contextmanager
def watch(roots: Callable[[], Sequence[int]]) -> Iterator[SeenProcesses]:
    """Read the processes below ``roots()`` (evaluated at each look) until the block ends."""
    seen = SeenProcesses()
    stop = threading.Event()

    def look() -> None:
        while True:
            for process in descendants(roots()):
                seen.add(process)
            if stop.wait(_POLL_SECONDS):
                return

    thread = threading.Thread(target=look, name="process-watch", daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()
