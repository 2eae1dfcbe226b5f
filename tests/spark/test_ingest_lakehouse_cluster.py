"""Delta and Iceberg ingests into Hive metastore tables on the Spark standalone cluster, in client
and in cluster deploy mode: the driver's JVM is killed once the table holds its batch, before the
job reports it, and the next run writes the batch again, which the format keeps from landing
twice. One cluster serves the module."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from jvm.spark_cluster import CLUSTER_SPARK, REPORT_TIMEOUT_SECONDS, StandaloneCluster
from tests.support.ingest_task import DRIVER_JVM, IngestTasks, crash
from tests.support.lakehouse_tables import LakehouseTable
from tests.support.spark_ingest import SEVERAL_JOBS_TIMEOUT, Catalog, produce_json

# Spark's deploy modes and the table formats, not the broker, are the subject here.
pytestmark = [pytest.mark.one_broker, SEVERAL_JOBS_TIMEOUT]


def cluster_arguments(target: LakehouseTable, catalog: Catalog, topic: str, subscription: str, deploy_mode: str) -> dict[str, Any]:
    """The arguments of an ingest into ``target`` on the module's cluster, in ``deploy_mode``."""
    # In cluster mode one worker's core holds the driver (512 MB) and the other's the executor; in
    # client mode the application has an executor on each worker.
    sizing = {"driver_memory": "512m", "total_executor_cores": 1} if deploy_mode == "cluster" else {"total_executor_cores": 2}
    spark = {**CLUSTER_SPARK, "deploy_mode": deploy_mode, "report_timeout_seconds": REPORT_TIMEOUT_SECONDS, **sizing}
    return target.operator_arguments(catalog, topic, subscription, **spark)


# Each format crashes in one deploy mode and is settled in the other: a batch committed by a
# driver on the worker is written again by a driver in the submitting process, and the other way round.
# A minute each on a quiet machine: in the crash tier (`make test-crashes`).
@pytest.mark.crash_matrix
@pytest.mark.parametrize(
    ("kind", "crash_mode", "rerun_mode"), [("delta-metastore", "cluster", "client"), ("iceberg-metastore", "client", "cluster")]
)
def test_a_batch_committed_but_not_reported_lands_once_on_the_cluster(
    kind: str,
    crash_mode: str,
    rerun_mode: str,
    pulsar_default: BrokerProcess,
    spark_cluster: StandaloneCluster,
    catalog: Catalog,
    topic_name: str,
    ingest_tasks: IngestTasks,
) -> None:
    target = LakehouseTable.of(kind, catalog, "on_cluster")
    subscription = f"lake-{kind}"
    crashing = cluster_arguments(target, catalog, topic_name, subscription, crash_mode)
    rerun_by = PulsarToTableOperator(task_id="ingest", **cluster_arguments(target, catalog, topic_name, subscription, rerun_mode))
    # The driver's JVM is spark-submit's in client mode, the worker's in cluster mode.
    unreported = "ended without reporting it" if crash_mode == "cluster" else "Cannot execute"
    drivers_before = len(spark_cluster.completed("drivers"))

    def crash_after_write() -> None:
        task = ingest_tasks.operator(crashing, "after-write")
        assert crash(task, DRIVER_JVM, spark_cluster.worker_pids) == 1
        assert unreported in task.log(), task.log()[-3000:]
        spark_cluster.wait_idle()

    with PulsarAdmin(pulsar_default.web_url) as admin:
        admin.create_partitioned_topic(topic_name, 2)
        produce_json(pulsar_default.service_url, topic_name, 0, 1_000, batch=100)
        target.crash_after_write_then_rerun(crash_after_write, lambda: rerun_by.execute(context={}), 1_000)
        assert admin.backlog(topic_name, subscription).msg_backlog == 0
    # Both submits ran on the cluster, one of them with its driver on the worker.
    apps = [app for app in spark_cluster.completed("apps") if app["name"] == f"pulsar-ingest-{subscription}"]
    assert len(apps) == 2
    # The client-mode application had an executor on each worker, the cluster-mode one beside its driver.
    assert sorted(len(spark_cluster.workers_with(app["id"])) for app in apps) == [1, 2]
    drivers = spark_cluster.completed("drivers")[drivers_before:]
    assert [driver["state"] for driver in drivers] == ["FAILED" if crash_mode == "cluster" else "FINISHED"]
