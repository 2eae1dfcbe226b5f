"""The example DAGs in a real Airflow deployment: unpaused and triggered through the REST API, run
by the scheduler and the LocalExecutor, their sensor deferred to the triggerer, and the alert
handler scheduled by an asset watcher in the triggerer.

One scenario per module, in order (the tests share the deployment and the topics): ingestion
waits deferred, the producer publishes, ingestion loads exactly what was published, the tally
counts its orders, and the alert handler runs for exactly the large orders and for nothing else.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from airflow_pulsar.client import Client, MessageId
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.examples.shop_events import ALERTS_TOPIC, LARGE_ORDER_EUR, TOPIC
from tests.support.airflow_deployment import AirflowDeployment, poll_api
from tests.support.polling import wait_until

# Airflow's process boundaries, not the broker, are the subject here (see conftest.py).
pytestmark = [pytest.mark.timeout(900), pytest.mark.one_broker]

INGEST, PRODUCER, TALLY, ALERTS = (
    "pulsar_shop_events_ingest",
    "pulsar_shop_events_producer",
    "pulsar_order_tally",
    "pulsar_alert_handler",
)
# The alert handler's asset: the alerts topic, named by the pulsar:// asset URI scheme.
ALERTS_ASSET = "pulsar://localhost:6650/persistent/public/default/shop-alerts"


def _published_events(service_url: str, partitions: int) -> list[dict[str, Any]]:
    """Every event on the shop-events topic, read from the start of each partition."""
    events = []
    with Client(service_url) as client:
        for partition in range(partitions):
            reader = client.create_reader(f"{TOPIC}-partition-{partition}", MessageId.earliest)
            while reader.has_message_available():
                events.append(json.loads(reader.read_next(10_000).data()))
            reader.close()
    return events


def _only_run(airflow: AirflowDeployment, dag_id: str) -> dict[str, Any]:
    """The DAG's run once the scheduler made it (the unpaused DAG's latest interval)."""
    return poll_api(lambda: airflow.runs(dag_id)[:1], f"the scheduler to start a run of {dag_id}", 120)[0]


@pytest.fixture(scope="module")
def published(deployment: AirflowDeployment, broker: Any) -> Iterator[dict[str, Any]]:
    """Ingestion waiting deferred, then the producer's scheduled run and one triggered run: what
    the tests see (the ingestion run, the deferred sensor's states, the published events)."""
    deployment.unpause(INGEST)
    ingest_run = _only_run(deployment, INGEST)["dag_run_id"]
    states_seen: set[str | None] = set()

    def sensor_deferred() -> bool:
        states_seen.add(deployment.task_states(INGEST, ingest_run).get("wait_for_backlog"))
        return "deferred" in states_seen

    poll_api(sensor_deferred, "the backlog sensor to defer", 180)

    deployment.unpause(PRODUCER)
    deployment.finished(PRODUCER, _only_run(deployment, PRODUCER)["dag_run_id"], 300)
    triggered = deployment.trigger(PRODUCER, {"count": 400, "seed": 7})
    deployment.finished(PRODUCER, triggered, 300)
    deployment.finished(INGEST, ingest_run, 600)
    with PulsarAdmin(broker.web_url) as admin:
        partitions = admin.partition_count(TOPIC)
        produced = admin.partitioned_stats(TOPIC)["msgInCounter"]
    events = _published_events(broker.service_url, partitions)
    assert len(events) == produced == 1400
    yield {"ingest_run": ingest_run, "states_seen": states_seen, "events": events}


def test_ingestion_waits_deferred_and_loads_each_published_event_once(
    deployment: AirflowDeployment, broker: Any, published: dict[str, Any]
) -> None:
    assert "deferred" in published["states_seen"]
    summary = deployment.xcom(INGEST, published["ingest_run"], "ingest_events")
    warehouse = Path(deployment.env["AIRFLOW_PULSAR_EXAMPLES_DIR"]) / "warehouse"
    table = ds.dataset(warehouse / "shop.db" / "events", format="parquet", partitioning="hive").to_table()
    ids = {(row["partition"], tuple(row["message_id"].values())) for row in table.select(["partition", "message_id"]).to_pylist()}
    # The sensor fired on the first 1000; the run's batch took what was there when it was planned.
    assert summary["total_rows"] == table.num_rows == len(ids) >= 1000
    with PulsarAdmin(broker.web_url) as admin:
        backlog = admin.message_backlog(TOPIC, "lakehouse")
    assert table.num_rows + backlog.messages == len(published["events"])


def test_order_tally_counts_every_published_order(deployment: AirflowDeployment, published: dict[str, Any]) -> None:
    deployment.unpause(TALLY)
    run = _only_run(deployment, TALLY)["dag_run_id"]
    deployment.finished(TALLY, run, 300)
    summary = deployment.xcom(TALLY, run, "tally_orders")
    assert summary["messages"] == summary["acknowledged"] == len(published["events"])
    database = Path(deployment.env["AIRFLOW_PULSAR_EXAMPLES_DIR"]) / "orders.db"
    with sqlite3.connect(database) as db:
        counted = db.execute("SELECT sum(orders) FROM revenue").fetchone()[0]
    assert counted == sum(event["event_type"] == "order_placed" for event in published["events"]) > 0


def test_alert_handler_runs_in_the_triggerer_for_each_large_order_and_nothing_else(
    deployment: AirflowDeployment, broker: Any, published: dict[str, Any]
) -> None:
    large = sorted(
        json.dumps(event, sort_keys=True)
        for event in published["events"]
        if event["event_type"] == "order_placed" and event["amount"] >= LARGE_ORDER_EUR
    )
    assert large, "the published events hold no large order to alert on"
    deployment.unpause(ALERTS)

    def alert_values() -> list[str]:
        events = deployment.asset_events(ALERTS_ASSET)
        return [event["extra"]["payload"]["message"]["value"] for event in events]

    poll_api(lambda: len(alert_values()) >= len(large), f"{len(large)} alert asset events", 180)
    # The producer's alerts task published exactly the large orders of its events.
    assert sorted(json.dumps(json.loads(value), sort_keys=True) for value in alert_values()) == large

    # Airflow 3.3 gives an asset-triggered run the events up to the time its queue entry was made;
    # an event stored while that entry waits for the scheduler joins no run until a later event
    # comes (apache/airflow#54659). The high alert below is the last event, so it is sent once the
    # scheduler has made runs of the events before it.
    poll_api(lambda: deployment.queued_asset_events(ALERTS) == 0, "the scheduler to take the queued alert events", 180)
    with Client(broker.service_url) as client:
        producer = client.create_producer(ALERTS_TOPIC)
        producer.send(b'{"note": "low"}', properties={"severity": "low"})
        producer.send(b'{"note": "high"}', properties={"severity": "high"})
    # The watcher reads in order: once the high alert is an event, the low one was passed over.
    poll_api(lambda: alert_values()[-1:] == ['{"note": "high"}'], "the high-severity alert's asset event", 120)
    assert '{"note": "low"}' not in alert_values()

    def handled() -> list[str]:
        runs = deployment.runs(ALERTS)
        for run in runs:  # each must succeed; a failed or stuck run fails the test with its logs
            deployment.finished(ALERTS, run["dag_run_id"], 180)
        return [alert["message"]["value"] for run in runs for alert in deployment.xcom(ALERTS, run["dag_run_id"], "handle")]

    # Runs may batch several asset events; every alert is handled by one run that succeeded.
    wait_until(lambda: '{"note": "high"}' in handled(), "the alert handler to run for the high alert", 180, interval=3)
    assert sorted(handled()) == sorted(alert_values())
    assert "cannot be imported" not in deployment.log_tail("triggerer", chars=10**7)
