"""The same ingest on a Spark standalone cluster: a master and a worker started from the
pip-installed pyspark with spark-class, on 127.0.0.1 and free ports, reached through an Airflow
Spark connection, one for the module. The executors run in the worker's JVM, not in the submitting
process; in cluster deploy mode the driver runs there too, from the job archive the worker fetched."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from jvm.spark_cluster import CLUSTER_SPARK, REPORT_TIMEOUT_SECONDS, StandaloneCluster
from tests.support.ingest_task import DRIVER_JVM, IngestTasks, crash
from tests.support.spark_ingest import SEVERAL_JOBS_TIMEOUT, VALUE_SCHEMA, Catalog, assert_exactly_once, produce_json

# Spark's deploy modes, not the broker, are the subject here (see conftest.py).
pytestmark = [pytest.mark.one_broker, SEVERAL_JOBS_TIMEOUT]


def cluster_arguments(catalog: Catalog, topic: str, subscription: str, table: str, **spark: Any) -> dict[str, Any]:
    """The arguments of an ingest of JSON messages into ``table`` on the cluster, with ``spark`` arguments added."""
    return {
        "topics": topic,
        "subscription": subscription,
        "table": table,
        "value_format": "json",
        "value_schema": VALUE_SCHEMA,
        "min_partitions": 4,
        **CLUSTER_SPARK,
        **spark,
        **catalog.operator_args(),
    }


def cluster_ingest(catalog: Catalog, topic: str, subscription: str, table: str, **spark: Any) -> PulsarToTableOperator:
    """An ingest of JSON messages into ``table`` on the cluster, with ``spark`` arguments added."""
    return PulsarToTableOperator(task_id="ingest", **cluster_arguments(catalog, topic, subscription, table, **spark))


def test_the_job_runs_unchanged_on_a_standalone_cluster(
    pulsar_default: BrokerProcess, spark_cluster: StandaloneCluster, catalog: Catalog, topic_name: str
) -> None:
    apps_before, drivers_before = len(spark_cluster.completed("apps")), len(spark_cluster.completed("drivers"))
    with PulsarAdmin(pulsar_default.web_url) as admin:
        admin.create_partitioned_topic(topic_name, 3)
        produce_json(pulsar_default.service_url, topic_name, 0, 5_000, batch=200)

        result = cluster_ingest(catalog, topic_name, "to-cluster", "on_cluster", total_executor_cores=2).execute(context={})

        assert result["total_rows"] == 5_000
        assert admin.backlog(topic_name, "to-cluster").msg_backlog == 0
    assert_exactly_once(catalog.rows("on_cluster"), range(5_000))
    apps = spark_cluster.completed("apps")[apps_before:]
    assert [app["name"] for app in apps] == ["pulsar-ingest-to-cluster"] and apps[0]["state"] == "FINISHED"
    assert apps[0]["memoryperslave"] == 768  # executor sizing reached the cluster
    # In client mode only executors run tasks: each worker launched one (a core each) for the application.
    assert spark_cluster.workers_with(apps[0]["id"]) == {"worker-1", "worker-2"}
    assert not spark_cluster.completed("drivers")[drivers_before:]


# Two jobs and a kill, 100 s on a quiet machine: in the crash tier (`make test-crashes`).
@pytest.mark.crash_matrix
def test_cluster_deploy_mode_settles_a_crashed_batch_and_writes_the_next_in_one_run(
    pulsar_default: BrokerProcess, spark_cluster: StandaloneCluster, catalog: Catalog, topic_name: str, ingest_tasks: IngestTasks
) -> None:
    # A worker's core holds the driver (512 MB), the other worker's the executor.
    arguments = cluster_arguments(
        catalog,
        topic_name,
        "in-cluster",
        "from_cluster",
        deploy_mode="cluster",
        driver_memory="512m",
        total_executor_cores=1,
        report_timeout_seconds=REPORT_TIMEOUT_SECONDS,
    )
    drivers_before = len(spark_cluster.completed("drivers"))
    with PulsarAdmin(pulsar_default.web_url) as admin:
        admin.create_partitioned_topic(topic_name, 2)
        produce_json(pulsar_default.service_url, topic_name, 0, 2_000, batch=100)
        # The driver's JVM on the worker is killed once the table holds the batch, before the job
        # reports it (spark-submit's environment reaches the driver through the standalone client).
        task = ingest_tasks.operator(arguments, "after-write")
        assert crash(task, DRIVER_JVM, spark_cluster.worker_pids) == 1
        assert "ended without reporting it" in task.log()
        spark_cluster.wait_idle()
        assert catalog.rows("from_cluster").num_rows == 2_000
        assert admin.message_backlog(topic_name, "in-cluster").messages == 2_000
        produce_json(pulsar_default.service_url, topic_name, 2_000, 1_000, batch=100)

        result = PulsarToTableOperator(task_id="ingest", **arguments).execute(context={})

        # Two submits in one run: the crashed batch written again under its id, then the new one.
        assert result["settled"]["was"] == "planned" and result["settled"]["total_rows"] == 2_000
        assert result["skipped"] is False and result["total_rows"] == 1_000
        assert result["batch_id"] != result["settled"]["batch_id"]
        assert admin.backlog(topic_name, "in-cluster").msg_backlog == 0
    rows = catalog.rows("from_cluster")
    assert_exactly_once(rows, range(3_000))
    assert set(rows.column("batch_id").to_pylist()) == {result["batch_id"], result["settled"]["batch_id"]}
    # Every driver ran on the worker, from the archive it fetched: one failed, two finished.
    drivers = spark_cluster.completed("drivers")[drivers_before:]
    assert sorted(driver["state"] for driver in drivers) == ["FAILED", "FINISHED", "FINISHED"]
    assert all(driver["mainclass"] == "org.apache.spark.deploy.PythonRunner" for driver in drivers)
    work = spark_cluster.directory / "work"
    assert all(len(list(work.glob(f"worker-*/{driver['id']}/airflow_pulsar_job.jar"))) == 1 for driver in drivers)
