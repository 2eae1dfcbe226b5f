"""Crash points of the ingest, where a test holds a process so that it can kill it there for real.

Set :data:`FAULT_ENV` to one of :data:`POINTS` and :data:`HOLD_DIR_ENV` to a directory in the
environment of the operator and of the Spark job (spark-submit passes its environment to a local
driver and its executors, and to the driver a standalone master runs in cluster deploy mode; the
job passes both to executors elsewhere). The first process that reaches the point holds there:

- ``before-write``: the job's Python driver, before the Spark session starts;
- ``mid-read``: the executor's Python worker reading the first range, after its first record
  batch, while Spark writes what it has read;
- ``after-write``: the job's Python driver, once the table holds the batch, before the job reports it;
- ``before-ack``: the operator, after the job reported, before any acknowledgement;
- ``mid-ack``: the operator, after the first partition is acknowledged.

Holding, it writes ``<point>.held`` into the directory (JSON: its ``pid`` and its ``parent``'s)
and waits. A test then kills the process it chooses (this one, its parent JVM, spark-submit, the
task), or stops them and lets them go on later: the held process goes on once ``<point>.release``
appears, and exits when its parent process is gone, as it would have died with it. A point holds
once per directory: a task Spark retries, or a run after the crash, passes it.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

FAULT_ENV = "AIRFLOW_PULSAR_INGEST_FAULT"
HOLD_DIR_ENV = "AIRFLOW_PULSAR_INGEST_FAULT_DIR"
POINTS = ("before-write", "mid-read", "after-write", "before-ack", "mid-ack")

# How often a held process looks for its release and its parent.
_POLL_SECONDS = 0.05


def fault_environment() -> dict[str, str]:
    """The crash point settings of this process, to pass on to executors."""
    return {name: os.environ[name] for name in (FAULT_ENV, HOLD_DIR_ENV) if os.environ.get(name)}


def inject(point: str) -> None:
    """Hold at ``point`` if :data:`FAULT_ENV` names it (see the module's description)."""
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    if wanted not in POINTS:
        raise ValueError(f"{FAULT_ENV}={wanted!r} names no crash point; the points are {POINTS}")
    if wanted != point:
        return
    directory = os.environ.get(HOLD_DIR_ENV)
    if not directory:
        raise ValueError(f"{FAULT_ENV}={wanted!r} needs {HOLD_DIR_ENV}, the directory where the process holding there says so")
    hold(point, Path(directory))


def hold(point: str, directory: Path) -> None:
    """Announce this process at ``point`` in ``directory`` and wait for a release; return at once if
    the point held before."""
    parent = os.getppid()
    announcement = json.dumps({"point": point, "pid": os.getpid(), "parent": parent})
    with tempfile.NamedTemporaryFile("w", dir=directory, prefix=f".{point}-", delete=False) as draft:
        draft.write(announcement)
    try:
        # A link appears whole, and only once: whoever links first holds.
        os.link(draft.name, directory / f"{point}.held")
    except FileExistsError:
        return
    finally:
        os.unlink(draft.name)
    release = directory / f"{point}.release"
    while not release.exists():
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(_POLL_SECONDS)
