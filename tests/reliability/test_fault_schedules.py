"""Randomized fault runs: for each seed (FAULT_SEEDS; 1, 2 and 5 unless set), a schedule of broker and
client kills, restarts, connection cuts, stalls and partitions against producers with
deduplication and consumers in processes of their own, on both brokers; then the whole history is
checked (tests/support/fault_history.py: exactly once in order, everything consumed, no
acknowledgement confirmed by a receipt lost). A tier of its own: ``make fault-run SEEDS=...``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import fault_schedule
from tests.support.fault_run import FINISH_SECONDS, FaultRun

SECONDS = fault_schedule.run_seconds()

# Apache Pulsar's restart, the producers' flush and the consumers' drain come on top of the schedule.
pytestmark = [pytest.mark.fault_run, pytest.mark.timeout(SECONDS + 2 * FINISH_SECONDS + 300)]


@pytest.mark.parametrize("seed", fault_schedule.seeds(), ids=lambda seed: f"seed{seed}")
def test_fault_schedule_keeps_every_guarantee(broker: Any, seed: int, tmp_path: Path) -> None:
    run = FaultRun(broker, seed, SECONDS, tmp_path)
    print(f"\n{run.describe()}\nhistory in {tmp_path}")
    report = run.run()
    print(f"RELIABILITY fault run {broker.name} seed {seed}: {report.figures}")
    assert not report.failures, (
        f"{len(report.failures)} broken guarantees on {broker.name}:\n  " + "\n  ".join(report.failures)
        + f"\n{run.describe()}\nhistory in {tmp_path}"
    )
