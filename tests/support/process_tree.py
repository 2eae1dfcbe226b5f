"""Processes a test started, directly or not, found through /proc and signalled by pid.

A :class:`Process` is a pid together with the time it started, so that a pid the system has given
to another process since is never signalled. A child process started in a session of its own
(``start_new_session=True``) keeps every process it starts in that session, even one whose parent
died (which the system then hands to another parent), unless it starts a session of its own.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")


@dataclass(frozen=True)
class Process:
    """A running process: its pid, parent, session, start time (clock ticks after boot) and command line."""

    pid: int
    parent: int
    session: int
    started: int
    command: tuple[str, ...]

    @classmethod
    def read(cls, pid: int) -> Process | None:
        """The process ``pid`` as it is now; None once it has ended (a zombie has ended)."""
        try:
            stat = (_PROC / str(pid) / "stat").read_text()
            command = (_PROC / str(pid) / "cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            return None
        # The command name in parentheses may hold spaces; the fields after it are plain.
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X"):
            return None
        arguments = tuple(part.decode(errors="replace") for part in command.split(b"\0") if part)
        return cls(pid, int(fields[1]), int(fields[3]), int(fields[19]), arguments)

    def alive(self) -> bool:
        """Whether this very process still runs."""
        now = Process.read(self.pid)
        return now is not None and now.started == self.started

    def signal(self, number: signal.Signals) -> None:
        """Send signal ``number`` if this very process still runs."""
        if self.alive():
            try:
                os.kill(self.pid, number)
            except ProcessLookupError:
                pass

    def runs(self, text: str) -> bool:
        """Whether ``text`` is one of its command line's arguments, or part of one."""
        return any(text in argument for argument in self.command)

    @property
    def java(self) -> bool:
        return bool(self.command) and Path(self.command[0]).name == "java"

    @property
    def python(self) -> bool:
        return bool(self.command) and Path(self.command[0]).name.startswith("python")

    def __str__(self) -> str:
        return f"{self.pid} ({' '.join(self.command)[:160]})"


def running() -> list[Process]:
    """Every process running now."""
    found = (Process.read(int(entry.name)) for entry in _PROC.iterdir() if entry.name.isdigit())
    return [process for process in found if process is not None]


def in_session(session: int) -> list[Process]:
    """The processes of session ``session`` (whose leader's pid it is)."""
    return [process for process in running() if process.session == session]


def descendants(roots: Iterable[int]) -> list[Process]:
    """The processes below ``roots`` (children, their children, ...), not the roots themselves."""
    children: dict[int, list[Process]] = {}
    for process in running():
        children.setdefault(process.parent, []).append(process)
    found: list[Process] = []
    pending = list(roots)
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child.pid)
    return found


def signal_all(processes: Iterable[Process], number: signal.Signals) -> None:
    for process in processes:
        process.signal(number)


def wait_gone(processes: Iterable[Process], timeout_seconds: float) -> list[Process]:
    """Wait until every one of ``processes`` has ended; those still running at the timeout."""
    waiting = list(processes)
    deadline = time.monotonic() + timeout_seconds
    while True:
        waiting = [process for process in waiting if process.alive()]
        if not waiting or time.monotonic() > deadline:
            return waiting
        time.sleep(0.2)
