"""The example DAGs in dags/, run the way a newcomer runs them: ``airflow dags test`` in a fresh
AIRFLOW_HOME whose DAGs folder is dags/, with the ``pulsar_default`` connection from an
environment variable pointing at the broker process.

On the embedded broker, the default a newcomer starts from: the same DAGs run on Apache Pulsar in
tests/deployment, scheduled by a real Airflow deployment.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.assets.pulsar import asset_topic
from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.examples import shop_events
from tests.support.dag_files import load_dag_file

pytestmark = pytest.mark.embedded_only

PROJECT_DAGS = Path(__file__).parents[2] / "dags"
AIRFLOW = Path(sys.executable).with_name("airflow")


@pytest.fixture(scope="module")
def airflow_env(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Environment of an Airflow installation with dags/ as its DAGs folder and a migrated database."""
    home = tmp_path_factory.mktemp("airflow-home")
    # Nothing of this test process's own Airflow settings (unit-test mode, its home) leaks in.
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW_PULSAR_EXAMPLES_DIR": str(home / "examples"),
        "AIRFLOW_CONN_PULSAR_DEFAULT": json.dumps(
            {"conn_type": "pulsar", "host": broker.service_url, "extra": {"admin_url": broker.web_url}}
        ),
    }
    migrated = subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    # What the DAG processor does: parse the DAGs folder into the database, import errors included.
    parsed = subprocess.run([AIRFLOW, "dags", "reserialize"], env=env, capture_output=True, text=True, timeout=300)
    assert parsed.returncode == 0, parsed.stderr[-2000:]
    yield env


def dags_test(env: dict[str, str], dag_id: str, conf: dict[str, Any] | None = None) -> str:
    """Run ``airflow dags test`` and return its output; fails the test if the run failed."""
    args = [AIRFLOW, "dags", "test", dag_id] + (["--conf", json.dumps(conf)] if conf else [])
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "state=success" in output, output[-4000:]
    return output


def json_lines(stdout: str) -> Any:
    """The JSON document of an ``airflow ... --output json`` command (warnings may precede it)."""
    return json.loads(next(line for line in stdout.splitlines() if line.startswith(("[", "{"))))


def test_every_example_dag_has_a_docstring_and_parses(airflow_env: dict[str, str]) -> None:
    listing = subprocess.run(
        [AIRFLOW, "dags", "list", "--output", "json"], env=airflow_env, capture_output=True, text=True, timeout=300
    )
    dag_ids = {row["dag_id"] for row in json_lines(listing.stdout)}
    assert {"pulsar_shop_events_producer", "pulsar_order_tally", "pulsar_alert_handler", "pulsar_shop_events_ingest"} <= dag_ids
    errors = subprocess.run(
        [AIRFLOW, "dags", "list-import-errors", "--output", "json"], env=airflow_env, capture_output=True, text=True
    )
    assert errors.returncode == 0 and json_lines(errors.stdout) == []
    for path in PROJECT_DAGS.glob("pulsar_*.py"):
        assert (path.read_text().lstrip().startswith('"""')), f"{path.name} has no module docstring"


def test_producer_then_tally(airflow_env: dict[str, str], broker: BrokerProcess) -> None:
    output = dags_test(airflow_env, "pulsar_shop_events_producer", {"count": 2000, "seed": 7})
    assert "Sent 2000 messages to persistent://public/default/shop-events" in output
    with PulsarAdmin(broker.web_url) as admin:
        assert admin.partition_count("shop-events") == 4
        stats = admin.partitioned_stats("shop-events")
        assert stats["msgInCounter"] == 2000
        assert all(part["msgInCounter"] > 0 for part in stats["partitions"].values())

    output = dags_test(airflow_env, "pulsar_order_tally")
    # Batches hold at most 500 (max_batch_size) and end early when the receiver queue runs dry, so
    # how many there are depends on timing; what was consumed and acknowledged does not.
    report = re.search(r"consumed (\d+) messages in (\d+) batches, acknowledged (\d+)", output)
    assert report is not None, output[-4000:]
    consumed, batches, acknowledged = map(int, report.groups())
    assert consumed == acknowledged == 2000 and batches >= 4
    database = Path(airflow_env["AIRFLOW_PULSAR_EXAMPLES_DIR"]) / "orders.db"
    with sqlite3.connect(database) as db:
        orders = db.execute("SELECT sum(orders) FROM revenue").fetchone()[0]
    expected = sum(json.loads(value)["event_type"] == "order_placed" for _, value, _ in shop_events.generate(2000, 7))
    assert orders == expected > 0
    with PulsarAdmin(broker.web_url) as admin:
        assert admin.backlog("shop-events", "order-tally").msg_backlog == 0


def test_alert_handler_watcher_fires_on_a_high_severity_alert(
    airflow_env: dict[str, str], broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The watcher's trigger runs here as the triggerer would run it; the connection comes from the same variable.
    monkeypatch.setenv("AIRFLOW_CONN_PULSAR_DEFAULT", airflow_env["AIRFLOW_CONN_PULSAR_DEFAULT"])
    module = load_dag_file(PROJECT_DAGS / "pulsar_alert_handler.py")
    (watcher,) = module.shop_alerts.watchers
    classpath, kwargs = watcher.trigger.serialize()
    assert classpath == "airflow_pulsar.triggers.message_event.PulsarMessageEventTrigger"
    # The asset is the watched topic, by the pulsar:// asset URI scheme.
    assert asset_topic(module.shop_alerts) == ("pulsar://localhost:6650", kwargs["topics"][0])
    trigger = watcher.trigger.trigger

    with Client(broker.service_url) as client:
        producer = client.create_producer(kwargs["topics"][0])
        producer.send(b'{"amount": 12}', properties={"severity": "low"})
        producer.send(b'{"amount": 1290}', properties={"severity": "high"})

    async def events_until_ours() -> list[Any]:
        # The producer DAG's test may have put large-order alerts first: take events up to ours.
        events, seen = trigger.run(), []
        try:
            while not seen or seen[-1].payload["message"]["value"] != '{"amount": 1290}':
                seen.append(await asyncio.wait_for(anext(events), 20))
        finally:
            await events.aclose()
        return seen

    seen = asyncio.run(events_until_ours())
    assert all(event.payload["message"]["properties"]["severity"] == "high" for event in seen)
    dags_test(airflow_env, "pulsar_alert_handler")
