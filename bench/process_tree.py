"""What a process tree costs, from /proc: its peak memory while a benchmark runs, its CPU time.

Spark on ``local[*]`` is one JVM (driver and executor in one) that forks a Python daemon, which
forks the Python workers that run a data source's reader. Their sum is what the machine pays for
an ingest, so :class:`PeakMemory` samples the whole tree under a root process (the JVM) on a
background thread and keeps the largest sum seen, and the largest of each part.

Forked workers share the daemon's pages, and RSS counts a shared page in every process that maps
it, so a sum of RSS overstates the tree. The sums are of PSS (a shared page split among its
sharers, from ``smaps_rollup``), which add up to what the tree really holds; the RSS sum is kept
beside them.

On a machine shared with other work, wall time measures the neighbours as much as the code; the
CPU seconds a tree spends on a piece of work (:func:`cpu_seconds`, read before and after) vary
far less, so rows per CPU second compares two ways of doing the same work more steadily.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import TracebackType
from typing import Self

MIB = 1024 * 1024


def _parents() -> dict[int, int]:
    """Every process's parent pid, by pid."""
    parents = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # it ended meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
        parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return parents


def descendants(root: int) -> list[int]:
    """The pids of every process below ``root`` (not ``root`` itself)."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def cpu_seconds(root: int) -> float:
    """CPU time (user and system) of ``root`` and every live descendant, with what each has
    reaped of its ended children; read before and after a piece of work, the difference is what it cost."""
    ticks = 0
    for pid in [root, *descendants(root)]:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:  # it ended meanwhile: its parent reaps its time
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _image(pid: int) -> str:
    """The program a process runs (its executable's path), "" for one that ended."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def _memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of a process in bytes; zeros for one that ended or holds no pages (a zombie)."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, pss


class Sampler:
    """Calls ``_sample`` on entering a ``with`` block, every ``interval`` seconds inside it on a
    background thread, and once more on leaving it."""

    def __init__(self, interval: float):
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)

    def __enter__(self) -> Self:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        raise NotImplementedError


class PeakMemory(Sampler):
    """Samples ``root`` and its descendants every ``interval`` seconds inside a ``with`` block
    (those still running the root's own program, about to start another, are left out).

    After the block: ``root_mib`` and ``children_mib`` are the peaks of the root's PSS and of its
    descendants' summed PSS, ``total_mib`` the peak of both together (taken in the same sample),
    ``total_rss_mib`` the peak of the tree's summed RSS. ``children_at_peak`` and
    ``largest_child_mib`` tell a peak of the descendants' sum apart: how many processes it was
    summed over, and the PSS of the largest of them then.
    """

    def __init__(self, root: int, interval: float = 0.1):
        super().__init__(interval)
        self.root = root
        self.root_mib = self.children_mib = self.total_mib = self.total_rss_mib = 0.0
        self.children_at_peak = 0
        self.largest_child_mib = 0.0
        self._root_image = _image(root)

    def _sample(self) -> None:
        root_rss, root_pss = _memory(self.root)
        # A child the JVM is starting a program in runs the JVM's image until its exec and maps the
        # JVM's memory: counted, it would add the JVM's PSS again for a sample (it did: peaks of
        # 1.4 GiB "Python workers"). Such children, and those already gone, are left out.
        children = [_memory(pid) for pid in descendants(self.root) if _image(pid) not in ("", self._root_image)]
        children_pss = sum(pss for _, pss in children) / MIB
        self.root_mib = max(self.root_mib, root_pss / MIB)
        if children_pss > self.children_mib:
            self.children_mib = children_pss
            self.children_at_peak = sum(1 for _, pss in children if pss)
            self.largest_child_mib = max(pss for _, pss in children) / MIB
        self.total_mib = max(self.total_mib, root_pss / MIB + children_pss)
        self.total_rss_mib = max(self.total_rss_mib, (root_rss + sum(rss for rss, _ in children)) / MIB)


def command_line(pid: int) -> list[str]:
    """A process's arguments, [] for one that ended."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


class ProcessPeaks(Sampler):
    """The peak RSS and PSS of every process in named trees, each process on its own, sampled
    every ``interval`` seconds inside a ``with`` block.

    ``roots`` names the root of each tree (a broker's JVM, a Spark worker, the task process);
    every process under a root is sampled too and keeps the root's name, with its own pid. After
    the block, ``peaks`` maps each pid seen to ``(tree name, command line, peak RSS MiB, peak PSS
    MiB)``; a process that started and ended between two samples is missed.
    """

    def __init__(self, roots: dict[int, str], interval: float = 0.2):
        super().__init__(interval)
        self.roots = roots
        self.peaks: dict[int, tuple[str, list[str], float, float]] = {}

    def _sample(self) -> None:
        for root, name in list(self.roots.items()):  # roots may be added while it samples
            for pid in [root, *descendants(root)]:
                rss, pss = _memory(pid)
                command = command_line(pid)
                if not rss or not command:
                    continue
                _, seen, peak_rss, peak_pss = self.peaks.get(pid, (name, command, 0.0, 0.0))
                if seen != command:
                    # A child forked by a JVM maps the JVM's memory until it execs its own program:
                    # only what it holds as that program counts.
                    peak_rss = peak_pss = 0.0
                self.peaks[pid] = (name, command, max(peak_rss, rss / MIB), max(peak_pss, pss / MIB))
