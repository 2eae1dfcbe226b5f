"""Spark ingest throughput: our Pulsar data source against a plain in-memory Python data source.

A 4-partition topic gets 100 000 JSON messages (batching on); one Spark session on ``local[*]``
(the operator's default master; Hive catalog, parquet) then writes the batch to a table through
the ``pulsar_ranges`` data source, reading the broker with readers on the executors, and writes
the very same rows (read back from that table into Arrow files) to another table through a data
source that only hands those record batches to Spark. Both writes use the same ranges as Spark
partitions and the same dynamic-overwrite insert; after a first write each, they alternate
``--repeat`` times and the best time of each counts.

A second baseline is what users write by hand without Spark: one Python process with the
official client, a consumer of its own subscription from the earliest message, each value parsed
with ``json.loads`` into columns, a parquet file written with pyarrow every 10,000 rows and its
messages acknowledged after the write (best of ``--repeat`` runs, each on a fresh subscription).
Usage::

    python bench/spark_ingest.py [--messages N] [--repeat R]

Prints both rates and the ratio, and writes bench/results/spark_ingest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.standalone.process import BrokerProcess
from airflow_pulsar.spark.job.columns import row_ddl
from airflow_pulsar.spark.job.source import PulsarRangesDataSource
from airflow_pulsar.spark.job.spec import IngestJobSpec
from airflow_pulsar.spark.job.write import ensure_table, storable
from airflow_pulsar.spark.planning.hold import SubscriptionHold
from airflow_pulsar.spark.planning.planner import plan_batch

RESULTS = Path(__file__).parent / "results" / "spark_ingest.json"
TOPIC = "bench-ingest"
VALUE_SCHEMA = "id BIGINT, name STRING, amount DOUBLE, at TIMESTAMP"
PARTITIONS = 4


class ArrowFilesDataSource(DataSource):
    """The baseline: one Spark partition per Arrow IPC file, its record batches handed over as they are."""

    @classmethod
    def name(cls) -> str:
        return "arrow_files"

    def schema(self) -> str:
        return row_ddl("json", VALUE_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return ArrowFilesReader(json.loads(self.options["files"]))


class ArrowFilesReader(DataSourceReader):
    def __init__(self, files: list[str]) -> None:
        self.files = files

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(path) for path in self.files]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        with pa.memory_map(partition.value) as source:
            reader = pa.ipc.open_file(source)
            for index in range(reader.num_record_batches):
                yield reader.get_batch(index)


def produce(service_url: str, messages: int) -> None:
    with Client(service_url) as client:
        producer = client.create_producer(
            TOPIC, batching_enabled=True, batching_max_messages=1000, batching_max_publish_delay_ms=20, block_if_queue_full=True
        )
        for i in range(messages):
            value = {"id": i, "name": f"n{i}", "amount": i / 4, "at": "2024-05-01T12:00:00Z"}
            producer.send_async(json.dumps(value).encode(), None, partition_key=f"k{i}", properties={"seq": str(i)})
        producer.flush()


def python_loop_seconds(service_url: str, messages: int, subscription: str, directory: Path) -> float:
    """Seconds of the hand-written ingest: receive, parse, write parquet per 10,000 rows, acknowledge."""
    directory.mkdir(parents=True)
    client = pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        started = time.perf_counter()
        consumer = client.subscribe(TOPIC, subscription, initial_position=pulsar.InitialPosition.Earliest)
        received, part = 0, 0
        while received < messages:
            chunk = [consumer.receive() for _ in range(min(10_000, messages - received))]
            values = [json.loads(message.data()) for message in chunk]
            columns = {name: [value[name] for value in values] for name in ("id", "name", "amount", "at")}
            columns["topic"] = [message.topic_name() for message in chunk]
            columns["publish_time"] = [message.publish_timestamp() for message in chunk]
            columns["message_id"] = [str(message.message_id()) for message in chunk]
            pq.write_table(pa.table(columns), directory / f"part-{part}.parquet")
            for message in chunk:
                consumer.acknowledge(message)
            received, part = received + len(chunk), part + 1
        elapsed = time.perf_counter() - started
        consumer.close()
    finally:
        client.close()
    assert ds.dataset(directory, format="parquet").count_rows() == messages
    return elapsed


def timed_insert(frame: Any, table: str) -> float:
    """Seconds of one dynamic-overwrite insert of ``frame`` into ``table``."""
    started = time.perf_counter()
    frame.write.insertInto(table, overwrite=True)
    return time.perf_counter() - started


def measure(messages: int, repeat: int, workdir: Path) -> dict[str, Any]:
    broker = BrokerProcess(workdir / "broker", "--no-fsync").start()
    try:
        with PulsarAdmin(broker.web_url) as admin:
            admin.create_partitioned_topic(TOPIC, PARTITIONS)
        produce(broker.service_url, messages)
        loop = [python_loop_seconds(broker.service_url, messages, f"loop-{run}", workdir / f"loop-{run}") for run in range(repeat)]
        with Client(broker.service_url) as client, SubscriptionHold(client, [TOPIC], "bench") as hold:
            plan = plan_batch(hold.states(), "bench", "ours", min_partitions=PARTITIONS)
        assert plan is not None
        spec = IngestJobSpec(plan, f"{TOPIC}-plans", broker.service_url, value_format="json", value_schema=VALUE_SCHEMA)

        spark = (
            SparkSession.builder.master("local[*]")
            .enableHiveSupport()
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.warehouse.dir", str(workdir / "warehouse"))
            .config("spark.hadoop.javax.jdo.option.ConnectionURL", f"jdbc:derby:;databaseName={workdir / 'metastore_db'};create=true")
            .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("WARN")
        try:
            spark.dataSource.register(PulsarRangesDataSource)
            spark.dataSource.register(ArrowFilesDataSource)
            ours_frame = storable(spark.read.format("pulsar_ranges").option("spec", spec.to_json()).load(), "parquet")
            ensure_table(spark, "ours", ours_frame, "parquet")
            ours = [timed_insert(ours_frame, "ours")]  # also starts the Python workers
            written = ds.dataset(workdir / "warehouse" / "ours", format="parquet", partitioning="hive").to_table()
            assert written.num_rows == messages, f"the ingest wrote {written.num_rows} rows, expected {messages}"
            files = _arrow_files(written, ours_frame.schema, workdir)
            baseline_frame = spark.read.format("arrow_files").option("files", json.dumps(files)).load()
            ensure_table(spark, "baseline", baseline_frame, "parquet")
            baseline = [timed_insert(baseline_frame, "baseline")]
            # Alternating, so a change in the machine's load touches both alike.
            for _ in range(repeat):
                ours.append(timed_insert(ours_frame, "ours"))
                baseline.append(timed_insert(baseline_frame, "baseline"))
        finally:
            spark.stop()
    finally:
        broker.stop()
    ours_rate, baseline_rate, loop_rate = messages / min(ours), messages / min(baseline), messages / min(loop)
    return {
        "messages": messages,
        "topic_partitions": PARTITIONS,
        "spark_partitions": len(plan.ranges),
        "format": "parquet",
        "value_format": "json",
        "ours_seconds": [round(s, 3) for s in ours],
        "baseline_seconds": [round(s, 3) for s in baseline],
        "ours_rows_per_s": round(ours_rate),
        "baseline_rows_per_s": round(baseline_rate),
        "ratio": round(ours_rate / baseline_rate, 2),
        "python_loop_seconds": [round(s, 3) for s in loop],
        "python_loop_rows_per_s": round(loop_rate),
        "ratio_to_python_loop": round(ours_rate / loop_rate, 2),
    }


def _arrow_files(rows: pa.Table, schema: StructType, workdir: Path) -> list[str]:
    """The written rows as one Arrow file per topic partition, in the data source's schema."""
    from airflow_pulsar.spark.job.source import arrow_schema

    arrow = arrow_schema(schema)
    rows = rows.select(arrow.names).cast(arrow)
    files = []
    for index in range(PARTITIONS):
        part = rows.filter(pc.equal(rows.column("partition"), index))
        path = workdir / f"partition-{index}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, arrow) as writer:
            for batch in part.to_batches(max_chunksize=10_000):
                writer.write_batch(batch)
        files.append(str(path))
    return files


def main() -> None:
    """Print rows/s of both writes and the ratio ours/baseline; save them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Python workers with this environment's packages
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as workdir:
        result = measure(args.messages, args.repeat, Path(workdir))
    print(
        f"spark ingest of {result['messages']:,} JSON messages into parquet: "
        f"pulsar_ranges {result['ours_rows_per_s']:,} rows/s, in-memory baseline {result['baseline_rows_per_s']:,} rows/s, "
        f"ratio {result['ratio']:.2f}; a Python consumer loop writing parquet {result['python_loop_rows_per_s']:,} rows/s, "
        f"ratio {result['ratio_to_python_loop']:.2f}"
    )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
