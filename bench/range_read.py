"""Reader-only cost of the Spark ingest: CPU microseconds per message of reading one range into
Arrow record batches, without Spark.

A non-partitioned topic on our broker gets ``--messages`` JSON messages (keyed, with a property,
batching on, as bench/spark_ingest.py writes them). Each read plans one range over the whole
topic and turns it into record batches of the JSON rows, in a fresh process, and reports the CPU
seconds of that process over the read (its client's reader thread included; the broker's not):

- ``entries``: the range reader of this checkout (``read_range_batches``: whole entries decoded
  straight into columns);
- ``messages``: the same rows built from Message objects (``batch_receive``, then
  ``RowBatchBuilder.add_messages``), as the range readers did before they took entries;
- ``checkout``: with ``--checkout DIR``, ``read_range_batches`` of another checkout of the project
  (an older commit, say), run by the same interpreter.

The variants alternate ``--repeat`` times; best and worst of each are printed, with the ratios of
the best. Usage::

    python bench/range_read.py [--messages N] [--repeat R] [--checkout DIR]

Writes bench/results/range_read.json. ``rows`` is the suite's entry (its ``reader`` section).
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

RESULTS = Path(__file__).parent / "results" / "range_read.json"
TOPIC = "bench-range-read"
CHECKOUT = Path(__file__).resolve().parents[1]


def read_once(service_url: str, variant: str) -> dict[str, Any]:
    """One read of the whole topic (in this process): rows, CPU and wall seconds of the read."""
    from pyspark.sql.types import DoubleType, IntegerType, LongType, MapType, StringType, StructField, StructType, TimestampType

    from airflow_pulsar.client import Client, ConsumerBatchReceivePolicy
    from airflow_pulsar.client.consumer import create_reader
    from airflow_pulsar.spark.job import source
    from airflow_pulsar.spark.job.columns import RowBatchBuilder
    from airflow_pulsar.spark.planning.hold import SubscriptionHold
    from airflow_pulsar.spark.planning.planner import plan_batch

    # The rows of the JSON values (row_ddl("json", "id BIGINT, name STRING, amount DOUBLE, at TIMESTAMP")), built without a JVM.
    message_id = StructType(
        [StructField("ledger_id", LongType()), StructField("entry_id", LongType()), StructField("batch_index", IntegerType())]
    )
    fields = [
        ("key", StringType()), ("id", LongType()), ("name", StringType()), ("amount", DoubleType()), ("at", TimestampType()),
        ("_corrupt_record", StringType()), ("topic", StringType()), ("partition", IntegerType()), ("message_id", message_id),
        ("publish_time", TimestampType()), ("event_time", TimestampType()), ("properties", MapType(StringType(), StringType())),
        ("redelivery_count", IntegerType()), ("batch_id", StringType()),
    ]
    schema = StructType([StructField(name, kind) for name, kind in fields])
    with Client(service_url) as client:
        with SubscriptionHold(client, [TOPIC], "bench") as hold:
            plan = plan_batch(hold.states(), "bench", "b", min_partitions=1)
        assert plan is not None and len(plan.ranges) == 1
        read_range = plan.ranges[0]
        builder = RowBatchBuilder(source.arrow_schema(schema), "json", TOPIC, read_range.partition, plan.batch_id)
        rows = 0
        cpu, wall = time.process_time(), time.perf_counter()
        if variant == "messages":
            reader = create_reader(
                client, read_range.topic, read_range.after.message_id(read_range.partition),
                receiver_queue_size=source.READER_QUEUE_SIZE, batch_receive_policy=ConsumerBatchReceivePolicy(10_000, 16 << 20, 100),
            )
            last = (read_range.last.ledger_id, read_range.last.entry_id)
            done = False
            while not done:  # the range is the whole topic: it ends with the last message of its last entry
                messages = reader.consumer.batch_receive()
                if messages:
                    reader.consumer.acknowledge_cumulative(messages[-1])
                    builder.add_messages(messages)
                    end = messages[-1].message_id()
                    done = (end.ledger_id(), end.entry_id()) == last and end.batch_index() >= end.batch_size() - 1
                    while len(builder) >= source.ROWS_PER_BATCH:
                        rows += builder.build(source.ROWS_PER_BATCH).num_rows
            rows += builder.build().num_rows
            reader.close()
        else:
            for batch in source.read_range_batches(client, read_range, builder, 30):
                rows += batch.num_rows
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"rows": rows, "cpu_seconds": cpu, "wall_seconds": wall}


def produce(service_url: str, messages: int) -> None:
    """The JSON rows of bench/spark_ingest.py, keyed, with a property."""
    from airflow_pulsar.client import Client

    with Client(service_url) as client:
        producer = client.create_producer(
            TOPIC, batching_enabled=True, batching_max_messages=1000, batching_max_publish_delay_ms=20, block_if_queue_full=True
        )
        for i in range(messages):
            value = {"id": i, "name": f"n{i}", "amount": i / 4, "at": "2024-05-01T12:00:00Z"}
            producer.send_async(json.dumps(value).encode(), None, partition_key=f"k{i}", properties={"seq": str(i)})
        producer.flush()


def run_variant(service_url: str, variant: str, checkout: Path) -> dict[str, Any]:
    """``read_once`` in a fresh interpreter that imports the project from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    mode = "messages" if variant == "messages" else "entries"
    done = subprocess.run([sys.executable, __file__, "--worker", service_url, mode], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"the {variant} read failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def measure(messages: int, repeat: int, checkout: Path | None = None) -> dict[str, Any]:
    """Every variant's CPU per message, ``repeat`` alternating reads each, on one broker; saved as JSON."""
    from airflow_pulsar.broker.process import BrokerProcess

    variants = {"entries": CHECKOUT, "messages": CHECKOUT}
    if checkout is not None:
        variants["checkout"] = checkout.resolve()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as workdir:
        broker = BrokerProcess(Path(workdir) / "broker", "--no-fsync").start()
        try:
            produce(broker.service_url, messages)
            for _ in range(repeat):  # alternating, so a change in the machine's load touches all alike
                for name, source in variants.items():
                    run = run_variant(broker.service_url, name, source)
                    assert run["rows"] == messages, f"{name} read {run['rows']} rows, expected {messages}"
                    runs[name].append(run)
        finally:
            broker.stop()
    result: dict[str, Any] = {"messages": messages, "repeat": repeat}
    for name, measured in runs.items():
        per_message = sorted(run["cpu_seconds"] / messages * 1e6 for run in measured)
        result[name] = {
            "cpu_us_per_message": [round(v, 2) for v in per_message],
            "wall_seconds": [round(run["wall_seconds"], 3) for run in measured],
        }
    best = {name: result[name]["cpu_us_per_message"][0] for name in runs}
    for name in runs:
        if name != "entries":
            result[f"{name}_over_entries"] = round(best[name] / best["entries"], 2)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return result


def rows(messages: int, repeat: int) -> list[dict[str, Any]]:
    """The suite's row: CPU per message of the range reader (ours) beside the Message-object path
    it replaced (the "official" column); lower is better."""
    result = measure(messages, repeat)
    return [
        {
            "figure": f"spark range reader, {messages} JSON messages, CPU us/message (official column: Message objects)",
            "official": result["messages"]["cpu_us_per_message"][0],
            "ours": result["entries"]["cpu_us_per_message"][0],
            "detail": result,
        }
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--checkout", type=Path, help="another checkout whose read_range_batches to run beside this one's")
    parser.add_argument("--worker", nargs=2, metavar=("SERVICE_URL", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(read_once(*args.worker)))
        return
    result = measure(args.messages, args.repeat, args.checkout)
    for name, measured in result.items():
        if isinstance(measured, dict):
            per_message = measured["cpu_us_per_message"]
            print(f"{name:>9}: {per_message[0]:6.2f} us CPU/message (best), {per_message[-1]:6.2f} (worst)")
        elif name.endswith("_over_entries"):
            print(f"{name.removesuffix('_over_entries')} / entries: {measured:.2f}x the CPU per message")


if __name__ == "__main__":
    main()
