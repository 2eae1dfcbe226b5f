"""How a batch lands in a Delta or an Iceberg table, once however often, and by however many
attempts at once, it is written.

Both are writes that the table format itself makes idempotent, so a batch written again after a
crash (the table holds it, the plan log does not say so) adds nothing, and that it checks when it
commits, so a job that went on after its task died (a zombie, paused before its commit) cannot
commit a batch that another attempt committed meanwhile:

- Delta: every write carries ``txnAppId`` (the subscription and table) and ``txnVersion`` (the
  batch's sequence number, the same for every attempt at it, growing from batch to batch); Delta
  commits the write only when the version is above the last one it recorded for that application
  id, as the table stands when the write's transaction commits: a transaction that read the
  version is refused if a commit setting it came first (``ConcurrentTransactionException``). The
  write replaces the batch's partition (``replaceWhere``), so that a batch planned again under a
  new sequence number (the plan log that held it lost) replaces what an earlier attempt wrote.
- Iceberg: every write puts the batch id and attempt in its snapshot's summary
  (``snapshot-property.airflow-pulsar.batch-id``, ``...attempt``); a batch whose id a snapshot of
  the table already carries, or whose partition holds rows (its snapshot expired), is not written
  again. Otherwise the rows are written as an overwrite of the batch's rows (of which there are
  none), validated at commit from the snapshot the check read, at the serializable isolation
  level: Iceberg refuses the commit if any snapshot since added rows of the batch.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .columns import BATCH_ID
from .spec import IngestJobSpec, is_table_path

log = logging.getLogger("airflow_pulsar.spark.job")

# The keys of the batch id and the attempt in an Iceberg snapshot's summary.
SNAPSHOT_BATCH_ID = "airflow-pulsar.batch-id"
SNAPSHOT_ATTEMPT = "airflow-pulsar.attempt"


def delta_app_id(subscription: str, table: str) -> str:
    """The Delta transaction application id of a subscription's writes to a table."""
    return f"airflow-pulsar/{subscription}/{table}"


def write_delta(rows: DataFrame, spec: IngestJobSpec, merge_schema: bool = False) -> None:
    """Write the batch's partition of a Delta table (a catalog table, or a location) as one transaction
    version; with ``merge_schema`` the commit also adds the rows' new columns to the table."""
    plan = spec.plan
    writer = (
        rows.write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", f"{BATCH_ID} = '{plan.batch_id}'")
        .partitionBy(BATCH_ID)
        .option("txnAppId", delta_app_id(plan.subscription, plan.table))
        .option("txnVersion", str(plan.sequence))
    )
    if merge_schema:
        writer = writer.option("mergeSchema", "true")
    if is_table_path(plan.table):
        writer.save(plan.table)
    else:
        writer.saveAsTable(plan.table)


def _qualified(table: str) -> str:
    return table if "." in table else f"default.{table}"


def iceberg_current_snapshot(spark: SparkSession, table: str) -> int | None:
    """The id of the Iceberg table's current snapshot (its ``main`` branch); None before its first write."""
    refs = spark.read.table(f"{_qualified(table)}.refs").where(F.col("name") == "main").select("snapshot_id").collect()
    return int(refs[0]["snapshot_id"]) if refs else None


def iceberg_holds_batch(spark: SparkSession, table: str, batch_id: str) -> bool:
    """Whether batch ``batch_id`` is in the Iceberg table: a snapshot of the table was written by
    it, or, where table maintenance has expired that snapshot since (a newer one, such as a
    compaction's, made it old), rows of the batch's partition are there."""
    qualified = _qualified(table)
    snapshots = spark.read.table(f"{qualified}.snapshots")
    if snapshots.where(F.col("summary")[SNAPSHOT_BATCH_ID] == batch_id).limit(1).count():
        return True
    return bool(spark.read.table(qualified).where(F.col(BATCH_ID) == batch_id).limit(1).count())


def write_iceberg(spark: SparkSession, rows: DataFrame, spec: IngestJobSpec) -> bool:
    """Write the batch to an Iceberg table unless the table holds it already, and only if no other
    attempt commits it first; whether this job committed it."""
    plan = spec.plan
    # Read before the check: whatever is committed after it, the commit validates against.
    base = iceberg_current_snapshot(spark, plan.table)
    if iceberg_holds_batch(spark, plan.table, plan.batch_id):
        log.info("batch %s is in %s already: not writing it again", plan.batch_id, plan.table)
        return False
    writer = (
        rows.writeTo(plan.table)
        .option(f"snapshot-property.{SNAPSHOT_BATCH_ID}", plan.batch_id)
        .option(f"snapshot-property.{SNAPSHOT_ATTEMPT}", str(spec.attempt))
        .option("isolation-level", "serializable")
    )
    if base is not None:
        # Without it Iceberg validates against the table's whole history, which is what a first write needs.
        writer = writer.option("validate-from-snapshot-id", str(base))
    writer.overwrite(F.col(BATCH_ID) == plan.batch_id)
    return True


def read_table(spark: SparkSession, spec: IngestJobSpec) -> DataFrame:
    """The table the job writes, by name or (Delta) by location."""
    table = spec.plan.table
    if spec.table_format == "delta" and is_table_path(table):
        return spark.read.format("delta").load(table)
    return spark.table(table)
