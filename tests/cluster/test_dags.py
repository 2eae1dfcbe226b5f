"""The provider's DAGs against the cluster (dag.test(), tasks and triggers in this process): the backlog
sensor and the ingestion DAG, on partitioned topics whose partitions are owned by both brokers.

The Airflow connection names both brokers and broker 0's admin URL, so every admin call about a
partition that broker 1 owns is answered by redirect (or gathered from broker 1 by broker 0).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from airflow_pulsar.client import Client, InitialPosition, Result, Timeout
from airflow_pulsar.triggers.backlog_condition import BacklogCondition, BacklogReading
from jvm.pulsar_cluster import PulsarCluster
from tests.support.cluster_topics import partitioned_topic_on_every_broker
from tests.support.dag_runs import run_dag
from tests.support.spark_ingest import Catalog, produce_json

pytestmark = pytest.mark.cluster

SUBSCRIPTION = "ingest"
THRESHOLD = 2000  # the pulsar_backlog_batched DAG's threshold, in messages
SPARK_DAGS = Path(__file__).resolve().parent.parent / "spark" / "dags"


def _send_batched(service_url: str, topic: str, first: int, count: int) -> None:
    """Keyed messages with default batching (so far fewer entries than messages), all acknowledged."""
    results: list[Result] = []
    with Client(service_url) as client:
        producer = client.create_producer(topic, block_if_queue_full=True)
        for i in range(first, first + count):
            key = f"key-{i}"
            producer.send_async(f"event-{i}".encode(), lambda result, _id: results.append(result), partition_key=key)
        producer.flush()
    assert results == [Result.Ok] * count


def _partitioned_entries(cluster: PulsarCluster, topic: str) -> dict[str, int]:
    """Each broker's answer to the partitioned stats: the subscription's msgBacklog (entries)."""
    path = topic.replace("persistent://", "/admin/v2/persistent/") + "/partitioned-stats"
    return {
        broker.name: broker.admin("GET", path).json()["subscriptions"][SUBSCRIPTION]["msgBacklog"]
        for broker in cluster.brokers
    }


def test_backlog_sensor_counts_messages_on_partitions_of_both_brokers(
    pulsar_default: PulsarCluster, airflow_db: None, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = pulsar_default
    topic, owners = partitioned_topic_on_every_broker(cluster, "public/default", topic_name, 3)
    path = topic.replace("persistent://", "/admin/v2/persistent/")
    cluster.admin("PUT", f"{path}/subscription/{SUBSCRIPTION}").raise_for_status()
    _send_batched(cluster.service_url, topic, 0, THRESHOLD - 1)

    readings: list[BacklogReading] = []
    first_reading = threading.Event()
    read = BacklogCondition.read

    async def recording_read(self: BacklogCondition, admin, topic: str, subscription: str) -> BacklogReading:
        reading = await read(self, admin, topic, subscription)
        readings.append(reading)
        first_reading.set()
        return reading

    monkeypatch.setattr(BacklogCondition, "read", recording_read)

    def cross() -> None:
        assert first_reading.wait(60), "the sensor never read the backlog"
        time.sleep(0.6)  # two of the DAG's poll intervals below the threshold
        _send_batched(cluster.service_url, topic, THRESHOLD - 1, 1)

    thread = threading.Thread(target=cross, daemon=True)
    thread.start()
    try:
        result = run_dag("pulsar_backlog_batched", topic=topic, subscription=SUBSCRIPTION)
    finally:
        thread.join(timeout=30)

    assert result.state == "success", result.states
    figures = result.xcoms["wait"]
    assert (figures["messages"], figures["exact"]) == (THRESHOLD, True)
    # Pulsar counts entries, and both brokers agree on them. The reading took its entries from the
    # stats read just before its message count, so the last entry (sent while the sensor polls)
    # may be in the count and not yet in those entries: at most one behind, never ahead.
    entries = _partitioned_entries(cluster, topic)
    (final,) = set(entries.values())
    assert final - 1 <= figures["entries"] <= final < THRESHOLD
    parts = figures["partitions"]
    assert sum(part["messages"] for part in parts.values()) == THRESHOLD
    # Broker 0 answered for broker 1's partitions too: they hold part of the count.
    remote = [name for name in parts if owners[int(name.rsplit("-", 1)[1])] is cluster.brokers[1]]
    assert remote and sum(parts[name]["messages"] for name in remote) > 0
    assert {reading.messages for reading in readings[:-1]} == {THRESHOLD - 1}


@pytest.fixture
def spark_dags(monkeypatch: pytest.MonkeyPatch, airflow_db: None) -> object:
    """The DAGs of tests/spark/dags, found by dag.test() as a second DAG bundle."""
    from airflow.dag_processing.dagbag import DagBag

    local = "airflow.dag_processing.bundles.local.LocalDagBundle"
    bundles = [
        {"name": "dags-folder", "classpath": local, "kwargs": {}},
        {"name": "spark-tests", "classpath": local, "kwargs": {"path": str(SPARK_DAGS)}},
    ]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))
    bag = DagBag(dag_folder=SPARK_DAGS)
    assert not bag.import_errors, bag.import_errors
    return bag


def test_ingest_dag_takes_partitions_of_both_brokers_exactly_once(
    pulsar_default: PulsarCluster, spark_dags: object, tmp_path: Path, topic_name: str
) -> None:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    cluster = pulsar_default
    catalog = Catalog(tmp_path / "warehouse", tmp_path / "metastore")
    topic, owners = partitioned_topic_on_every_broker(cluster, "public/default", topic_name, 4)
    produce_json(cluster.service_url, topic, 0, 4_000, batch=50)
    dag = spark_dags.get_dag("pulsar_to_table")  # type: ignore[attr-defined]

    run = dag.test(run_conf={"topic": topic, "warehouse": str(catalog.warehouse), "metastore": str(catalog.metastore)})

    assert str(run.state) == "success"
    with create_session() as session:
        rows = session.scalars(XComModel.get_many(run_id=run.run_id, key="return_value", dag_ids="pulsar_to_table"))
        summary = {row.task_id: XComModel.deserialize_value(row) for row in rows}["ingest"]
    # The DAG's max_messages (1000) shared by the four partitions, taken in whole entries.
    assert 800 < summary["total_rows"] <= 1_000 and len(summary["rows"]) == 4
    for span in summary["ranges"]:
        # Each partition's cursor was moved by its owner to the planned end (asked of broker 0).
        stats = cluster.admin("GET", span["topic"].replace("persistent://", "/admin/v2/persistent/") + "/internalStats")
        assert stats.json()["cursors"]["dag-ingest"]["markDeletePosition"] == span["through"]
    table_ids = catalog.rows("dag_events").column("id").to_pylist()
    assert len(table_ids) == summary["total_rows"]
    # What the run did not take is still on the subscription: together, every message once.
    with Client(cluster.brokers[1].service_url) as client:
        consumer = client.subscribe(topic, "dag-ingest", initial_position=InitialPosition.Earliest)
        rest: list[int] = []
        while True:
            try:
                rest.append(json.loads(consumer.receive(3_000).data())["id"])
            except Timeout:
                break
    assert sorted(table_ids + rest) == list(range(4_000))
    assert {owner.name for owner in owners.values()} == {broker.name for broker in cluster.brokers}
