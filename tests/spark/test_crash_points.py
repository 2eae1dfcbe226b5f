"""The crash points' hold (airflow_pulsar.spark.job.faults), in processes of their own: the first
process to reach a point announces itself and waits, a later one passes, a release lets the first
go on, and a held process whose parent died exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_pulsar.spark.job.faults import FAULT_ENV, HOLD_DIR_ENV, inject
from tests.support.process_tree import Process, wait_gone

# A process that reaches the ``mid-read`` point, then says so.
REACH = "from airflow_pulsar.spark.job.faults import inject; inject('mid-read'); print('went on', flush=True)"


def reaching(directory: Path, code: str = REACH) -> subprocess.Popen[str]:
    environment = {**os.environ, FAULT_ENV: "mid-read", HOLD_DIR_ENV: str(directory)}
    return subprocess.Popen([sys.executable, "-c", code], env=environment, stdout=subprocess.PIPE, text=True)


def wait_for(path: Path, timeout_seconds: float = 30) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


def test_the_first_process_at_a_point_holds_until_released_and_the_next_passes(tmp_path: Path) -> None:
    first = reaching(tmp_path)
    wait_for(tmp_path / "mid-read.held")
    assert json.loads((tmp_path / "mid-read.held").read_text()) == {"point": "mid-read", "pid": first.pid, "parent": os.getpid()}

    second = reaching(tmp_path)
    assert second.communicate(timeout=30)[0] == "went on\n"
    assert first.poll() is None

    (tmp_path / "mid-read.release").touch()
    assert first.communicate(timeout=30)[0] == "went on\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["mid-read.held", "mid-read.release"]


def test_a_held_process_whose_parent_died_exits(tmp_path: Path) -> None:
    # A parent that starts the holding process and then waits, as a JVM runs its Python.
    parent_code = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {REACH!r}]); time.sleep(600)"
    parent = reaching(tmp_path, parent_code)
    wait_for(tmp_path / "mid-read.held")
    held = Process.read(json.loads((tmp_path / "mid-read.held").read_text())["pid"])
    assert held is not None and held.parent == parent.pid

    parent.send_signal(signal.SIGKILL)
    parent.wait(30)

    assert not wait_gone([held], 30)


def test_other_points_pass_and_a_point_that_is_none_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "after-write")
    monkeypatch.setenv(HOLD_DIR_ENV, str(tmp_path))
    inject("before-write")
    assert not list(tmp_path.iterdir())
    monkeypatch.delenv(HOLD_DIR_ENV)
    with pytest.raises(ValueError, match="needs AIRFLOW_PULSAR_INGEST_FAULT_DIR"):
        inject("after-write")
    monkeypatch.setenv(FAULT_ENV, "mid-write")
    with pytest.raises(ValueError, match="names no crash point"):
        inject("before-write")
