"""How a batch lands in a Delta or an Iceberg table, once however often it is written.

Both are writes that the table format itself makes idempotent, so a batch written again after a
crash (the table holds it, the plan log does not say so) adds nothing:

- Delta: every write carries ``txnAppId`` (the subscription and table) and ``txnVersion`` (the
  batch's sequence number, growing from batch to batch); Delta commits the write only when the
  version is above the last one it recorded for that application id. The write replaces the
  batch's partition (``replaceWhere``), so that a batch planned again under a new sequence number
  (the plan log that held it lost) replaces what an earlier attempt wrote.
- Iceberg: every append puts the batch id in its snapshot's summary
  (``snapshot-property.airflow-pulsar.batch-id``); a batch whose id a snapshot of the table
  already carries, or whose partition holds rows (its snapshot expired), is not written again.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .columns import BATCH_ID
from .spec import IngestJobSpec, is_table_path

log = logging.getLogger("airflow_pulsar.spark.job")

# The key of the batch id in an Iceberg snapshot's summary.
SNAPSHOT_BATCH_ID = "airflow-pulsar.batch-id"


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


def iceberg_holds_batch(spark: SparkSession, table: str, batch_id: str) -> bool:
    """Whether batch ``batch_id`` is in the Iceberg table: a snapshot of the table was written by
    it, or, where table maintenance has expired that snapshot since (a newer one, such as a
    compaction's, made it old), rows of the batch's partition are there."""
    qualified = table if "." in table else f"default.{table}"
    snapshots = spark.read.table(f"{qualified}.snapshots")
    if snapshots.where(F.col("summary")[SNAPSHOT_BATCH_ID] == batch_id).limit(1).count():
        return True
    return bool(spark.read.table(qualified).where(F.col(BATCH_ID) == batch_id).limit(1).count())


def write_iceberg(spark: SparkSession, rows: DataFrame, spec: IngestJobSpec) -> None:
    """Append the batch to an Iceberg table unless the table holds it already."""
    plan = spec.plan
    if iceberg_holds_batch(spark, plan.table, plan.batch_id):
        log.info("batch %s is in %s already: not writing it again", plan.batch_id, plan.table)
        return
    rows.writeTo(plan.table).option(f"snapshot-property.{SNAPSHOT_BATCH_ID}", plan.batch_id).append()


def read_table(spark: SparkSession, spec: IngestJobSpec) -> DataFrame:
    """The table the job writes, by name or (Delta) by location."""
    table = spec.plan.table
    if spec.table_format == "delta" and is_table_path(table):
        return spark.read.format("delta").load(table)
    return spark.table(table)
