"""A job that goes on after its task died (a zombie) cannot change a batch a later attempt committed.

The first run's processes are stopped (SIGSTOP) while its job holds at a crash point, and its task
process is killed (SIGKILL); the task is retried: the retry writes the batch again under the same
id, as the next attempt, commits it and acknowledges it. Then the first run's processes go on
(SIGCONT): the zombie's job must leave the table as the retry left it, and its report, of an
attempt given up, must not make the next run settle anything.

Where the job stands when it is stopped decides what fences it. After planning (``before-write``),
the zombie finds the batch in the table when it goes on. Within the write (``mid-read``: an
executor holds while Spark writes what it read), the zombie has looked already and found nothing:
only the table commit itself can refuse it (Iceberg's validation from the snapshot it looked at,
Delta's transaction versions, the rename of a parquet batch's directory). A parquet table's Derby
metastore, which the zombie's JVM keeps open from its first use, lets the retry run only while
the zombie has not used it yet: before its session starts.

Local Spark on the broker process, one of each per run; the zombie's JVM must not time out its
own executor while it is stopped (``spark.network.timeout``). Spark's event logs show how a
zombie that wrote went: its commit refused.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from tests.support.ingest_task import END_TIMEOUT_SECONDS, IngestTasks
from tests.support.lakehouse_tables import LakehouseTable
from tests.support.process_tree import signal_all, wait_gone
from tests.support.spark_ingest import LOCAL_SPARK_CONF, SEVERAL_JOBS_TIMEOUT, Catalog, assert_exactly_once, produce_json

pytestmark = [pytest.mark.one_broker, SEVERAL_JOBS_TIMEOUT]

MESSAGES = 20_000
# A stopped JVM finds its heartbeats late when it goes on: long enough not to give its executor up.
PATIENT_SPARK = {**LOCAL_SPARK_CONF, "spark.network.timeout": "1800s", "spark.executor.heartbeatInterval": "600s"}
# What a zombie's refused commit says (in lower case), by format: Iceberg's validation ("Found
# conflicting files"), Delta's conflict checks (ConcurrentAppendException, or, when the zombie
# began before the table existed, "...changed by a concurrent update").
REFUSALS = {"iceberg": "found conflicting files", "delta": "concurrent"}


def failed_queries(event_logs: Path) -> list[str]:
    """The errors of the SQL executions that failed, in the Spark event logs of ``event_logs``."""
    errors = []
    for path in event_logs.glob("[!.]*"):
        for line in path.read_text(errors="replace").splitlines():
            event = json.loads(line)
            if event["Event"].endswith("SparkListenerSQLExecutionEnd") and event.get("errorMessage"):
                errors.append(event["errorMessage"])
    return errors


@pytest.fixture
def admin(pulsar_default: BrokerProcess) -> Iterator[PulsarAdmin]:
    with PulsarAdmin(pulsar_default.web_url) as client:
        yield client


def zombie_case(kind: str, point: str, table: str, *marks: pytest.MarkDecorator) -> object:
    return pytest.param(kind, point, table, marks=marks, id=f"{kind}-{point}-{table}")


# The batch is the table's first (as when the zombie was found: Iceberg validates the table's whole
# history, Delta's first commit meets another), or it follows one ("steady": Iceberg validates from
# the snapshot the zombie looked at, Delta checks the transaction version it read).
@pytest.mark.parametrize(
    ("kind", "point", "table"),
    [
        zombie_case("parquet", "before-write", "new"),
        zombie_case("delta-location", "mid-read", "steady", pytest.mark.crash_matrix),
        zombie_case("iceberg-hadoop", "mid-read", "new", pytest.mark.crash_matrix),
        zombie_case("delta-location", "mid-read", "new", pytest.mark.crash_matrix),
        zombie_case("iceberg-hadoop", "mid-read", "steady", pytest.mark.crash_matrix),
        zombie_case("delta-location", "before-write", "new", pytest.mark.crash_matrix),
        zombie_case("iceberg-hadoop", "before-write", "new", pytest.mark.crash_matrix),
    ],
)
def test_a_job_going_on_after_its_retry_committed_leaves_the_table_as_it_was(
    kind: str,
    point: str,
    table: str,
    pulsar_default: BrokerProcess,
    admin: PulsarAdmin,
    catalog: Catalog,
    topic_name: str,
    ingest_tasks: IngestTasks,
    tmp_path: Path,
) -> None:
    target = LakehouseTable.of(kind, catalog, "zombies")
    event_logs = tmp_path / "events"
    event_logs.mkdir()
    spark_conf = {
        **PATIENT_SPARK,
        # One file of JSON lines per application.
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": event_logs.as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }
    arguments = target.operator_arguments(catalog, topic_name, "zombie", conf=spark_conf)
    admin.create_partitioned_topic(topic_name, 2)
    before = 2_000 if table == "steady" else 0
    if before:
        produce_json(pulsar_default.service_url, topic_name, 0, before)
        PulsarToTableOperator(task_id="ingest", **arguments).execute(context={})
    produce_json(pulsar_default.service_url, topic_name, before, MESSAGES)

    first = ingest_tasks.operator(arguments, point)
    first.held()
    signal_all(first.processes(), signal.SIGSTOP)
    # Again: a process started while the first were being stopped.
    signal_all(first.processes(), signal.SIGSTOP)
    zombie = [process for process in first.processes() if process.pid != first.pid]
    os.kill(first.pid, signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL

    retry = PulsarToTableOperator(task_id="ingest", **arguments).execute(context={})

    assert retry["settled"]["was"] == "planned" and retry["settled"]["total_rows"] == MESSAGES
    assert admin.backlog(topic_name, "zombie").msg_backlog == 0
    committed = target.files()
    assert_exactly_once(target.rows(), range(before + MESSAGES))

    signal_all(zombie, signal.SIGCONT)
    first.release()
    left = wait_gone(zombie, END_TIMEOUT_SECONDS)
    assert not left, f"the zombie still runs: {[str(process) for process in left]}"

    assert target.files() == committed
    assert_exactly_once(target.rows(), range(before + MESSAGES))
    if point == "mid-read" and target.table_format in REFUSALS:
        # The zombie had looked before it was stopped, and wrote when it went on: its commit was refused.
        errors = failed_queries(event_logs)
        assert any(REFUSALS[target.table_format] in error.lower() for error in errors), errors
    final = PulsarToTableOperator(task_id="ingest", **arguments).execute(context={})
    assert final["skipped"] is True and final["settled"] is None
    assert admin.backlog(topic_name, "zombie").msg_backlog == 0
