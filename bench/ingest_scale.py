"""Ingestion at scale: what planning costs against the partition count, and what an ingest costs
against the backlog on real clusters.

**Planning.** For topics of 1, 64 and 1,024 partitions with a backlog on every partition, on our
broker and on Apache Pulsar standalone, planning as the operator does it: the hold on the
subscription (a consumer per partition), the states read through it and ``plan_batch`` (with
the ledger layout from the admin API where a backlog spans ledgers). Beside the time, the sizes
of what a batch leaves behind: the plan's JSON, the plan log's ``planned`` and ``committed``
records and the XCom the operator returns. All of them grow with the partition count, never
with the backlog.

**Ingest.** ``--messages`` JSON messages (batched producers, two processes) over
``--partitions`` partitions on the 2-broker Apache Pulsar cluster (``jvm/pulsar_cluster.py``),
ingested into parquet by ``PulsarToTableOperator`` in a task process of its own, which submits
the real job to the 2-worker Spark standalone cluster (``jvm/spark_cluster.py``) in client deploy
mode. Reported: rows/s over the whole task (planning, the job, the acknowledgements), the peak
RSS and PSS of each process from /proc (the task, the Spark driver's JVM and Python, each
worker's and executor's JVM, the executors' Python workers, each broker, bookie and ZooKeeper),
summed by role, and the sizes of the plan log records and of the XCom. Each backlog of
``--messages`` runs on a topic of its own, so comparing two shows what grows with the backlog.
Usage::

    python bench/ingest_scale.py [--messages 1000000,10000000] [--partitions 64]
        [--plan-partitions 1,64,1024] [--no-planning] [--no-ingest]

Prints every figure and writes bench/results/ingest_scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
from brokers import KINDS, LABELS
from brokers import start as start_broker
from process_tree import ProcessPeaks
from spark_ingest import VALUE_SCHEMA, produce

from airflow_pulsar.client import Client, MessageId
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.spark.job.plan import BatchOutcome, IngestPlan
from airflow_pulsar.spark.job.records import COMMITTED, PLANNED, PlanRecord
from airflow_pulsar.spark.job.spec import IngestJobSpec
from airflow_pulsar.spark.planning.hold import SubscriptionHold
from airflow_pulsar.spark.planning.plan_log import default_plan_topic
from airflow_pulsar.spark.planning.planner import ledger_layout, plan_batch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout root, for its jvm package
from jvm.pulsar_cluster import PulsarCluster  # noqa: E402
from jvm.spark_cluster import CLUSTER_SPARK, StandaloneCluster  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "ingest_scale.json"
SUBSCRIPTION = "scale"
TABLE = "ingest_scale"
# One Spark task per worker core at least (the cluster's two workers have a core each).
MIN_PARTITIONS = 2
# Messages each partition holds when planning is measured: a backlog everywhere, one entry each.
PLANNED_PER_PARTITION = 2
PRODUCERS = 2
# The brokers' ZooKeeper session: the longest ZooKeeper grants (20 ticks). A broker whose session
# expires shuts down, and on a loaded machine the cluster's 6 s (short, for the failover tests)
# ran out in a 1e7 ingest: both brokers went.
LONGEST_SESSION_MS = 20_000
PYTHON_ROLES = ("airflow task", "spark driver Python", "spark executor Python")


def batch_sizes(plan: IngestPlan, outcome: BatchOutcome) -> dict[str, int]:
    """Bytes of what one batch leaves behind: the plan's JSON, the job's command-line argument,
    its plan log records, the XCom."""
    from airflow_pulsar.operators.pulsar_to_table import batch_summary

    spec = IngestJobSpec(plan, f"{SUBSCRIPTION}-ingest-plans", "pulsar://127.0.0.1:6650", "parquet", "json", VALUE_SCHEMA, 120.0)
    return {
        "plan_json_bytes": len(plan.to_json()),
        "job_argument_bytes": len(spec.to_argument()),
        "planned_record_bytes": len(PlanRecord(PLANNED, plan, attempt=1).to_json()),
        "committed_record_bytes": len(PlanRecord(COMMITTED, plan, outcome, 1).to_json()),
        "xcom_bytes": len(json.dumps({**batch_summary(plan, outcome), "skipped": False, "settled": None})),
    }


def fill_every_partition(client: Client, topic: str, partitions: int) -> None:
    """``PLANNED_PER_PARTITION`` messages on every partition (unbatched, round robin: one entry each)."""
    producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
    for index in range(PLANNED_PER_PARTITION * partitions):
        producer.send_async(b'{"id": %d}' % index, None)
    producer.flush()
    producer.close()


def planning_case(client: Client, admin: PulsarAdmin, partitions: int) -> dict[str, Any]:
    """Plan a batch of a fresh topic of ``partitions`` partitions as the operator does; time and sizes."""
    topic = f"persistent://public/default/plan-scale-{partitions}"
    admin.create_partitioned_topic(topic, partitions)
    fill_every_partition(client, topic, partitions)
    started = time.perf_counter()
    with SubscriptionHold(client, [topic], SUBSCRIPTION) as hold:
        held = time.perf_counter()
        plan = plan_batch(hold.states(), SUBSCRIPTION, TABLE, min_partitions=MIN_PARTITIONS, ledgers_of=lambda t: ledger_layout(admin, t))
        planned = time.perf_counter()
    assert plan is not None and len(plan.partitions) == partitions, f"{topic}: a plan of every partition expected"
    rows = {part.topic: PLANNED_PER_PARTITION for part in plan.partitions}
    outcome = BatchOutcome(rows, {part.topic: part.last for part in plan.partitions})
    return {
        "topic_partitions": partitions,
        "ranges": len(plan.ranges),
        "hold_seconds": round(held - started, 3),
        "plan_seconds": round(planned - held, 3),
        **batch_sizes(plan, outcome),
    }


def planning(kind: str, partition_counts: Sequence[int]) -> list[dict[str, Any]]:
    """The planning cases on a broker of ``kind`` (started and stopped here)."""
    with tempfile.TemporaryDirectory(prefix=f"bench-plan-{kind}-") as data_dir:
        broker = start_broker(kind, Path(data_dir), fsync=False)
        try:
            with Client(broker.service_url, operation_timeout_seconds=120) as client, PulsarAdmin(broker.web_url) as admin:
                cases = []
                for partitions in partition_counts:
                    case = {"broker": kind, **planning_case(client, admin, partitions)}
                    print(
                        f"  planning on {LABELS[kind]}, {partitions:>5,} partitions: hold {case['hold_seconds']:.2f} s, "
                        f"states and plan {case['plan_seconds']:.2f} s; plan {case['plan_json_bytes']:,} B, "
                        f"job argument {case['job_argument_bytes']:,} B, planned record {case['planned_record_bytes']:,} B, "
                        f"committed record {case['committed_record_bytes']:,} B, "
                        f"XCom {case['xcom_bytes']:,} B",
                        flush=True,
                    )
                    cases.append(case)
        finally:
            broker.stop()
    return cases


def produce_in_parallel(service_url: str, topic: str, messages: int) -> float:
    """``messages`` JSON messages from ``PRODUCERS`` processes (ids split between them); the seconds it took."""
    shares = [(messages * index // PRODUCERS, messages * (index + 1) // PRODUCERS) for index in range(PRODUCERS)]
    started = time.perf_counter()
    with ProcessPoolExecutor(PRODUCERS) as pool:
        for done in [pool.submit(produce, service_url, topic, end - first, first) for first, end in shares]:
            done.result()
    return time.perf_counter() - started


def role(tree: str, command: list[str], is_root: bool) -> str:
    """What a sampled process is, from the tree it was found in and its command line."""
    line = " ".join(command)
    for main_class, name in (
        ("org.apache.spark.deploy.SparkSubmit", "spark driver JVM"),
        ("CoarseGrainedExecutorBackend", "spark executor JVM"),
        ("org.apache.spark.deploy.worker.Worker", "spark worker JVM"),
    ):
        if main_class in line:
            return name
    if tree.startswith(("broker", "bookie", "zookeeper")):
        return tree.rstrip("-0123456789") if is_root else "other"
    python = bool(command) and "python" in Path(command[0]).name
    if python and "pyspark.daemon" in line:
        return "spark executor Python"
    if tree == "task" and python:
        return "airflow task" if is_root else "spark driver Python"
    return "other"


def memory_by_role(peaks: ProcessPeaks) -> dict[str, dict[str, Any]]:
    """Per role: how many processes, the largest peak RSS and PSS of one, and the sum of their PSS peaks."""
    roles: dict[str, dict[str, Any]] = {}
    for pid, (tree, command, rss, pss) in peaks.peaks.items():
        name = role(tree, command, pid in peaks.roots)
        entry = roles.setdefault(name, {"processes": 0, "max_rss_mib": 0.0, "max_pss_mib": 0.0, "pss_sum_mib": 0.0})
        entry["processes"] += 1
        entry["max_rss_mib"] = round(max(entry["max_rss_mib"], rss), 1)
        entry["max_pss_mib"] = round(max(entry["max_pss_mib"], pss), 1)
        entry["pss_sum_mib"] = round(entry["pss_sum_mib"] + pss, 1)
    return dict(sorted(roles.items()))


def plan_log_sizes(service_url: str, topic: str) -> dict[str, int]:
    """Bytes of the batch's records and XCom, from the plan log's newest record (``acked``: the
    plan and the outcome; the log may have trimmed the records before it, which it acknowledged)."""
    newest: bytes | None = None
    with Client(service_url) as client:
        reader = client.create_reader(default_plan_topic(topic, SUBSCRIPTION), MessageId.latest, start_message_id_inclusive=True)
        if reader.has_message_available():
            newest = reader.read_next(10_000).data()
        reader.close()
    assert newest is not None, f"no record in the plan log of {topic}"
    record = PlanRecord.from_json(newest)
    assert record.outcome is not None, f"the plan log's newest record is {record.state!r}, not the batch's end"
    return {**batch_sizes(record.plan, record.outcome), f"{record.state}_record_bytes": len(newest)}


def ingest_case(pulsar: PulsarCluster, spark: StandaloneCluster, messages: int, partitions: int, workdir: Path) -> dict[str, Any]:
    """Produce ``messages`` to a fresh topic and ingest them with the operator on the Spark cluster."""
    topic = f"persistent://public/default/ingest-scale-{messages}"
    with PulsarAdmin(pulsar.web_url) as admin:
        admin.create_partitioned_topic(topic, partitions)
    roots = {pid: f"spark-worker-{index}" for index, pid in enumerate(spark.worker_pids)}
    for part in (*pulsar.brokers, *pulsar.bookies, pulsar.zookeeper):
        assert part.jvm is not None and part.jvm.popen is not None
        roots[part.jvm.popen.pid] = getattr(part, "name", "zookeeper")
    case_dir = workdir / f"ingest-{messages}"
    case_dir.mkdir()
    request = {
        "topics": topic,
        "subscription": SUBSCRIPTION,
        "table": f"{TABLE}_{messages}",
        "value_format": "json",
        "value_schema": VALUE_SCHEMA,
        "min_partitions": MIN_PARTITIONS,
        **CLUSTER_SPARK,
        "total_executor_cores": StandaloneCluster.WORKERS,
        "warehouse_dir": str(case_dir / "warehouse"),
        "metastore_dir": str(case_dir / "metastore"),
    }
    (case_dir / "request.json").write_text(json.dumps(request))
    connection = {"conn_type": "pulsar", "host": pulsar.service_url, "extra": {"admin_url": pulsar.web_url}}
    environment = {
        **os.environ,
        "AIRFLOW_HOME": str(case_dir / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_PULSAR_DEFAULT": json.dumps(connection),
        spark.connection_variable: spark.connection,
    }
    with ProcessPeaks(roots) as peaks:
        produce_seconds = produce_in_parallel(pulsar.service_url, topic, messages)
        started = time.perf_counter()
        with (case_dir / "task.log").open("wb") as log:
            command = [sys.executable, __file__, "--run-operator", str(case_dir)]
            task = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)
            peaks.roots[task.pid] = "task"
            code = task.wait()
        seconds = time.perf_counter() - started
    if code != 0:
        brokers = "\n".join(f"{broker.name}:\n{broker.jvm.log_tail(3000)}" for broker in pulsar.brokers if broker.jvm is not None)
        raise RuntimeError(f"the ingest task failed ({code}):\n{(case_dir / 'task.log').read_text()[-4000:]}\n{brokers}")
    xcom = (case_dir / "result.json").read_text()
    written = ds.dataset(case_dir / "warehouse" / request["table"], format="parquet", partitioning="hive").count_rows()
    assert json.loads(xcom)["total_rows"] == written == messages, f"the ingest wrote {written} rows, expected {messages}"
    return {
        "messages": messages,
        "topic_partitions": partitions,
        "produce_seconds": round(produce_seconds, 1),
        "ingest_seconds": round(seconds, 1),
        "rows_per_s": round(messages / seconds),
        **plan_log_sizes(pulsar.service_url, topic),
        "xcom_bytes": len(xcom),
        "memory": memory_by_role(peaks),
        "processes": [
            {
                "pid": pid,
                "role": role(tree, command, pid in peaks.roots),
                "command": " ".join(command)[-160:],
                "rss_mib": round(rss, 1),
                "pss_mib": round(pss, 1),
            }
            for pid, (tree, command, rss, pss) in sorted(peaks.peaks.items())
        ],
    }


def ingest(backlogs: Sequence[int], partitions: int) -> list[dict[str, Any]]:
    """An ingest case per backlog, on one Pulsar cluster and one Spark cluster (both stopped here)."""
    with tempfile.TemporaryDirectory(prefix="bench-ingest-scale-") as directory:
        workdir = Path(directory)
        (workdir / "spark").mkdir()
        pulsar = PulsarCluster(workdir / "pulsar", session_timeout_ms=LONGEST_SESSION_MS)
        spark = StandaloneCluster(workdir / "spark")
        try:
            pulsar.start()
            spark.start()
            cases = []
            for messages in sorted(backlogs):
                case = ingest_case(pulsar, spark, messages, partitions, workdir)
                print(
                    f"  ingest of {messages:,} messages over {partitions} partitions: {case['rows_per_s']:,} rows/s "
                    f"({case['ingest_seconds']} s; produced in {case['produce_seconds']} s); XCom {case['xcom_bytes']:,} B, "
                    f"planned record {case.get('planned_record_bytes', 0):,} B",
                    flush=True,
                )
                for name, memory in case["memory"].items():
                    print(
                        f"    {name:<22} {memory['processes']:>3} process(es): largest peak RSS {memory['max_rss_mib']:,.0f} MiB, "
                        f"PSS {memory['max_pss_mib']:,.0f} MiB; PSS peaks summed {memory['pss_sum_mib']:,.0f} MiB",
                        flush=True,
                    )
                cases.append(case)
                spark.wait_idle()
                subprocess.run(["rm", "-rf", str(workdir / f"ingest-{messages}" / "warehouse")], check=True)
        finally:
            spark.stop()
            pulsar.stop()
    return cases


def run_operator(case_dir: Path) -> None:
    """The task process: ``PulsarToTableOperator(**request).execute()``, its XCom to ``result.json``."""
    from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator

    request = json.loads((case_dir / "request.json").read_text())
    result = PulsarToTableOperator(task_id="ingest", **request).execute(context={})  # type: ignore[arg-type]
    (case_dir / "result.json").write_text(json.dumps(result))


# Goals: a plan of 1,024 partitions well within a task's time; every plan log record within
# Pulsar's default maxMessageSize (5 MiB), the job's argument within Linux's limit; rows/s that holds or rises with the backlog (linear
# time); memory per process, plan log records and XCom flat in the backlog (within 10% for sizes,
# 25% for memory, which a shared machine's page cache and JIT moves).
PLAN_BUDGET_SECONDS = 10
RECORD_BUDGET_BYTES = 5 * 1024 * 1024
# Linux's limit on one command-line argument (MAX_ARG_STRLEN): the job's spec is one.
ARGUMENT_BUDGET_BYTES = 128 * 1024


def rows(backlogs: Sequence[int], partitions: int, plan_partitions: Sequence[int]) -> list[dict[str, Any]]:
    """``make bench`` rows: planning on both brokers against its budgets, then each ingest beside
    the smallest backlog's (the "official" column), so that a ratio reads off what grows."""
    result = measure(backlogs, partitions, plan_partitions, KINDS)
    table: list[dict[str, Any]] = []
    for case in result["planning"]:
        where = "" if case["broker"] == "embedded" else ", on Apache Pulsar"
        label = f"ingest at scale: planning {case['topic_partitions']:,} partition(s){where}"
        seconds = case["hold_seconds"] + case["plan_seconds"]
        table.append({"figure": f"{label}, s", "official": seconds, "ours": seconds, "budget": PLAN_BUDGET_SECONDS, "detail": case})
        for key, budget in (
            ("job_argument_bytes", ARGUMENT_BUDGET_BYTES),
            ("planned_record_bytes", RECORD_BUDGET_BYTES),
            ("committed_record_bytes", RECORD_BUDGET_BYTES),
        ):
            figure = f"{label}, {key.replace('_', ' ')}"
            table.append({"figure": figure, "official": case[key], "ours": case[key], "budget": budget})
    first, *rest = result["ingest"]
    for case in rest:
        label = f"ingest at scale: {case['messages']:.0e} messages over {partitions} partitions"
        column = f"official column: {first['messages']:.0e}"
        rate = {"official": first["rows_per_s"], "ours": case["rows_per_s"], "min_ratio": 0.8, "detail": case}
        table.append({"figure": f"{label}, rows/s ({column})", **rate})
        for key in ("xcom_bytes", "planned_record_bytes", "committed_record_bytes"):
            figure = f"{label}, {key.replace('_', ' ')} ({column})"
            table.append({"figure": figure, "official": first[key], "ours": case[key], "max_ratio": 1.1})
        # Our code's processes: the JVMs' memory grows towards their configured heap whatever they run.
        for name in PYTHON_ROLES:
            memory = case["memory"].get(name)
            if memory is not None and name in first["memory"]:
                figure = f"{label}, {name} peak PSS of one, MiB ({column})"
                peaks = {"official": first["memory"][name]["max_pss_mib"], "ours": memory["max_pss_mib"]}
                table.append({"figure": figure, **peaks, "max_ratio": 1.25})
    return table


def _counts(text: str) -> list[int]:
    return [int(float(part)) for part in text.split(",") if part.strip()]


def measure(backlogs: Sequence[int], partitions: int, plan_partitions: Sequence[int], brokers: Sequence[str]) -> dict[str, Any]:
    """The planning cases on each of ``brokers``, then the ingest cases; saved to RESULTS."""
    result: dict[str, Any] = {"planning": [], "ingest": []}
    for kind in brokers:
        result["planning"] += planning(kind, plan_partitions)
    if backlogs:
        result["ingest"] = ingest(backlogs, partitions)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return result


def main() -> None:
    """Run the cases the arguments ask for, print them and write RESULTS."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=_counts, default=[1_000_000, 10_000_000], help="comma-separated backlogs to ingest")
    parser.add_argument("--partitions", type=int, default=64, help="the ingested topics' partitions")
    parser.add_argument("--plan-partitions", type=_counts, default=[1, 64, 1024], help="comma-separated partition counts to plan")
    parser.add_argument("--brokers", default=",".join(KINDS), help="where planning is measured: embedded, pulsar or both")
    parser.add_argument("--no-planning", action="store_true")
    parser.add_argument("--no-ingest", action="store_true")
    parser.add_argument("--run-operator", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_operator:
        run_operator(args.run_operator)
        return
    brokers = [] if args.no_planning else [kind.strip() for kind in args.brokers.split(",") if kind.strip()]
    measure([] if args.no_ingest else args.messages, args.partitions, args.plan_partitions, brokers)


if __name__ == "__main__":
    main()
