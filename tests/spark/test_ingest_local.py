"""PulsarToTableOperator on local Spark against the broker process: a 100 000-message ingest, the
next run appending only new messages, an empty backlog, a topic of 512 partitions, and a crash at
each crash point.

A crashing run is a task process of its own that holds at a crash point (AIRFLOW_PULSAR_INGEST_FAULT,
airflow_pulsar.spark.job.faults) while the test kills a process of the run with SIGKILL: the
driver's JVM, the executor's Python worker, or spark-submit with the task process (see
tests/support/ingest_task.py). What the death leaves behind is then exactly what the next run
finds: a plan record in the plan topic, perhaps a written table partition, perhaps some
acknowledged partitions.

The module runs on one broker (Apache Pulsar when selected): its subject is the job's commit
protocol, and the brokers' part in it (cumulative acks, exclusive subscriptions, the plan topic) is
held to one behaviour by the interop and reliability tiers; the embedded broker runs the Spark
tier's DAG test here and the rest of this tier twice more in the range tiers.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from airflow_pulsar.spark.planning.hold import SubscriptionBusy, SubscriptionHold
from tests.support.ingest_task import DRIVER_JVM, PYTHON_WORKER, SUBMIT_AND_TASK, IngestTasks, crash
from tests.support.spark_ingest import (
    LOCAL_SPARK_CONF,
    SEVERAL_JOBS_TIMEOUT,
    VALUE_SCHEMA,
    Catalog,
    assert_exactly_once,
    produce_json,
)

pytestmark = [pytest.mark.one_broker, SEVERAL_JOBS_TIMEOUT]

PARTITIONS = 4


def ingest_arguments(catalog: Catalog, topic: str, table: str) -> dict[str, Any]:
    """The operator's arguments."""
    return {
        "topics": topic,
        "subscription": "to-table",
        "table": table,
        "value_format": "json",
        "value_schema": VALUE_SCHEMA,
        "min_partitions": 6,
        "conf": LOCAL_SPARK_CONF,
        **catalog.operator_args(),
    }


def ingest(catalog: Catalog, topic: str, table: str) -> dict:
    """One run of the operator, as a task would run it."""
    return PulsarToTableOperator(task_id="ingest", **ingest_arguments(catalog, topic, table)).execute(context={})


@pytest.fixture
def admin(pulsar_default: BrokerProcess) -> Iterator[PulsarAdmin]:
    with PulsarAdmin(pulsar_default.web_url) as client:
        yield client


def test_ingests_100k_json_messages_then_appends_only_new_ones(
    pulsar_default: BrokerProcess, admin: PulsarAdmin, catalog: Catalog, topic_name: str
) -> None:
    admin.create_partitioned_topic(topic_name, PARTITIONS)
    produce_json(pulsar_default.service_url, topic_name, 0, 100_000)

    started = time.monotonic()
    first = ingest(catalog, topic_name, "events")
    seconds = time.monotonic() - started

    assert first["skipped"] is False and first["total_rows"] == 100_000
    partitions = [f"persistent://public/default/{topic_name}-partition-{i}" for i in range(PARTITIONS)]
    assert sorted(first["rows"]) == partitions
    assert sum(first["rows"].values()) == 100_000 and min(first["rows"].values()) > 0
    for span in first["ranges"]:
        # Each partition from its start (nothing acknowledged: entry -1) through its newest entry,
        # cut into contiguous sub-ranges for the 6 Spark tasks.
        ledger = span["after"].split(":")[0]
        assert span["after"] == f"{ledger}:-1"
        stats = admin.internal_stats(span["topic"])
        assert span["through"] == stats["lastConfirmedEntry"]
        cuts = span["spark_ranges"]
        assert cuts[0][0] == span["after"] and cuts[-1][1] == span["through"]
        assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:], strict=False))
    assert sum(len(span["spark_ranges"]) for span in first["ranges"]) >= 6
    # At least min_partitions=6 tasks read, whatever Spark's parallelism, and each writes a file.
    ranges = sum(len(span["spark_ranges"]) for span in first["ranges"])
    files = list(catalog.table_dir("events").glob(f"batch_id={first['batch_id']}/*.parquet"))
    assert len(files) == min(ranges, max(6, 2 * len(os.sched_getaffinity(0)))), files
    assert admin.backlog(topic_name, "to-table").msg_backlog == 0

    rows = catalog.rows("events")
    assert_exactly_once(rows, range(100_000))
    assert set(rows.column("batch_id").to_pylist()) == {first["batch_id"]}
    sample = rows.filter(pc.equal(rows.column("id"), 7)).to_pylist()[0]
    assert sample["key"] == "k7" and sample["name"] == "n7" and sample["amount"] == 1.75
    assert sample["properties"] == [("seq", "7")] and sample["_corrupt_record"] is None
    assert sample["topic"] == topic_name and sample["publish_time"] is not None and sample["event_time"] is None
    assert (catalog.metastore / "metastore_db").is_dir()
    print(f"100000 messages ingested in {seconds:.1f} s (spark-submit included)")

    produce_json(pulsar_default.service_url, topic_name, 100_000, 1_000)
    second = ingest(catalog, topic_name, "events")

    assert second["total_rows"] == 1_000 and second["batch_id"] != first["batch_id"]
    for before, after in zip(first["ranges"], second["ranges"], strict=True):
        assert after["after"] == before["through"]
    rows = catalog.rows("events")
    assert_exactly_once(rows, range(101_000))
    assert rows.filter(pc.equal(rows.column("batch_id"), second["batch_id"])).num_rows == 1_000
    assert admin.backlog(topic_name, "to-table").msg_backlog == 0

    third = ingest(catalog, topic_name, "events")

    assert third["skipped"] is True and third["total_rows"] == 0 and third["settled"] is None
    assert catalog.rows("events").num_rows == 101_000


@pytest.fixture
def crash_at(catalog: Catalog, topic_name: str, ingest_tasks: IngestTasks) -> Callable[[str, str, str], None]:
    """Run the operator in a task process, killing ``kill`` when the run holds at ``point``: the
    task must die with it, or fail of the job's death."""

    def run(point: str, kill: str, table: str) -> None:
        task = ingest_tasks.operator(ingest_arguments(catalog, topic_name, table), point)
        status = crash(task, kill)
        if kill == SUBMIT_AND_TASK:
            assert status == -signal.SIGKILL
        else:
            assert status == 1 and "Cannot execute" in task.log(), task.log()[-3000:]

    return run


def test_crashes_before_during_and_after_the_write_leave_each_message_once(
    pulsar_default: BrokerProcess,
    admin: PulsarAdmin,
    catalog: Catalog,
    topic_name: str,
    crash_at: Callable[[str, str, str], None],
) -> None:
    admin.create_partitioned_topic(topic_name, PARTITIONS)
    table = "crashes"
    # A batch planned, then the driver's JVM dies before writing, then the executor's Python
    # worker mid-read on the retry, then spark-submit and the task after writing the table but
    # before reporting: three attempts leave at most a written partition.
    produce_json(pulsar_default.service_url, topic_name, 0, 3_000, batch=100)
    crash_at("before-write", DRIVER_JVM, table)
    assert not catalog.table_dir(table).exists() or catalog.rows(table).num_rows == 0
    crash_at("mid-read", PYTHON_WORKER, table)
    assert catalog.rows(table).num_rows == 0  # the table exists now, but the failed job left no rows
    crash_at("after-write", SUBMIT_AND_TASK, table)
    written = catalog.rows(table)
    assert written.num_rows == 3_000  # in the table, but neither reported nor acknowledged
    assert admin.message_backlog(topic_name, "to-table").messages == 3_000

    rerun = ingest(catalog, topic_name, table)

    # The unfinished batch, written again under its id, is in the table once; nothing is left.
    assert rerun["settled"]["batch_id"] == written.column("batch_id")[0].as_py()
    assert rerun["settled"]["was"] == "planned" and rerun["settled"]["total_rows"] == 3_000
    assert rerun["skipped"] is True
    assert_exactly_once(catalog.rows(table), range(3_000))
    assert admin.backlog(topic_name, "to-table").msg_backlog == 0


@pytest.fixture
def job_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temp directory of the Spark jobs the test submits: their JVM's and their Python's."""
    temp = tmp_path / "job-tmp"
    temp.mkdir()
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -Djava.io.tmpdir={temp}")
    monkeypatch.setenv("TMPDIR", str(temp))
    return temp


def test_crashes_before_and_during_the_acks_leave_each_message_once(
    pulsar_default: BrokerProcess,
    admin: PulsarAdmin,
    catalog: Catalog,
    topic_name: str,
    crash_at: Callable[[str, str, str], None],
    job_temp_dir: Path,
) -> None:
    # More partitions than the job takes Spark tasks (twice the cores of local[*], at least the
    # operator's min_partitions of 6): small ranges are read several to a task.
    partitions = 3 * max(6, 2 * len(os.sched_getaffinity(0)))
    admin.create_partitioned_topic(topic_name, partitions)
    table = "ack_crashes"
    # The job commits, then the task dies before acknowledging; then mid-ack on the retry.
    produce_json(pulsar_default.service_url, topic_name, 0, 700, batch=100)
    crash_at("before-ack", SUBMIT_AND_TASK, table)
    assert admin.message_backlog(topic_name, "to-table").messages == 700
    # One file per task, each holding the rows of several partitions.
    files = list(catalog.table_dir(table).glob("batch_id=*/*.parquet"))
    assert len(files) == max(6, 2 * len(os.sched_getaffinity(0))), files
    assert sorted(set(catalog.rows(table).column("partition").to_pylist())) == list(range(partitions))
    crash_at("mid-ack", SUBMIT_AND_TASK, table)
    partial = admin.message_backlog(topic_name, "to-table")
    assert 0 < partial.messages < 700  # the first partition was acknowledged
    assert_exactly_once(catalog.rows(table), range(700))

    final = ingest(catalog, topic_name, table)

    assert final["settled"]["was"] == "committed" and final["settled"]["total_rows"] == 700
    assert final["skipped"] is True  # acknowledging was all that was left
    assert_exactly_once(catalog.rows(table), range(700))
    assert admin.backlog(topic_name, "to-table").msg_backlog == 0
    assert len(set(catalog.rows(table).column("batch_id").to_pylist())) == 1
    # The job cleaned up after itself: Spark's scratch directories, and Hive's session directory
    # that Spark leaves behind unless the job moves it.
    assert not list(job_temp_dir.iterdir())


def test_a_csv_table_takes_each_batch_in_its_column_order_and_options(
    pulsar_default: BrokerProcess, admin: PulsarAdmin, catalog: Catalog, topic_name: str
) -> None:
    admin.create_partitioned_topic(topic_name, 2)
    produce_json(pulsar_default.service_url, topic_name, 0, 500, batch=50)
    arguments = {**ingest_arguments(catalog, topic_name, "as_csv"), "format": "csv", "min_partitions": 2}

    first = PulsarToTableOperator(task_id="ingest", **arguments).execute(context={})
    produce_json(pulsar_default.service_url, topic_name, 500, 200, batch=50)
    second = PulsarToTableOperator(task_id="ingest", **arguments).execute(context={})

    assert (first["total_rows"], second["total_rows"]) == (500, 200)
    directory = catalog.table_dir("as_csv")
    assert sorted(path.name for path in directory.iterdir() if path.name.startswith("batch_id=")) == sorted(
        f"batch_id={result['batch_id']}" for result in (first, second)
    )
    # The files hold the table's columns in its order, without a header (a csv table's default):
    # the key first, then the JSON fields; no staging directory is left.
    lines = [line for path in directory.glob("batch_id=*/*.csv") for line in path.read_text().splitlines()]
    pairs = sorted((fields[0], fields[2]) for fields in (line.split(",") for line in lines))
    assert pairs == sorted((f"k{i}", f"n{i}") for i in range(700))
    assert not list(directory.glob("_ingest_staging/*"))
    assert admin.backlog(topic_name, "to-table").msg_backlog == 0


def test_a_topic_of_512_partitions_is_ingested(
    pulsar_default: BrokerProcess, admin: PulsarAdmin, catalog: Catalog, topic_name: str
) -> None:
    # The job's spec names every partition: as plain JSON on spark-submit's command line, 512 of
    # them (about 190 KB) were over Linux's 128 KiB limit on one argument, and spark-submit could not start.
    admin.create_partitioned_topic(topic_name, 512)
    with Client(pulsar_default.service_url) as client:
        # Unbatched and unkeyed, the messages go round robin: two on every partition.
        producer = client.create_producer(topic_name, batching_enabled=False)
        for i in range(1024):
            value = {"id": i, "name": f"n{i}", "amount": i / 4, "at": "2024-05-01T12:00:00Z"}
            producer.send_async(json.dumps(value).encode(), None)
        producer.flush()

    result = ingest(catalog, topic_name, "wide")

    assert result["total_rows"] == 1024 and len(result["ranges"]) == 512
    assert set(result["rows"].values()) == {2}
    assert_exactly_once(catalog.rows("wide"), range(1024))
    assert admin.backlog(topic_name, "to-table").msg_backlog == 0


def test_a_second_run_cannot_take_a_held_subscription(
    pulsar_default: BrokerProcess, admin: PulsarAdmin, catalog: Catalog, topic_name: str
) -> None:
    admin.create_partitioned_topic(topic_name, 2)
    with Client(pulsar_default.service_url) as client, SubscriptionHold(client, [topic_name], "to-table"):
        with pytest.raises(SubscriptionBusy, match="held by another consumer"):
            ingest(catalog, topic_name, "held")
