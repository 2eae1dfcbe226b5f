"""Spark ingest against the JVM connector users pick instead: StreamNative's pulsar-spark, on Spark 4.1.

Apache Pulsar 4.2.4 standalone (journal fsync off) holds a 4-partition topic of 200,000 JSON
messages, produced as spark_ingest.py produces them. One Spark session on ``local[2]`` has the
connector's jars (``make connector-jar`` builds them: jvm/pulsar-spark-connector/pom.xml) and reads
the topic twice per round: through our ``pulsar_ranges`` data source (the ranges the operator would
plan, JSON parsed into columns on the executors), and through the connector's ``pulsar`` source
(earliest to latest; the values parsed with Spark's ``from_json`` into the same columns, which is
how its users read JSON from a topic without a schema). Each side writes the same 200,000 rows into
parquet (one directory per side, overwritten, partitioned by batch id); after a first write each,
they alternate ``--repeat`` times and the best time of each counts. Usage::

    python bench/spark_connector.py [--messages N] [--repeat R]

Prints both rates and the ratio ours/connector, and writes bench/results/spark_connector.json.
``rows`` is the suite's entry: it runs this script and returns the suite's row, or none when the
connector is not built.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import brokers
import pyarrow.dataset as ds
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from spark_ingest import PARTITIONS, TOPIC, VALUE_SCHEMA, produce

from airflow_pulsar.client import Client
from airflow_pulsar.spark.job.columns import BATCH_ID, CORRUPT_RECORD
from airflow_pulsar.spark.job.spec import IngestJobSpec
from airflow_pulsar.spark.job.write import read_ranges
from airflow_pulsar.spark.planning.hold import SubscriptionHold
from airflow_pulsar.spark.planning.planner import plan_batch

RESULTS = Path(__file__).parent / "results" / "spark_connector.json"
CONNECTOR_JARS = Path(__file__).resolve().parent.parent / ".jvm" / "pulsar-spark-connector.jars"
FULL_TOPIC = f"persistent://public/default/{TOPIC}"


def ours(spark: SparkSession, service_url: str) -> DataFrame:
    """Our ingest's rows: the batch the operator would plan on a fresh subscription."""
    with Client(service_url) as client, SubscriptionHold(client, [TOPIC], "bench") as hold:
        plan = plan_batch(hold.states(), "bench", "ours", min_partitions=PARTITIONS)
    assert plan is not None
    spec = IngestJobSpec(plan, f"{TOPIC}-plans", service_url, value_format="json", value_schema=VALUE_SCHEMA)
    return read_ranges(spark, spec)


def connector(spark: SparkSession, broker: brokers.Broker) -> DataFrame:
    """The connector's rows with our columns: the JSON fields, the message's metadata and a batch id
    (its message id stays its own serialized form)."""
    raw = (
        spark.read.format("pulsar")
        .option("service.url", broker.service_url)
        .option("admin.url", broker.web_url)
        .option("topics", FULL_TOPIC)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    value: Column = F.from_json(
        F.col("value").cast("string"),
        f"{VALUE_SCHEMA}, {CORRUPT_RECORD} STRING",
        {"columnNameOfCorruptRecord": CORRUPT_RECORD},
    )
    return raw.select(
        F.col("__key").cast("string").alias("key"),
        value.alias("value"),
        F.col("__topic").alias("topic"),
        F.regexp_extract("__topic", r"-partition-(\d+)$", 1).cast("int").alias("partition"),
        F.col("__messageId").alias("message_id"),
        F.col("__publishTime").alias("publish_time"),
        F.col("__eventTime").alias("event_time"),
        F.col("__messageProperties").alias("properties"),
        F.lit("connector").alias(BATCH_ID),
    ).select("key", "value.*", "topic", "partition", "message_id", "publish_time", "event_time", "properties", BATCH_ID)


def timed_write(frame: DataFrame, directory: Path) -> float:
    """Seconds of one overwrite of ``directory`` with ``frame`` as parquet."""
    started = time.perf_counter()
    frame.write.mode("overwrite").partitionBy(BATCH_ID).parquet(str(directory))
    return time.perf_counter() - started


def measure(messages: int, repeat: int, jars: str) -> dict[str, Any]:
    """Both sides' write times and rates on one broker and one session."""
    with tempfile.TemporaryDirectory(prefix="bench-connector-") as directory, brokers.running("pulsar", fsync=False) as broker:
        workdir = Path(directory)
        broker.admin("PUT", f"/admin/v2/persistent/public/default/{TOPIC}/partitions", json=PARTITIONS).raise_for_status()
        produce(broker.service_url, TOPIC, messages)
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.jars", jars)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.warehouse.dir", str(workdir / "warehouse"))
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("WARN")
        try:
            frames = {"ours": ours(spark, broker.service_url), "connector": connector(spark, broker)}
            seconds: dict[str, list[float]] = {side: [] for side in frames}
            # A first write each (it also starts the Python workers and loads the connector's classes),
            # then alternating, so a change in the machine's load touches both alike.
            for _ in range(repeat + 1):
                for side, frame in frames.items():
                    seconds[side].append(timed_write(frame, workdir / side))
                    written = ds.dataset(workdir / side, format="parquet", partitioning="hive").count_rows()
                    assert written == messages, f"{side} wrote {written} rows, expected {messages}"
        finally:
            spark.stop()
        partitions = broker.admin("GET", f"/admin/v2/persistent/public/default/{TOPIC}/partitioned-stats").json()
    best = {side: min(times[1:]) for side, times in seconds.items()}
    return {
        "messages": messages,
        "topic_partitions": PARTITIONS,
        "broker": "Apache Pulsar",
        "master": "local[2]",
        "format": "parquet",
        "value_format": "json",
        "ours_seconds": [round(s, 3) for s in seconds["ours"]],
        "connector_seconds": [round(s, 3) for s in seconds["connector"]],
        "ours_rows_per_s": round(messages / best["ours"]),
        "connector_rows_per_s": round(messages / best["connector"]),
        "ratio": round(best["connector"] / best["ours"], 2),
        # Ours is "bench", which the operator would acknowledge after the table commit.
        "subscriptions_left": sorted(partitions["subscriptions"]),
    }


def rows(messages: int, repeat: int) -> list[dict[str, Any]]:
    """The suite's row (its "official" column is the connector), or none when the connector is not built.

    The script runs as its own process, as spark_ingest.py does: Spark's Python workers then get
    our data source class by value, and the suite never starts a JVM.
    """
    if not CONNECTOR_JARS.exists():
        print(f"  skipped: the pulsar-spark connector is not built ({CONNECTOR_JARS} is missing): run `make connector-jar`")
        return []
    command = [sys.executable, __file__, "--messages", str(messages), "--repeat", str(repeat)]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{Path(__file__).name} failed:\n{run.stderr[-3000:]}")
    result = json.loads(RESULTS.read_text())
    return [{"figure": f"spark ingest {messages} JSON messages on Apache Pulsar, rows/s (official column: pulsar-spark connector)",
             "official": result["connector_rows_per_s"], "ours": result["ours_rows_per_s"], "detail": result}]


def main() -> None:
    """Print rows/s of both writes and the ratio ours/connector; save them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not CONNECTOR_JARS.exists():
        sys.exit(f"{CONNECTOR_JARS} is missing: run `make connector-jar`")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Python workers with this environment's packages
    result = measure(args.messages, args.repeat, CONNECTOR_JARS.read_text().strip())
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"spark ingest of {result['messages']:,} JSON messages on Apache Pulsar into parquet: "
        f"pulsar_ranges {result['ours_rows_per_s']:,} rows/s, pulsar-spark connector {result['connector_rows_per_s']:,} rows/s, "
        f"ratio {result['ratio']:.2f}; subscriptions left on the topic: {result['subscriptions_left']}"
    )


if __name__ == "__main__":
    main()
