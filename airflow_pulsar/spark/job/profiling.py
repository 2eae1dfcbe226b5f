"""A profile of each Spark task's read on the executors, switched on by an environment variable.

With ``AIRFLOW_PULSAR_PROFILE_DIR`` set where the Python workers run (on ``local[*]`` the
driver's environment reaches them; on a cluster set it with ``spark.executorEnv``), every task's
read of its ranges runs under cProfile from its first batch to its last, Spark's own handling of
the yielded batches in the worker included, and leaves ``<dir>/task-<index>-<pid>.prof`` for ``pstats``.
"""

from __future__ import annotations

import cProfile
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

PROFILE_DIR_ENV = "AIRFLOW_PULSAR_PROFILE_DIR"

T = TypeVar("T")


def profiled(items: Iterator[T], name: str) -> Iterator[T]:
    """``items`` as they are, or under cProfile when ``AIRFLOW_PULSAR_PROFILE_DIR`` is set."""
    directory = os.environ.get(PROFILE_DIR_ENV)
    if not directory:
        return items
    return _profiled(items, Path(directory) / f"{name}-{os.getpid()}.prof")


def _profiled(items: Iterator[T], path: Path) -> Iterator[T]:
    profile = cProfile.Profile()
    profile.enable()
    try:
        yield from items
    finally:
        profile.disable()
        path.parent.mkdir(parents=True, exist_ok=True)
        profile.dump_stats(path)
