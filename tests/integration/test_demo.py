"""``make demo`` runs ``python -m airflow_pulsar.demo``: broker, topic, events, the ingestion DAG
through ``airflow dags test`` with Spark on local[*], the table and the backlog checked.

This is also the test that runs dags/pulsar_shop_events_ingest.py end to end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]


def test_demo_ingests_every_event_exactly_once_and_empties_the_backlog(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "airflow_pulsar.demo"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(CHECKOUT)},  # the checkout's jvm package, as make demo's cwd gives it
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    produced = int(re.search(r"produced (\d+) shop events", out).group(1))
    # Counted in messages (exactly, from the broker entry index), though batching packed them into fewer entries.
    before = re.search(r"backlog of 'lakehouse' before: (\d+) messages \(exact, (\d+) entries\)", out)
    assert before is not None and int(before.group(1)) == produced > int(before.group(2)) > 0, out
    assert f"backlog when the sensor fired: {produced} messages (exact" in out
    assert f"table shop.events holds {produced} rows" in out
    per_partition = [int(n) for n in re.findall(r"shop-events-partition-\d: (\d+) rows\n", out)]
    assert len(per_partition) == 4 and sum(per_partition) == produced and min(per_partition) > 0
    assert "backlog of 'lakehouse' after: 0 messages" in out
    assert "demo OK" in out and "broker stopped" in out
    assert list((tmp_path / "var/demo/warehouse/shop.db/events").glob("batch_id=*/*.parquet"))
