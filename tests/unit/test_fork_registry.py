"""The fork registry (client/forks.py): resets run in forked children only, for objects still alive."""

from __future__ import annotations

import gc
import os
import weakref

from airflow_pulsar.client.forks import inherited_message, reset_after_fork
from tests.support.forked import run_forked


class _Resettable:
    def __init__(self) -> None:
        self.pid = os.getpid()
        reset_after_fork(self.reset)

    def reset(self) -> None:
        self.pid = os.getpid()


def test_a_live_objects_reset_runs_in_the_child_and_not_in_the_parent() -> None:
    kept = _Resettable()
    parent = os.getpid()

    assert run_forked(lambda: kept.pid) not in (parent, None)
    assert kept.pid == parent


def test_registration_keeps_no_object_alive_and_every_live_one_is_reset() -> None:
    gone = _Resettable()
    reference = weakref.ref(gone)
    del gone
    gc.collect()
    kept = [_Resettable() for _ in range(200)]  # past the pruning length: dead references are dropped

    assert reference() is None
    child_pids = run_forked(lambda: sorted({k.pid for k in kept}))
    assert len(child_pids) == 1 and child_pids[0] != os.getpid()
    assert {k.pid for k in kept} == {os.getpid()}


def test_the_refusal_names_the_parent_and_the_fix() -> None:
    message = inherited_message("producer on persistent://public/default/t", 4242)
    assert "process 4242" in message and "Open it again in this process from the same client" in message
