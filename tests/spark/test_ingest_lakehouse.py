"""DAGs of PulsarToTableOperator writing Delta and Iceberg tables on local Spark, run again and
again over the same backlog after a process of the run died at every crash point (see
test_ingest_local.py; the crashing runs are task processes of their own, killed or failing there):
each message lands once, for Iceberg also when table maintenance expired the snapshot of a batch
written before a crash. Iceberg with the jars `make` resolves; Delta with
the operator's default packages, which spark-submit resolves itself (from Maven Central the first
time, into the checkout's Ivy cache), and which must bring Delta's jars and nothing Spark ships.

Here each format writes one kind of table (a Delta location, an Iceberg table of a Hadoop
catalog; the DAGs are in tests/spark/dags/pulsar_to_lakehouse_dag.py); the operators of
test_ingest_lakehouse_cluster.py write the Hive metastore's, at the crash the format's own
idempotence settles. Tables are read back from their logs and metadata
(tests/support/lakehouse_tables.py).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.spark.job.lakehouse import SNAPSHOT_BATCH_ID, delta_app_id
from jvm.lakehouse_jars import IVY_CACHE, lakehouse_jars
from tests.support.doc_scripts import EXAMPLES, included
from tests.support.iceberg_sql import compact_and_expire, iceberg_sql
from tests.support.ingest_task import DRIVER_JVM, PYTHON_WORKER, SUBMIT_AND_TASK, IngestTasks, crash
from tests.support.lakehouse_tables import LakehouseTable, delta_commits, delta_transactions, iceberg_metadata, iceberg_snapshot_summaries
from tests.support.spark_ingest import SEVERAL_JOBS_TIMEOUT, Catalog, DagRuns, assert_exactly_once, produce_json

# Delta's and Iceberg's behaviour, not the broker's, is the subject here.
pytestmark = [pytest.mark.one_broker, SEVERAL_JOBS_TIMEOUT]

DAGS = Path(__file__).parent / "dags"
QUERIES = EXAMPLES / "spark" / "queries.sql"


@pytest.fixture
def admin(pulsar_default: BrokerProcess) -> Iterator[PulsarAdmin]:
    with PulsarAdmin(pulsar_default.web_url) as client:
        yield client


# Four kills and reruns per format, 2 minutes each on a quiet machine: in the crash tier (`make test-crashes`).
@pytest.mark.crash_matrix
@pytest.mark.parametrize("kind", ["delta-location", "iceberg-hadoop"])
def test_a_dag_run_again_after_a_crash_at_every_point_leaves_each_message_once(
    kind: str,
    pulsar_default: BrokerProcess,
    admin: PulsarAdmin,
    catalog: Catalog,
    spark_test_dags: object,
    topic_name: str,
    ingest_tasks: IngestTasks,
) -> None:
    target = LakehouseTable.of(kind, catalog, "crashes")
    conf = {
        "topic": topic_name,
        "subscription": "to-lake",
        "table": target.table,
        "lake": str(catalog.warehouse.parent / "lake"),
        "jars": lakehouse_jars(target.table_format),  # Iceberg's DAG takes them; Delta's takes the default packages
        "warehouse": str(catalog.warehouse),
        "metastore": str(catalog.metastore),
    }
    dag_id = f"pulsar_to_{target.table_format}"
    dag = DagRuns(spark_test_dags.get_dag(dag_id), conf)  # type: ignore[attr-defined]

    def crash_at(point: str, kill: str) -> None:
        """A DAG run in a task process, ``kill`` killed while it holds at ``point``: the run fails, or dies."""
        status = crash(ingest_tasks.dag_run(DAGS, dag_id, conf, point), kill)
        assert status == (-signal.SIGKILL if kill == SUBMIT_AND_TASK else 1)

    admin.create_partitioned_topic(topic_name, 2)
    produce_json(pulsar_default.service_url, topic_name, 0, 2_000, batch=100)

    crash_at("before-write", DRIVER_JVM)
    crash_at("mid-read", PYTHON_WORKER)  # the executor dies: the write commits nothing
    assert not target.directory.exists() or target.commits() <= 1  # at most the table's creation

    def crash_after_write() -> None:
        crash_at("after-write", SUBMIT_AND_TASK)
        if target.table_catalog is not None:
            # Iceberg maintenance between the crash and the rerun: compaction makes the batch's
            # snapshot old, and expiry removes it, so only the table's rows show the batch is in.
            compact_and_expire(target.table, target.table_catalog)
            assert not any(summary.get(SNAPSHOT_BATCH_ID) for summary in iceberg_snapshot_summaries(target.directory))

    rerun = target.crash_after_write_then_rerun(crash_after_write, lambda: dag.run()["ingest"], 2_000)
    assert admin.backlog(topic_name, "to-lake").msg_backlog == 0
    written = target.commits()

    produce_json(pulsar_default.service_url, topic_name, 2_000, 700, batch=100)
    crash_at("before-ack", SUBMIT_AND_TASK)  # the job committed the second batch and reported it
    crash_at("mid-ack", SUBMIT_AND_TASK)  # settling acknowledges the first partition, then dies
    assert 0 < admin.message_backlog(topic_name, "to-lake").messages < 700

    final = dag.run()["ingest"]

    assert final["settled"]["was"] == "committed" and final["settled"]["total_rows"] == 700 and final["skipped"] is True
    rows = target.rows()
    assert_exactly_once(rows, range(2_700))
    assert set(rows.column("batch_id").to_pylist()) == {rerun["settled"]["batch_id"], final["settled"]["batch_id"]}
    assert target.commits() == written + 1
    assert admin.backlog(topic_name, "to-lake").msg_backlog == 0
    if target.table_format == "iceberg":
        carried = [summary.get(SNAPSHOT_BATCH_ID) for summary in iceberg_snapshot_summaries(target.directory)]
        # The first batch's snapshot expired (above); the second batch was written once.
        assert [batch for batch in carried if batch] == [final["settled"]["batch_id"]]
        # The docs' Iceberg query, on this table, names the same snapshots and batch ids.
        query = next(line for line in included(QUERIES, "queries", "--").splitlines() if line.endswith("-- Iceberg"))
        statement = query.split(";")[0].replace("lake.shop.orders", target.table)
        snapshots = iceberg_metadata(target.directory)["snapshots"]
        shown = [[str(snapshot["snapshot-id"]), snapshot["summary"].get(SNAPSHOT_BATCH_ID, "None")] for snapshot in snapshots]
        assert sorted(iceberg_sql(target.table, target.table_catalog or {}, [statement])) == sorted(shown)
    else:
        retrieved = {jar.name.split("_")[0] for jar in (IVY_CACHE / "jars").iterdir()}
        assert retrieved == {"io.delta", "io.unitycatalog"}, sorted(jar.name for jar in (IVY_CACHE / "jars").iterdir())
        # Delta recorded the transaction version of the second batch, above the first one's.
        versions = [a["txn"]["version"] for commit in delta_commits(target.directory) for a in commit if "txn" in a]
        assert len(versions) == 2 and versions[0] < versions[1]
        assert set(delta_transactions(target.directory)) == {delta_app_id("to-lake", target.table)}
