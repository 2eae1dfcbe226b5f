"""Failure injection at the ingest's crash points, to test that a crash never loses or doubles rows.

Set :data:`FAULT_ENV` to one of :data:`POINTS` in the environment of the operator and of the
Spark job (spark-submit passes its environment to a local driver and its executors, and to the
driver a standalone master runs in cluster deploy mode), and the run raises
:class:`InjectedFault` at that point:

- ``before-write``: in the driver, before the Spark session starts;
- ``mid-read``: in the executor reading the first range, after its first record batch;
- ``after-write``: in the driver, once the table holds the batch, before the job reports it;
- ``before-ack``: in the operator, after the job reported, before any acknowledgement;
- ``mid-ack``: in the operator, after the first partition is acknowledged.
"""

from __future__ import annotations

import os

FAULT_ENV = "AIRFLOW_PULSAR_INGEST_FAULT"
POINTS = ("before-write", "mid-read", "after-write", "before-ack", "mid-ack")


class InjectedFault(RuntimeError):
    """The failure asked for through :data:`FAULT_ENV`."""


def inject(point: str) -> None:
    """Raise InjectedFault if :data:`FAULT_ENV` names ``point``."""
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    if wanted not in POINTS:
        raise ValueError(f"{FAULT_ENV}={wanted!r} names no crash point; the points are {POINTS}")
    if wanted == point:
        raise InjectedFault(f"injected failure at {point} ({FAULT_ENV})")
