"""A progress bar for long produce/consume runs: live on a terminal, silent otherwise."""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class Counter:
    """Counts messages towards an optional total, drawing a bar when stderr is a terminal."""

    def __init__(self, description: str, total: int | None):
        self.count = 0
        self.started = self.last = time.monotonic()
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            disable=not sys.stderr.isatty(),
            transient=True,
        )
        self._task = self._progress.add_task(description, total=total)

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more messages."""
        self.count += n
        self.last = time.monotonic()
        self._progress.update(self._task, advance=n)

    @property
    def rate(self) -> float:
        """Messages per second from the start to the last message (idle time at the end does not count)."""
        return self.count / max(self.last - self.started, 1e-9)

    def __enter__(self) -> Counter:
        self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._progress.stop()
