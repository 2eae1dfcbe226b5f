"""Spark ingest throughput: our Pulsar data source against Spark's in-memory source, a plain Python
consumer loop and (where one is registered) a JVM connector, then how it scales.

**Comparison.** A 4-partition topic gets ``--messages`` JSON messages (batching on); one Spark
session on ``local[2]`` (Hive catalog, parquet) writes the batch to a table through the
``pulsar_ranges`` data source, reading the broker with readers on the executors, and writes the
very same rows (read back from that table into Arrow files) to another table through a data
source that only hands those record batches to Spark. Both writes use the same ranges as Spark
partitions and the same dynamic-overwrite insert; after a first write each, they alternate
``--repeat`` times and the best time of each counts. (The JVM connector is measured beside ours
by bench/spark_connector.py, on Apache Pulsar.)

A second baseline is what users write by hand without Spark: one Python process with the
official client, a consumer of its own subscription from the earliest message, each value parsed
with ``json.loads`` into columns, a parquet file written with pyarrow every 10,000 rows and its
messages acknowledged after the write (best of ``--repeat`` runs, each on a fresh subscription).

**Scaling.** For each partition count in ``--scale-partitions`` a topic gets the first backlog
of ``--scale-backlogs``, is ingested once, then grows to the next backlog and is ingested again
(the plan always starts at the subscription's start, so each ingest reads the whole backlog).
Each case reports rows/s and the peak memory of Spark (the JVM, driver and executor in one on
``local[*]``, plus its Python workers, summed per sample from /proc: PSS, as forked workers share
pages; see ``process_tree``), so linear time shows as a flat rate and bounded memory as a flat
peak. Spark's fixed cost per job (planning, task launch, the Hive commit) weighs on small
backlogs only. Usage::

    python bench/spark_ingest.py [--messages N] [--repeat R] [--scale-partitions 1,16,64]
        [--scale-backlogs 100000,1000000] [--no-compare] [--no-scale]

Prints every rate and ratio, and writes bench/results/spark_ingest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pulsar
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from process_tree import PeakMemory, cpu_seconds
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.spark.job.columns import row_ddl
from airflow_pulsar.spark.job.plan import IngestPlan
from airflow_pulsar.spark.job.profiling import PROFILE_DIR_ENV
from airflow_pulsar.spark.job.source import PulsarRangesDataSource, arrow_schema
from airflow_pulsar.spark.job.spec import IngestJobSpec
from airflow_pulsar.spark.job.write import ensure_table, read_ranges, storable
from airflow_pulsar.spark.planning.hold import SubscriptionHold
from airflow_pulsar.spark.planning.planner import plan_batch

RESULTS = Path(__file__).parent / "results" / "spark_ingest.json"
TOPIC = "bench-ingest"
VALUE_SCHEMA = "id BIGINT, name STRING, amount DOUBLE, at TIMESTAMP"
PARTITIONS = 4
MASTER = "local[2]"
# Spark tasks per batch: at least one per core of MASTER (a 1-partition topic is cut in two).
MIN_SPARK_PARTITIONS = 2
MIB = 1024 * 1024


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


def produce(service_url: str, topic: str, messages: int, first: int = 0) -> None:
    """Messages ``first`` to ``first + messages - 1`` of the JSON rows, keyed, with a property."""
    with Client(service_url) as client:
        producer = client.create_producer(
            topic, batching_enabled=True, batching_max_messages=1000, batching_max_publish_delay_ms=20, block_if_queue_full=True
        )
        for i in range(first, first + messages):
            value = {"id": i, "name": f"n{i}", "amount": i / 4, "at": "2024-05-01T12:00:00Z"}
            producer.send_async(json.dumps(value).encode(), None, partition_key=f"k{i}", properties={"seq": str(i)})
        producer.flush()


def python_loop_seconds(broker: BrokerProcess, messages: int, subscription: str, directory: Path) -> tuple[float, float]:
    """The hand-written ingest (receive, parse, write parquet per 10,000 rows, acknowledge): its wall
    seconds, and the CPU seconds of this process and the broker."""
    directory.mkdir(parents=True)
    client = pulsar.Client(broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    assert broker.process is not None
    try:
        cpu = _own_cpu_seconds() + cpu_seconds(broker.process.pid)
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
        cpu = _own_cpu_seconds() + cpu_seconds(broker.process.pid) - cpu
        consumer.close()
    finally:
        client.close()
    assert ds.dataset(directory, format="parquet").count_rows() == messages
    return elapsed, cpu


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed_insert(frame: DataFrame, table: str, trees: Sequence[int]) -> tuple[float, float]:
    """One dynamic-overwrite insert of ``frame`` into ``table``: its wall seconds, and the CPU
    seconds the process trees under ``trees`` (Spark's JVM, the broker) spent meanwhile."""
    cpu = sum(cpu_seconds(pid) for pid in trees)
    started = time.perf_counter()
    frame.write.insertInto(table, overwrite=True)
    wall = time.perf_counter() - started
    return wall, sum(cpu_seconds(pid) for pid in trees) - cpu


def jvm_pid(spark: SparkSession) -> int:
    """The pid of the session's JVM (pyspark keeps the Popen it started the JVM with)."""
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    return int(gateway.proc.pid)


def spark_session(workdir: Path) -> SparkSession:
    """The session every measurement shares: MASTER, Hive catalog under ``workdir``, parquet."""
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Python workers with this environment's packages
    builder = (
        SparkSession.builder.master(MASTER)
        .enableHiveSupport()
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.warehouse.dir", str(workdir / "warehouse"))
        .config("spark.hadoop.javax.jdo.option.ConnectionURL", f"jdbc:derby:;databaseName={workdir / 'metastore_db'};create=true")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(PulsarRangesDataSource)
    spark.dataSource.register(ArrowFilesDataSource)
    return spark


def plan_topic(service_url: str, topic: str) -> IngestPlan:
    """A batch of everything in ``topic`` (from its earliest message: nothing is ever acknowledged)."""
    with Client(service_url) as client, SubscriptionHold(client, [topic], "bench") as hold:
        plan = plan_batch(hold.states(), "bench", "ours", min_partitions=MIN_SPARK_PARTITIONS)
    assert plan is not None
    return plan


def ours_frame(spark: SparkSession, service_url: str, topic: str) -> tuple[DataFrame, IngestPlan]:
    """The job's ``pulsar_ranges`` read of a batch of everything in ``topic``, ready to insert."""
    plan = plan_topic(service_url, topic)
    spec = IngestJobSpec(plan, f"{topic}-plans", service_url, value_format="json", value_schema=VALUE_SCHEMA)
    return storable(read_ranges(spark, spec), "parquet"), plan


def compare(spark: SparkSession, broker: BrokerProcess, messages: int, repeat: int, workdir: Path) -> dict[str, Any]:
    """Ours, the in-memory source and the Python loop on one 4-partition topic (best of ``repeat``)."""
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_partitioned_topic(TOPIC, PARTITIONS)
    produce(broker.service_url, TOPIC, messages)
    loop = [python_loop_seconds(broker, messages, f"loop-{run}", workdir / f"loop-{run}") for run in range(repeat)]
    assert broker.process is not None
    trees = [jvm_pid(spark), broker.process.pid]
    frame, plan = ours_frame(spark, broker.service_url, TOPIC)
    ensure_table(spark, "ours", frame, "parquet")
    ours = [timed_insert(frame, "ours", trees)]  # also starts the Python workers
    written = ds.dataset(workdir / "warehouse" / "ours", format="parquet", partitioning="hive").to_table()
    assert written.num_rows == messages, f"the ingest wrote {written.num_rows} rows, expected {messages}"
    files = _arrow_files(written, frame.schema, workdir)
    baseline_frame = spark.read.format("arrow_files").option("files", json.dumps(files)).load()
    ensure_table(spark, "baseline", baseline_frame, "parquet")
    baseline = [timed_insert(baseline_frame, "baseline", trees)]
    # Alternating, so a change in the machine's load touches all alike.
    for _ in range(repeat):
        ours.append(timed_insert(frame, "ours", trees))
        baseline.append(timed_insert(baseline_frame, "baseline", trees))
    ours_rate, baseline_rate, loop_rate = (messages / min(wall for wall, _ in runs) for runs in (ours, baseline, loop))
    # Rows per CPU second (Spark's JVM and workers, or the loop's process, and the broker): steadier
    # than wall time on a shared machine; the loop runs on one core, Spark on two.
    ours_cpu, baseline_cpu, loop_cpu = (messages / min(cpu for _, cpu in runs) for runs in (ours, baseline, loop))
    result = {
        "messages": messages,
        "topic_partitions": PARTITIONS,
        "spark_partitions": len(plan.ranges),
        "master": MASTER,
        "format": "parquet",
        "value_format": "json",
        "ours_seconds": [round(wall, 3) for wall, _ in ours],
        "baseline_seconds": [round(wall, 3) for wall, _ in baseline],
        "ours_rows_per_s": round(ours_rate),
        "baseline_rows_per_s": round(baseline_rate),
        "ratio": round(ours_rate / baseline_rate, 2),
        "python_loop_seconds": [round(wall, 3) for wall, _ in loop],
        "python_loop_rows_per_s": round(loop_rate),
        "ratio_to_python_loop": round(ours_rate / loop_rate, 2),
        "ours_cpu_seconds": [round(cpu, 2) for _, cpu in ours],
        "baseline_cpu_seconds": [round(cpu, 2) for _, cpu in baseline],
        "python_loop_cpu_seconds": [round(cpu, 2) for _, cpu in loop],
        "ours_rows_per_cpu_s": round(ours_cpu),
        "baseline_rows_per_cpu_s": round(baseline_cpu),
        "python_loop_rows_per_cpu_s": round(loop_cpu),
        "cpu_ratio": round(ours_cpu / baseline_cpu, 2),
        "cpu_ratio_to_python_loop": round(ours_cpu / loop_cpu, 2),
    }
    return result


def scaling(spark: SparkSession, broker: BrokerProcess, partition_counts: Sequence[int], backlogs: Sequence[int]) -> list[dict[str, Any]]:
    """One ingest per (partition count, backlog): rows/s and the peak memory (PSS) of the JVM and its Python workers."""
    assert broker.process is not None
    jvm = jvm_pid(spark)
    cases = []
    for partitions in partition_counts:
        topic = f"bench-scale-{partitions}"
        with PulsarAdmin(broker.web_url) as admin:
            admin.create_partitioned_topic(topic, partitions)
        produced = 0
        for backlog in sorted(backlogs):
            produce(broker.service_url, topic, backlog - produced, first=produced)
            produced = backlog
            frame, plan = ours_frame(spark, broker.service_url, topic)
            table = f"scale_{partitions}_{backlog}"
            ensure_table(spark, table, frame, "parquet")
            with PeakMemory(jvm) as memory:
                seconds, cpu = timed_insert(frame, table, [jvm, broker.process.pid])
            rows = spark.table(table).count()
            assert rows == backlog, f"the ingest of {topic} wrote {rows} rows, expected {backlog}"
            case = {
                "topic_partitions": partitions,
                "messages": backlog,
                "ranges": len(plan.ranges),
                "spark_tasks": frame.rdd.getNumPartitions(),
                "seconds": round(seconds, 3),
                "rows_per_s": round(backlog / seconds),
                "cpu_seconds": round(cpu, 2),
                "rows_per_cpu_s": round(backlog / cpu),
                "jvm_peak_mib": round(memory.root_mib),
                "python_workers_peak_mib": round(memory.children_mib),
                "python_workers_at_peak": memory.children_at_peak,
                "largest_python_worker_at_peak_mib": round(memory.largest_child_mib),
                "spark_peak_mib": round(memory.total_mib),
                "spark_peak_rss_sum_mib": round(memory.total_rss_mib),
            }
            print(
                f"  {partitions:>3} partitions ({case['spark_tasks']} tasks), {backlog:>10,} messages: {case['rows_per_s']:>8,} rows/s, "
                f"{case['rows_per_cpu_s']:>8,} rows/CPU s, "
                f"peak PSS JVM {case['jvm_peak_mib']:,} MiB + Python workers {case['python_workers_peak_mib']:,} MiB "
                f"({case['python_workers_at_peak']} processes, the largest {case['largest_python_worker_at_peak_mib']:,} MiB)",
                flush=True,
            )
            cases.append(case)
            spark.sql(f"DROP TABLE {table}")
    return cases


def measure(
    messages: int, repeat: int, workdir: Path, partition_counts: Sequence[int] = (), backlogs: Sequence[int] = (), compared: bool = True
) -> dict[str, Any]:
    """The comparison (unless not ``compared``) and the scaling cases, on one broker and one Spark session."""
    broker = BrokerProcess(workdir / "broker", "--no-fsync").start()
    try:
        spark = spark_session(workdir)
        try:
            result = compare(spark, broker, messages, repeat, workdir) if compared else {}
            if partition_counts and backlogs:
                result["scaling"] = scaling(spark, broker, partition_counts, backlogs)
        finally:
            spark.stop()
    finally:
        broker.stop()
    return result


def _arrow_files(rows: pa.Table, schema: StructType, workdir: Path) -> list[str]:
    """The written rows as one Arrow file per topic partition, in the data source's schema."""
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


def _counts(text: str) -> list[int]:
    return [int(float(part)) for part in text.split(",") if part.strip()]


def main() -> None:
    """Print rows/s of every write, the ratios and the scaling table; save them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale-partitions", type=_counts, default=[1, 16, 64], help="comma-separated topic partition counts")
    parser.add_argument("--scale-backlogs", type=_counts, default=[100_000, 1_000_000], help="comma-separated backlogs (1e6 works)")
    parser.add_argument("--no-compare", action="store_true", help="only the scaling cases")
    parser.add_argument("--no-scale", action="store_true", help="only the comparison")
    parser.add_argument("--profile-dir", help="profile every range read on the executors into this directory (cProfile)")
    args = parser.parse_args()
    partition_counts = [] if args.no_scale else args.scale_partitions
    if args.profile_dir:
        os.environ[PROFILE_DIR_ENV] = str(Path(args.profile_dir).resolve())  # inherited by the Python workers
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as workdir:
        result = measure(args.messages, args.repeat, Path(workdir), partition_counts, args.scale_backlogs, not args.no_compare)
    if "ratio" in result:
        print(
            f"spark ingest of {result['messages']:,} JSON messages into parquet: "
            f"pulsar_ranges {result['ours_rows_per_s']:,} rows/s, in-memory baseline {result['baseline_rows_per_s']:,} rows/s, "
            f"ratio {result['ratio']:.2f}; a Python consumer loop writing parquet {result['python_loop_rows_per_s']:,} rows/s, "
            f"ratio {result['ratio_to_python_loop']:.2f}"
        )
        print(
            f"  per CPU second: pulsar_ranges {result['ours_rows_per_cpu_s']:,} rows, in-memory {result['baseline_rows_per_cpu_s']:,}, "
            f"ratio {result['cpu_ratio']:.2f}; Python loop {result['python_loop_rows_per_cpu_s']:,}, "
            f"ratio {result['cpu_ratio_to_python_loop']:.2f}"
        )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
