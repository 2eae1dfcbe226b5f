"""Helpers of the Spark ingestion tests: producing JSON messages, and reading what a table holds.

The table's files are read with pyarrow, not Spark: a second Spark process would need the Derby
metastore the jobs use, and Derby admits one process at a time.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from pyspark.sql.types import BinaryType, IntegerType, LongType, MapType, StringType, StructField, StructType, TimestampType

from airflow_pulsar.client import Client

# The row schema of value_format "bytes", as the data source declares it (built without a JVM).
BYTES_ROWS = StructType(
    [
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField(
            "message_id",
            StructType(
                [StructField("ledger_id", LongType()), StructField("entry_id", LongType()), StructField("batch_index", IntegerType())]
            ),
        ),
        StructField("publish_time", TimestampType()),
        StructField("event_time", TimestampType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("redelivery_count", IntegerType()),
        StructField("batch_id", StringType()),
    ]
)
VALUE_SCHEMA = "id BIGINT, name STRING, amount DOUBLE, at TIMESTAMP"
# The guard against a hang of a module whose tests run several Spark jobs: each takes 20-40 s on a
# busy 2-core machine, and a crash-point test runs five, too close to the suite's 300 s.
SEVERAL_JOBS_TIMEOUT = pytest.mark.timeout(600)
# The driver's JVM options come from SPARK_SUBMIT_OPTS (tests/conftest.py).
LOCAL_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
}


def produce_json(service_url: str, topic: str, first: int, count: int, batch: int = 1000, **client_settings: Any) -> None:
    """Messages ``first .. first+count-1`` as JSON objects with batching, keys and a property
    (through a client with ``client_settings``: authentication, TLS)."""
    with Client(service_url, **client_settings) as client:
        producer = client.create_producer(
            topic, batching_enabled=True, batching_max_messages=batch, batching_max_publish_delay_ms=20, block_if_queue_full=True
        )
        for i in range(first, first + count):
            value = {"id": i, "name": f"n{i}", "amount": i / 4, "at": "2024-05-01T12:00:00Z"}
            producer.send_async(json.dumps(value).encode(), None, partition_key=f"k{i}", properties={"seq": str(i)})
        producer.flush()


@dataclass(frozen=True)
class Catalog:
    """A test's warehouse directory and Derby metastore directory."""

    warehouse: Path
    metastore: Path

    def operator_args(self) -> dict[str, str]:
        return {"warehouse_dir": str(self.warehouse), "metastore_dir": str(self.metastore)}

    def table_dir(self, table: str) -> Path:
        database, _, name = table.rpartition(".")
        return self.warehouse / name if database in ("", "default") else self.warehouse / f"{database}.db" / name

    def rows(self, table: str) -> pa.Table:
        """Every row of a parquet table, with its batch_id partition column."""
        return ds.dataset(self.table_dir(table), format="parquet", partitioning="hive").to_table()


def message_keys(rows: pa.Table) -> list[tuple[Any, ...]]:
    """(topic, partition, ledger, entry, batch index) of each row."""
    ids = rows.column("message_id").to_pylist()
    return [
        (t, p, i["ledger_id"], i["entry_id"], i["batch_index"])
        for t, p, i in zip(rows.column("topic").to_pylist(), rows.column("partition").to_pylist(), ids, strict=True)
    ]


def assert_exactly_once(rows: pa.Table, expected_ids: range) -> None:
    """Every produced message is in the table once: no message twice, none missing."""
    keys = Counter(message_keys(rows))
    doubled = [key for key, seen in keys.items() if seen > 1]
    assert not doubled, f"{len(doubled)} messages written more than once, e.g. {doubled[:3]}"
    ids = Counter(rows.column("id").to_pylist())
    assert sorted(ids) == list(expected_ids), f"ids differ: {len(ids)} distinct, expected {len(expected_ids)}"
    assert max(ids.values()) == 1


@dataclass(frozen=True)
class DagRuns:
    """Runs of a DAG (``dag.test()``) with one run conf."""

    dag: Any
    conf: dict[str, Any]

    def run(self) -> dict[str, Any]:
        """A successful run: its tasks' XComs by task id."""
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session

        run = self.dag.test(run_conf=self.conf)
        assert str(run.state) == "success", f"{self.dag.dag_id} run {run.run_id} ended {run.state}"
        with create_session() as session:
            rows = session.scalars(XComModel.get_many(run_id=run.run_id, key="return_value", dag_ids=self.dag.dag_id))
            return {row.task_id: XComModel.deserialize_value(row) for row in rows}
