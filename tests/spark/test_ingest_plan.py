"""Planning an ingest batch without a broker: the averaging allocation, cuts across ledgers,
budgets, batch ids and the plan's JSON form; the operator's checks of its arguments; the
spark-submit command of each deploy mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql.types import StructType

from airflow_pulsar.spark.archive import build_job_archive
from airflow_pulsar.spark.job.columns import row_ddl
from airflow_pulsar.spark.job.credentials import CREDENTIALS_FILE, TRUST_FILE, JobAuth
from airflow_pulsar.spark.job.plan import BatchOutcome, IngestPlan, Position, ReadRange, batch_id_for
from airflow_pulsar.spark.job.read_tasks import entry_estimate, task_ranges
from airflow_pulsar.spark.job.records import PLANNED, PlanRecord
from airflow_pulsar.spark.job.source import PulsarRangesDataSource
from airflow_pulsar.spark.job.spec import IngestJobSpec, top_level_names
from airflow_pulsar.spark.planning.allocation import (
    Segment,
    average_shares,
    backlog_segments,
    pieces_per_partition,
    split_segments,
)
from airflow_pulsar.spark.planning.hold import PartitionState
from airflow_pulsar.spark.planning.plan_log import default_plan_topic
from airflow_pulsar.spark.planning.planner import plan_batch

P = Position


def state(index: int, mark_delete: Position, last: Position) -> PartitionState:
    return PartitionState(f"persistent://public/default/t-partition-{index}", "t", index, mark_delete, last)


def test_average_shares_give_the_first_remainder_parts_one_more() -> None:
    # RocketMQ's averaging: 10 queues over 4 consumers are 3, 3, 2, 2, contiguous.
    assert average_shares(10, 4) == [3, 3, 2, 2]
    assert average_shares(8, 4) == [2, 2, 2, 2]
    assert average_shares(2, 4) == [1, 1, 0, 0]
    with pytest.raises(ValueError, match="parts must be positive"):
        average_shares(3, 0)


def test_pieces_go_to_the_partitions_with_the_largest_pieces() -> None:
    assert pieces_per_partition([100, 10, 0], 1) == [1, 1, 0]
    assert pieces_per_partition([100, 10, 0], 5) == [4, 1, 0]
    assert pieces_per_partition([3, 3, 3], 4) == [2, 1, 1]
    assert pieces_per_partition([1, 1], 8) == [1, 1]  # a piece is at least one entry


def test_a_backlog_is_cut_into_contiguous_ranges_across_ledgers() -> None:
    # Mark-delete at 7:8 in ledger 7 (10 entries), ledger 9 whole (5 entries), then 12 up to entry 3.
    segments = backlog_segments(P(7, 8), P(12, 3), [(5, 100), (7, 10), (9, 5), (12, 0)])
    assert segments == [Segment(7, 9, 9), Segment(9, 0, 4), Segment(12, 0, 3)]
    cuts = split_segments(P(7, 8), segments, 3)  # 10 entries: 4, 3, 3
    assert cuts == [(P(7, 8), P(9, 2)), (P(9, 2), P(12, 0)), (P(12, 0), P(12, 3))]
    assert backlog_segments(P(3, 4), P(3, 4)) == []
    assert backlog_segments(P(3, 4), P(3, 9)) == [Segment(3, 5, 9)]
    with pytest.raises(ValueError, match="spans ledgers"):
        backlog_segments(P(3, 4), P(4, 9))


def test_plan_without_a_cap_splits_large_partitions_for_min_partitions() -> None:
    states = [state(0, P(1, -1), P(1, 99)), state(1, P(2, 49), P(2, 59)), state(2, P(3, 5), P(3, 5))]
    plan = plan_batch(states, "sub", "db.events", min_partitions=6)
    assert plan is not None
    assert [p.topic.rsplit("-", 1)[1] for p in plan.partitions] == ["0", "1"]  # partition 2 is empty
    big, small = plan.partitions
    cuts = [("1:-1", "1:19"), ("1:19", "1:39"), ("1:39", "1:59"), ("1:59", "1:79"), ("1:79", "1:99")]
    assert [(str(r.after), str(r.last)) for r in big.ranges] == cuts
    assert [(str(r.after), str(r.last)) for r in small.ranges] == [("2:49", "2:59")]
    assert all(r.message_budget is None for r in plan.ranges)
    assert plan_batch(states[2:], "sub", "db.events") is None


def test_plan_with_a_cap_shares_it_evenly_and_keeps_one_reader_per_partition() -> None:
    states = [state(i, P(i, -1), P(i, 999)) for i in range(3)]
    plan = plan_batch(states, "sub", "events", min_partitions=8, max_messages=1000)
    assert plan is not None
    assert [p.message_budget for p in plan.partitions] == [334, 333, 333]
    assert all(len(p.ranges) == 1 and p.budgeted for p in plan.partitions)
    tiny = plan_batch(states, "sub", "events", max_messages=2)
    assert tiny is not None and [p.message_budget for p in tiny.partitions] == [1, 1, 1]
    with pytest.raises(ValueError, match="max_messages"):
        plan_batch(states, "sub", "events", max_messages=0)


def test_a_partition_with_messages_is_planned_through_its_max_read_position() -> None:
    # Partition 0's last message 1:6 is followed by an aborted message and its marker (max read
    # position 1:8); partition 1 holds only markers past its mark-delete; partition 2's max read
    # position lags its last message (read first); partition 3 has no transactions to report.
    states = [state(0, P(1, -1), P(1, 6)), state(1, P(2, 4), P(2, 4)), state(2, P(3, 1), P(3, 9)), state(3, P(4, 1), P(4, 2))]
    max_reads = {states[0].topic: P(1, 8), states[1].topic: P(2, 7), states[2].topic: P(3, 5)}
    plan = plan_batch(states, "sub", "events", max_reads=max_reads)
    assert plan is not None
    planned = [(p.partition, str(p.mark_delete), str(p.last)) for p in plan.partitions]
    assert planned == [(0, "1:-1", "1:8"), (2, "3:1", "3:9"), (3, "4:1", "4:2")]
    assert [str(r.last) for r in plan.ranges] == ["1:8", "3:9", "4:2"]
    # Readers are given nothing after 1:6, so partition 0's range ends there.
    assert [r.last_message for r in plan.ranges] == [P(1, 6), None, None]
    assert ReadRange.from_dict(plan.ranges[0].to_dict()) == plan.ranges[0]
    # The batch id does not depend on where the batch ends.
    assert plan.batch_id == plan_batch(states, "sub", "events").batch_id  # type: ignore[union-attr]


def test_the_batch_id_depends_on_where_the_batch_starts_only() -> None:
    starts = {"a": P(1, 5), "b": P(2, -1)}
    assert batch_id_for("sub", "t", starts) == batch_id_for("sub", "t", dict(reversed(starts.items())))
    assert batch_id_for("sub", "t", starts) != batch_id_for("sub", "t", {"a": P(1, 6), "b": P(2, -1)})
    assert batch_id_for("sub", "t", starts) != batch_id_for("sub", "u", starts)
    early = plan_batch([state(0, P(1, 5), P(1, 10))], "sub", "t")
    later = plan_batch([state(0, P(1, 5), P(1, 90))], "sub", "t")
    assert early is not None and later is not None and early.batch_id == later.batch_id


def test_each_batch_has_a_sequence_number_above_the_previous_ones() -> None:
    first = plan_batch([state(0, P(1, 5), P(1, 10))], "sub", "t")
    assert first is not None and first.sequence > 0
    second = plan_batch([state(0, P(1, 10), P(1, 20))], "sub", "t", previous=first)
    assert second is not None and second.sequence > first.sequence
    # Above the previous batch's even when the clock says otherwise.
    ahead = replace(first, sequence=first.sequence + 10**12)
    third = plan_batch([state(0, P(1, 20), P(1, 30))], "sub", "t", previous=ahead)
    assert third is not None and third.sequence == ahead.sequence + 1
    # Plan records written before plans had one read as sequence 0.
    older = {key: value for key, value in first.to_dict().items() if key != "sequence"}
    assert IngestPlan.from_dict(older).sequence == 0


def test_plans_and_records_survive_their_json_form() -> None:
    plan = plan_batch([state(0, P(1, -1), P(1, 9)), state(1, P(2, 3), P(2, 9))], "sub", "db.t", max_messages=10)
    assert plan is not None
    assert IngestPlan.from_json(plan.to_json()) == plan
    record = PlanRecord(PLANNED, plan, BatchOutcome({plan.partitions[0].topic: 4}, {plan.partitions[0].topic: P(1, 3)}), attempt=3)
    assert PlanRecord.from_json(record.to_json()) == record
    auth = JobAuth("oauth2", (CREDENTIALS_FILE, TRUST_FILE), {"issuer_url": "https://auth.example.com", "audience": "urn:x"})
    spec = IngestJobSpec(plan, "plans", "pulsar://h:6650", "orc", "json", "a INT", 30.0, {"use_tls": True}, auth, min_tasks=3, attempt=2)
    assert IngestJobSpec.from_json(spec.to_json()) == spec
    # Specs written before they had a least task count, or an attempt, read as 1.
    older = {key: value for key, value in json.loads(spec.to_json()).items() if key not in ("min_tasks", "attempt")}
    assert IngestJobSpec.from_json(json.dumps(older)).min_tasks == 1
    assert IngestJobSpec.from_json(json.dumps(older)).attempt == 1
    with pytest.raises(ValueError, match="min_tasks must be a positive int, got 0"):
        replace(spec, min_tasks=0)
    with pytest.raises(ValueError, match="attempt must be a positive int, got 0"):
        replace(spec, attempt=0)
    with pytest.raises(ValueError, match="position is 'ledger:entry'"):
        Position.parse("12")
    with pytest.raises(ValueError, match="state must be one of"):
        PlanRecord("done", plan)


def test_a_plan_of_1024_partitions_reaches_the_job_on_its_command_line() -> None:
    # Linux refuses a command-line argument over 128 KiB; this spec's JSON is about 390 KB.
    topic = "persistent://public/default/ingest-scale-10000000"
    states = [PartitionState(f"{topic}-partition-{i}", topic, i, P(100 + i, -1), P(100 + i, 10_000 + i)) for i in range(1024)]
    plan = plan_batch(states, "sub", "db.t", min_partitions=2)
    assert plan is not None
    spec = IngestJobSpec(plan, "plans", "pulsar://h:6650", "parquet", "json", "a INT", 30.0)
    assert len(spec.to_json()) > 128 * 1024
    code = "import sys\nfrom airflow_pulsar.spark.job.spec import IngestJobSpec\nprint(IngestJobSpec.from_argument(sys.argv[1]).to_json())"
    result = subprocess.run([sys.executable, "-c", code, spec.to_argument()], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert IngestJobSpec.from_json(result.stdout) == spec
    # The job still takes the spec as plain JSON, as it took it before.
    assert IngestJobSpec.from_argument(spec.to_json()) == spec


def spans(*entries: int) -> list[ReadRange]:
    """One range per partition, the n-th spanning ``entries[n]`` entries of one ledger."""
    return [ReadRange(f"t-partition-{n}", n, P(1, -1), P(1, count - 1)) for n, count in enumerate(entries)]


def test_small_ranges_are_read_several_to_a_task_largest_first() -> None:
    ranges = spans(100, 10, 60, 40, 30, 20, 5, 5)
    groups = task_ranges(ranges, 3)
    assert sorted(i for group in groups for i in group) == list(range(8))  # every range once
    assert groups == [[0], [1, 3, 4, 7], [2, 5, 6]]  # plan order within a task, tasks by their first range
    assert [sum(entry_estimate(ranges[i]) for i in group) for group in groups] == [100, 85, 85]
    # No more tasks than ranges, and one range each when there are tasks enough.
    assert task_ranges(ranges[:2], 5) == [[0], [1]]
    assert task_ranges(ranges, 8) == [[i] for i in range(8)]
    with pytest.raises(ValueError, match="tasks must be >= 1, got 0"):
        task_ranges(ranges, 0)


def test_a_range_across_ledgers_is_estimated_by_its_last_ledger() -> None:
    assert entry_estimate(ReadRange("t", 0, P(1, 5), P(1, 9))) == 4
    assert entry_estimate(ReadRange("t", 0, P(1, 9), P(3, 6))) == 7
    assert entry_estimate(ReadRange("t", 0, P(1, 9), P(1, 9))) == 1  # a range holds at least one entry


def test_the_data_source_groups_ranges_down_to_its_tasks_never_below_the_specs_least() -> None:
    plan = plan_batch([state(n, P(1, -1), P(1, 9)) for n in range(6)], "sub", "t")
    assert plan is not None and len(plan.ranges) == 6
    spec = IngestJobSpec(plan, "plans", "pulsar://h:6650")
    schema = StructType([])

    def tasks(options: dict[str, str], least: int = 1) -> list[list[ReadRange]]:
        source = PulsarRangesDataSource({"spec": replace(spec, min_tasks=least).to_json(), **options})
        partitions = source.reader(schema).partitions()
        assert [p.index for p in partitions] == list(range(len(partitions)))
        return [p.ranges for p in partitions]

    assert tasks({}) == [[r] for r in plan.ranges]  # no option: a task per range
    assert tasks({"tasks": "4"}) == [[plan.ranges[0], plan.ranges[4]], [plan.ranges[1], plan.ranges[5]], [plan.ranges[2]], [plan.ranges[3]]]
    assert len(tasks({"tasks": "4"}, least=5)) == 5
    with pytest.raises(ValueError, match="'tasks' option is a positive integer, got '0'"):
        tasks({"tasks": "0"})


def test_plan_topic_and_row_schema() -> None:
    assert default_plan_topic("persistent://acme/orders/in", "etl") == "persistent://acme/orders/etl-ingest-plans"
    assert top_level_names("a INT, `b` STRUCT<x: INT, y: MAP<STRING, INT>>, c DECIMAL(10, 2)") == ["a", "b", "c"]
    assert row_ddl("bytes").startswith("key STRING, value BINARY, topic STRING, partition INT, message_id STRUCT<")
    assert "id BIGINT, _corrupt_record STRING, topic" in row_ddl("json", "id BIGINT")
    with pytest.raises(ValueError, match=r"\['partition', 'topic'\] clash"):
        row_ddl("json", "topic STRING, partition INT, x INT")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"format": "avro"}, "format must be one of"),
        ({"value_format": "xml"}, "value_format must be one of"),
        ({"value_format": "json"}, "needs value_schema"),
        ({"value_schema": "a INT"}, "only used with value_format 'json'"),
        ({"format": "csv"}, "csv format cannot hold binary values"),
        ({"max_messages": 0}, "max_messages must be a positive int"),
        ({"min_partitions": 0}, "min_partitions must be a positive int"),
        ({"initial_position": "first"}, "initial_position must be"),
        ({"value_format": "json", "value_schema": "id INT, Key STRING"}, r"\['key'\] clash"),
        ({"track_driver_via_k8s_api": True}, "the operator waits for spark-submit"),
        ({"table": "events; DROP TABLE x"}, "table must be"),
        ({"table": "/data/events"}, "table must be"),  # a location is a Delta table's only
        ({"topics": []}, "topics must be"),
        ({"table_catalog": {"type": "hadoop"}}, "table_catalog configures an Iceberg catalog; format is 'parquet'"),
    ],
)
def test_the_operator_rejects_bad_arguments(arguments: dict, message: str) -> None:
    from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator

    with pytest.raises(ValueError, match=message):
        PulsarToTableOperator(task_id="t", **{"topics": "t", "subscription": "s", "table": "events", **arguments})


def test_the_operator_checks_the_iceberg_catalog_before_connecting() -> None:
    from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator

    operator = PulsarToTableOperator(
        task_id="t", topics="t", subscription="s", table="events", format="iceberg", jars="iceberg.jar",
        table_catalog={"type": "hadoop"},
    )
    with pytest.raises(ValueError, match="needs a table named 'catalog.database.name'"):
        operator.execute(context={})


def test_a_delta_table_may_be_a_location() -> None:
    from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator

    operator = PulsarToTableOperator(task_id="t", topics="t", subscription="s", table="/data/events", format="delta")
    assert operator.table == "/data/events"


def test_delta_without_jars_gets_the_release_for_this_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import version

    from airflow.sdk.exceptions import AirflowNotFoundException

    from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
    from airflow_pulsar.spark.table_formats import RELEASES, spark_minor

    monkeypatch.delenv("AIRFLOW_CONN_PULSAR_DEFAULT", raising=False)
    operator = PulsarToTableOperator(task_id="t", topics="t", subscription="s", table="events", format="delta")
    release = RELEASES["delta"].get(spark_minor(version("pyspark")))
    # Past the argument checks, the run stops at the first thing it needs: the Pulsar connection;
    # on a Spark minor without a Delta release (the range tiers' newest pyspark), at the refusal.
    with pytest.raises(AirflowNotFoundException if release else ValueError, match="pulsar_default" if release else "no release"):
        operator.execute(context={})
    assert operator.packages == release


def test_iceberg_is_refused_on_a_spark_it_has_no_release_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
    from airflow_pulsar.spark import table_formats

    # The worker's pyspark as a Spark minor no Iceberg release supports.
    monkeypatch.setattr(table_formats, "version", lambda package: "4.3.0")
    operator = PulsarToTableOperator(task_id="t", topics="t", subscription="s", table="events", format="iceberg")
    with pytest.raises(ValueError, match=r"format 'iceberg' has no release for Spark 4\.3"):
        operator.execute(context={})


def test_the_spark_job_modules_never_import_airflow() -> None:
    # A fresh interpreter, as on an executor: the job and its data source need only the client.
    code = (
        "import importlib, pkgutil, sys\n"
        "import airflow_pulsar.spark.job as package\n"
        "for module in pkgutil.iter_modules(package.__path__):\n"
        "    importlib.import_module('airflow_pulsar.spark.job.' + module.name)\n"
        "leaked = sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.'))\n"
        "assert 'airflow_pulsar.spark.job.write' in sys.modules and not leaked, leaked\n"
        "assert not [m for m in sys.modules if m.startswith('airflow_pulsar.spark.planning')]\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_job_archive_holds_the_job_and_the_client_but_not_the_planning(tmp_path: Path) -> None:
    names = zipfile.ZipFile(build_job_archive(tmp_path)).namelist()
    assert "__main__.py" in names and "airflow_pulsar/spark/job/write.py" in names
    assert "airflow_pulsar/client/__init__.py" in names and "airflow_pulsar/spark/__init__.py" in names
    spark = [name for name in names if name.startswith("airflow_pulsar/spark/")]
    assert all(name.startswith("airflow_pulsar/spark/job/") for name in spark if name != "airflow_pulsar/spark/__init__.py")


def test_a_standalone_cluster_submit_runs_the_archive_with_python_runner(submitted: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_pulsar.spark.credentials import ShippedCredentials
    from airflow_pulsar.spark.job.credentials import CREDENTIALS_FILE, JobAuth
    from airflow_pulsar.spark.submit import JobSubmit

    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE_DB", "postgres://etl:db-secret@db/warehouse")  # the worker's, not the job's
    arguments = {"conn_id": "spark_test", "deploy_mode": "cluster", "env_vars": {"A": "1"}, "py_files": "/shared/extra.zip"}
    credentials = ShippedCredentials(JobAuth("token", (CREDENTIALS_FILE,)), {CREDENTIALS_FILE: b'{"token": "t0ken"}'})
    JobSubmit(arguments, '{"x":1}', credentials).run()

    command = submitted["command"]
    application = next(index for index, part in enumerate(command) if part.endswith("/airflow_pulsar_job.jar"))
    options = command[:application]
    assert options[options.index("--master") + 1] == "spark://master:7077"
    assert options[options.index("--deploy-mode") + 1] == "cluster"
    assert options[options.index("--class") + 1] == "org.apache.spark.deploy.PythonRunner"
    assert "--py-files" not in options and "spark.standalone.submit.waitAppCompletion=true" in options
    # After the application jar: PythonRunner's file and Python path, then the job's arguments.
    shipped = "airflow_pulsar_job.jar,/shared/extra.zip"
    assert command[application + 1 :] == ["airflow_pulsar_job.jar", shipped, "--spec", '{"x":1}', "--py-files", shipped]
    assert "__main__.py" in submitted["archive"]
    # The token travels in a file of mode 0600 shipped with --files, never on the command line.
    assert not [part for part in command if "t0ken" in part]
    files = options[options.index("--files") + 1].split(",")
    assert [Path(path).name for path in files] == [CREDENTIALS_FILE]
    assert submitted["files"][files[0]] == (0o600, b'{"token": "t0ken"}')
    # The standalone client hands the driver spark-submit's environment: what spark-submit and the
    # job need, not the Airflow worker's.
    env = submitted["popen"]["env"]
    assert env["A"] == "1" and env["PATH"] == os.environ["PATH"]
    assert "AIRFLOW_CONN_WAREHOUSE_DB" not in env and "t0ken" not in json.dumps(env)


def test_a_client_mode_submit_ships_the_archive_with_py_files(submitted: dict) -> None:
    from airflow_pulsar.spark.credentials import ShippedCredentials
    from airflow_pulsar.spark.submit import JobSubmit

    JobSubmit({"conn_id": "spark_test", "env_vars": {"A": "1"}}, '{"x":1}', ShippedCredentials()).run()

    command = submitted["command"]
    assert "--class" not in command and "--deploy-mode" not in command and not submitted["popen"]
    assert command[-3].endswith("airflow_pulsar/spark/job/__main__.py") and command[-2:] == ["--spec", '{"x":1}']
    assert command[command.index("--py-files") + 1].endswith("/airflow_pulsar_job.zip")
