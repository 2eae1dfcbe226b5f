"""The provider's DAGs against the cluster (dag.test(), tasks and triggers in this process): the backlog
sensor and the ingestion DAG, on partitioned topics whose partitions are owned by both brokers, and
the ingestion DAG through the kill -9 of a broker that owns partitions the Spark job is reading.

The Airflow connection names both brokers and broker 0's admin URL, so every admin call about a
partition that broker 1 owns is answered by redirect (or gathered from broker 1 by broker 0).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.client import Client, InitialPosition, Result, Timeout
from airflow_pulsar.triggers.backlog_condition import BacklogCondition, BacklogReading
from jvm.apache_pulsar import STARTUP_TIMEOUT
from jvm.pulsar_cluster import PulsarCluster
from tests.support.broker_kill import KillOnRead
from tests.support.cluster_topics import create_namespace, partitioned_topic_on_every_broker
from tests.support.dag_runs import run_dag
from tests.support.spark_ingest import SEVERAL_JOBS_TIMEOUT, Catalog, assert_exactly_once, produce_json

pytestmark = pytest.mark.cluster

SUBSCRIPTION = "ingest"
THRESHOLD = 2000  # the pulsar_backlog_batched DAG's threshold, in messages
# The ingestion DAGs: tests/spark's, and this tier's own (a retried ingest).
DAG_FOLDERS = {
    "spark-tests": Path(__file__).resolve().parent.parent / "spark" / "dags",
    "cluster-tests": Path(__file__).resolve().parent / "dags",
}
# Enough that the Spark job reads for a while: 8 ranges on 2 cores, 100 messages an entry.
FAILOVER_MESSAGES = 40_000


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

    async def recording_read(self: BacklogCondition, admin, topic: str, subscription: str, **options: Any) -> BacklogReading:
        reading = await read(self, admin, topic, subscription, **options)
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
def ingest_dags(monkeypatch: pytest.MonkeyPatch, airflow_db: None) -> dict[str, Any]:
    """The ingestion DAGs by id, found by dag.test() through DAG bundles of their folders."""
    from airflow.dag_processing.dagbag import DagBag

    local = "airflow.dag_processing.bundles.local.LocalDagBundle"
    bundles = [{"name": "dags-folder", "classpath": local, "kwargs": {}}]
    bundles += [{"name": name, "classpath": local, "kwargs": {"path": str(path)}} for name, path in DAG_FOLDERS.items()]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))
    dags = {}
    for path in DAG_FOLDERS.values():
        bag = DagBag(dag_folder=path)
        assert not bag.import_errors, bag.import_errors
        dags.update(bag.dags)
    return dags


def test_ingest_dag_takes_partitions_of_both_brokers_exactly_once(
    pulsar_default: PulsarCluster, ingest_dags: dict[str, Any], tmp_path: Path, topic_name: str
) -> None:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    cluster = pulsar_default
    catalog = Catalog(tmp_path / "warehouse", tmp_path / "metastore")
    topic, owners = partitioned_topic_on_every_broker(cluster, "public/default", topic_name, 4)
    produce_json(cluster.service_url, topic, 0, 4_000, batch=50)
    dag = ingest_dags["pulsar_to_table"]

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


@SEVERAL_JOBS_TIMEOUT
def test_ingest_dag_survives_the_kill_of_a_partition_owner_while_spark_reads(
    pulsar_default: PulsarCluster, ingest_dags: dict[str, Any], tmp_path: Path, topic_name: str
) -> None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    cluster = pulsar_default
    catalog = Catalog(tmp_path / "warehouse", tmp_path / "metastore")
    # A namespace of its own: the plan log of the subscription is the test's alone.
    topic, _ = partitioned_topic_on_every_broker(cluster, create_namespace(cluster, "ingest-failover"), topic_name, 4)
    produce_json(cluster.service_url, topic, 0, FAILOVER_MESSAGES, batch=100)
    partitions = [f"{topic}-partition-{i}" for i in range(4)]
    # The owner of the partition Spark reads first; its other partitions are read later in the job.
    victim = cluster.lookup(partitions[0])
    kill = KillOnRead(cluster, victim, [p for p in partitions if cluster.lookup(p) is victim], STARTUP_TIMEOUT).start()

    run = ingest_dags["pulsar_to_table_retried"].test(
        run_conf={"topic": topic, "warehouse": str(catalog.warehouse), "metastore": str(catalog.metastore)}
    )
    kill.join(STARTUP_TIMEOUT)

    # The broker died mid-read: its partitions had delivered some of their messages, not all.
    assert kill.delivered is not None and 0 < kill.delivered < kill.held, (kill.delivered, kill.held)
    assert victim.running
    with create_session() as session:
        (ingest,) = session.scalars(select(TaskInstance).where(TaskInstance.run_id == run.run_id))
        print(f"ingest ended {ingest.state} on try {ingest.try_number}; {kill.delivered} of {kill.held} read at the kill")
    assert str(run.state) == "success"
    assert_exactly_once(catalog.rows("dag_events"), range(FAILOVER_MESSAGES))
    stats = cluster.admin("GET", topic.replace("persistent://", "/admin/v2/persistent/") + "/partitioned-stats").json()
    assert stats["subscriptions"]["dag-ingest"]["msgBacklog"] == 0
