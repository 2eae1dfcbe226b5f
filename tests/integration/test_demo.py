"""``make demo`` runs ``python -m airflow_pulsar.demo``: broker, topic, events, the ingestion DAG
through ``airflow dags test`` with Spark on local[*], the table and the backlog checked.

This is also the test that runs dags/pulsar_shop_events_ingest.py end to end, and, after the demo
with a Delta table, the Spark SQL commands of docs/spark-ingestion.md where the demo ran."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.doc_scripts import EXAMPLES, included

CHECKOUT = EXAMPLES.parents[1]
SPARK_EXAMPLES = EXAMPLES / "spark"


def run_demo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m airflow_pulsar.demo`` in ``cwd``, as ``make demo`` runs it from the checkout."""
    return subprocess.run(
        [sys.executable, "-m", "airflow_pulsar.demo", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(CHECKOUT)},  # the checkout's jvm package, as make demo's cwd gives it
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_demo_ingests_every_event_exactly_once_and_empties_the_backlog(tmp_path: Path) -> None:
    result = run_demo(tmp_path)
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


def test_the_delta_demo_table_reads_back_with_the_pages_spark_sql(tmp_path: Path) -> None:
    result = run_demo(tmp_path, "--format", "delta")
    assert result.returncode == 0, result.stdout + result.stderr
    produced = int(re.search(r"produced (\d+) shop events", result.stdout).group(1))
    batch = re.search(r"batch ([0-9a-f]+): (\d+) rows into shop.events", result.stdout).group(1)
    # The page's command runs from the checkout: its .venv and .jvm, the demo's var/ here.
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])
    (tmp_path / ".jvm").symlink_to(CHECKOUT / ".jvm")

    read = subprocess.run(["bash", SPARK_EXAMPLES / "read_demo_table.sh"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert read.returncode == 0, read.stderr[-3000:]
    counts = dict(line.split("\t") for line in read.stdout.splitlines() if line.strip())
    assert len(counts) == 4 and sum(map(int, counts.values())) == produced, read.stdout

    # The page's queries that fit a Delta table, on the demo's: its name, location and batch.
    queries = [line for line in included(SPARK_EXAMPLES / "queries.sql", "queries", "--").splitlines() if "-- Iceberg" not in line]
    assert len(queries) == 2, queries
    location = tmp_path / "var" / "demo" / "warehouse" / "shop.db" / "events"
    sql = "\n".join(queries).replace("shop.orders", "shop.events").replace("/data/orders", str(location))
    (tmp_path / "queries.sql").write_text(re.sub(r"batch_id = '[0-9a-f]+'", f"batch_id = '{batch}'", sql))
    command = re.sub(r'-e "[^"]*"', "-f queries.sql", included(SPARK_EXAMPLES / "read_demo_table.sh", "read demo table", "#"))
    queried = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert queried.returncode == 0, queried.stderr[-3000:]
    rows = [line for line in queried.stdout.splitlines() if line.strip()]
    assert rows[0] == f"{batch}\t{produced}", rows[:3]  # one batch, every event
    assert len(rows) == 1 + produced, len(rows)  # then each row of that batch
