"""The Spark job that writes one ingest batch to a table (run by :mod:`airflow_pulsar.spark.job.__main__`).

The driver reads the batch's ranges through the ``pulsar_ranges`` data source and writes the rows
to the table (created if missing, partitioned by ``batch_id``) in a commit that lands once: a
batch the table holds already is not written again, and a commit is refused when another attempt
committed the batch since this one looked, so that a job that went on after its task died cannot
change the batch (Delta and Iceberg: :mod:`.lakehouse`; parquet, orc, json and csv:
:mod:`.file_tables`). It then counts what the table holds for the batch, per topic partition, and
appends a ``committed`` record of its attempt with those counts and the ends reached to the plan
log, which is how the operator learns the outcome wherever the driver ran.

The session is Hive-enabled: the warehouse directory and the metastore (Derby for a local
metastore, or a metastore service) come from the Spark configuration the job is submitted with.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .columns import BATCH_ID
from .evolution import follow_rows
from .faults import fault_environment, inject
from .file_tables import write_files
from .lakehouse import read_table, write_delta, write_iceberg
from .plan import BatchOutcome, Position
from .records import COMMITTED, PlanRecord, publish_record
from .source import PulsarRangesDataSource
from .spec import IngestJobSpec, is_table_path

log = logging.getLogger("airflow_pulsar.spark.job")

# The column the job's csv and json readers would put a line they cannot parse in: none of the table's.
UNPARSED_LINE = "_airflow_pulsar_unparsed_line"


def main(argv: list[str] | None = None) -> int:
    """Run the job described by ``--spec``; the exit status is 0 once the batch is committed."""
    parser = argparse.ArgumentParser(prog="airflow-pulsar-ingest", description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help="the IngestJobSpec, as JSON or compressed (IngestJobSpec.to_argument)")
    parser.add_argument(
        "--py-files",
        default="",
        help="comma-separated files the driver adds to the executors' Python path, where spark-submit did not ship them",
    )
    parser.add_argument(
        "--files-dir",
        default=None,
        help="where the files shipped with the job were written, for a driver there that Spark gives no copies (YARN client mode)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stdout)
    spec = IngestJobSpec.from_argument(args.spec)
    inject("before-write")
    files_dirs = [args.files_dir] if args.files_dir else []
    hive_local_dir = tempfile.TemporaryDirectory(prefix="pulsar-ingest-hive-")
    with hive_local_dir as hive_local, tempfile.TemporaryDirectory(prefix="pulsar-ingest-") as kept:
        spark = session(spec, hive_local)
        for path in filter(None, args.py_files.split(",")):
            spark.sparkContext.addPyFile(os.path.abspath(path))
        try:
            outcome = write_batch(spark, spec)
            inject("after-write")
            # The session's copies of the shipped files go when it stops, and the report comes after.
            spec.auth.keep_files(kept, files_dirs)
        finally:
            spark.stop()
        with spec.client([kept]) as client:
            publish_record(client, spec.plan_topic, PlanRecord(COMMITTED, spec.plan, outcome, spec.attempt))
    log.info(
        "batch %s attempt %d committed: %d rows; reported to %s", spec.plan.batch_id, spec.attempt, outcome.total_rows, spec.plan_topic
    )
    return 0


def session(spec: IngestJobSpec, hive_local: str) -> SparkSession:
    """The Hive-enabled session.

    Hive's session makes a directory for downloaded resources in the JVM's temp directory, named
    by the session's id, and Spark never closes the session, which would delete it: every run
    would leave an empty directory in the driver's /tmp. The job adds no resources, so the
    directory goes in ``hive_local``, which the job removes.
    """
    builder = (
        SparkSession.builder.enableHiveSupport()
        .config("spark.hadoop.hive.downloaded.resources.dir", os.path.join(hive_local, "resources"))
        # Spark's csv and json readers take a column named as this setting (by default the rows'
        # ``_corrupt_record``) for one to fill themselves, so a csv table read back its files askew.
        .config("spark.sql.columnNameOfCorruptRecord", UNPARSED_LINE)
    )
    for name, value in fault_environment().items():
        builder = builder.config(f"spark.executorEnv.{name}", value)
    spark = builder.getOrCreate()
    # Spark's INFO lines would bury the job's own progress in the task log.
    spark.sparkContext.setLogLevel("WARN")
    return spark


def write_batch(spark: SparkSession, spec: IngestJobSpec) -> BatchOutcome:
    """Write the batch to the table and return what the table holds for it."""
    plan = spec.plan
    rows = storable(read_ranges(spark, spec), spec.table_format)
    if not is_table_path(plan.table):
        ensure_table(spark, plan.table, rows, spec.table_format)
    rows, merge_schema = follow_rows(spark, spec, rows)
    log.info(
        "writing batch %s attempt %d: %d ranges of %d partitions into %s",
        plan.batch_id, spec.attempt, len(plan.ranges), len(plan.partitions), plan.table,
    )  # fmt: skip
    if spec.table_format == "delta":
        write_delta(rows, spec, merge_schema)
        # Delta skips the write if it recorded this plan's version (its ends are the planned ones),
        # or a later batch's, which only a job given up meets, whose report is passed over.
        committed_here = True
    elif spec.table_format == "iceberg":
        committed_here = write_iceberg(spark, rows, spec)
    else:
        committed_here = write_files(spark, rows, spec)
    return stored_outcome(spark, spec, planned_ends=committed_here)


def read_ranges(spark: SparkSession, spec: IngestJobSpec) -> DataFrame:
    """The rows of the batch's ranges (the ``pulsar_ranges`` data source), read by at most twice
    as many Spark tasks as the session's default parallelism: more would only add each task's
    fixed cost, and small ranges are then read several to a task."""
    spark.dataSource.register(PulsarRangesDataSource)
    tasks = 2 * spark.sparkContext.defaultParallelism
    log.info("reading %d ranges with at most %d Spark tasks (at least %d)", len(spec.plan.ranges), tasks, spec.min_tasks)
    return spark.read.format(PulsarRangesDataSource.name()).option("spec", spec.to_json()).option("tasks", str(tasks)).load()


def storable(rows: DataFrame, table_format: str) -> DataFrame:
    """The rows as the format can hold them: csv has no struct or map columns, so the message id
    becomes three columns and the properties a JSON object."""
    if table_format != "csv":
        return rows
    columns = []
    for name in rows.columns:
        if name == "message_id":
            columns += [F.col(f"message_id.{part}").alias(f"message_{part}") for part in ("ledger_id", "entry_id", "batch_index")]
        elif name == "properties":
            columns.append(F.to_json("properties").alias("properties"))
        else:
            columns.append(F.col(name))
    return rows.select(columns)


def ensure_table(spark: SparkSession, table: str, rows: DataFrame, table_format: str) -> None:
    """Create the table (and its database) if missing, partitioned by batch id."""
    database, _, _ = table.rpartition(".")
    if database:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    if spark.catalog.tableExists(table):
        return
    log.info("creating table %s (%s, partitioned by %s)", table, table_format, BATCH_ID)
    ddl = rows.schema.toDDL()
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table} ({ddl}) USING {table_format} PARTITIONED BY ({BATCH_ID})")


def stored_outcome(spark: SparkSession, spec: IngestJobSpec, planned_ends: bool = True) -> BatchOutcome:
    """Rows per partition topic as the table holds them for the batch, and where each ended.

    A partition this job read to its planned last entry ends there (``planned_ends``); one stopped
    by its budget, or in a batch the table held already (written by an attempt whose plan may have
    ended elsewhere: the plan log that held it lost), ends at the newest entry in the table.
    """
    plan = spec.plan
    flat = spec.table_format == "csv"
    ledger = F.col("message_ledger_id" if flat else "message_id.ledger_id")
    entry = F.col("message_entry_id" if flat else "message_id.entry_id")
    counted = (
        read_table(spark, spec)
        .where(F.col(BATCH_ID) == plan.batch_id)
        .groupBy("topic", "partition")
        .agg(F.count(F.lit(1)).alias("rows"), F.max(F.struct(ledger.alias("l"), entry.alias("e"))).alias("end"))
        .collect()
    )
    found = {(row["topic"], row["partition"]): row for row in counted}
    rows: dict[str, int] = {}
    ends: dict[str, Position] = {}
    for part in plan.partitions:
        row = found.get((part.source_topic, part.partition))
        rows[part.topic] = int(row["rows"]) if row else 0
        if planned_ends and not part.budgeted:
            ends[part.topic] = part.last
        elif row is not None:
            ends[part.topic] = Position(int(row["end"]["l"]), int(row["end"]["e"]))
        else:
            ends[part.topic] = part.mark_delete
        log.info("partition %s: %d rows, through %s", part.topic, rows[part.topic], ends[part.topic])
    return BatchOutcome(rows, ends)
