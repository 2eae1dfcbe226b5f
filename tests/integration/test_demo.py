"""``make demo`` runs ``python -m airflow_pulsar.demo``: it must work in a fresh directory, twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_demo_round_trip_runs_twice_in_a_fresh_directory(tmp_path: Path) -> None:
    for run in range(2):  # the second run finds the topic and subscription already there
        result = subprocess.run(
            [sys.executable, "-m", "airflow_pulsar.demo"], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "round trip OK" in result.stdout
        assert "backlog now 0" in result.stdout
    assert (tmp_path / "var/demo/broker/broker.sqlite").exists()
