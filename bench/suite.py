"""The benchmark suite: our client and the official one, same broker, same settings, one run.

``make bench`` runs the quick mode; ``make bench FULL=1`` the full one. It prints one table, each
figure with both clients and the ratio ours/official, checks the figures against the project's
targets, and writes ``bench/results/latest.json``. The ``pulsar`` section runs both clients on
Apache Pulsar standalone; the ``brokers`` section puts our broker beside Apache Pulsar, both
driven by the official client (there the "official" column is Apache Pulsar). The ``connector``
section puts our Spark ingest beside StreamNative's pulsar-spark connector on Apache Pulsar (the
"official" column; `make connector-jar` builds it, and the section is skipped without it). The
``reader`` section gives the CPU per message of the ingest's range reader alone, beside the
Message-object path it replaced (lower is better). The ``backlog`` section gives the backlog
sensor's poke of a 1,024-partition topic beside that of a 1-partition one (the "official" column),
on both brokers (``bench/backlog_poke.py``); the ``topics`` section, the embedded broker with
10,000 topics and 1,000 consumers against its budget (``bench/many_topics.py``). The ``ui`` section
times a refresh of the Pulsar page's data for 100 topics of 4 partitions on our broker and on
Apache Pulsar (the "official" column). The ``scale`` section plans batches of 1, 64 and 1,024
partitions on both brokers against a time budget and Pulsar's message size, and ingests two
backlogs over 64 partitions from the 2-broker Pulsar cluster on the 2-worker Spark cluster, the
larger beside the smaller (the "official" column) for rows/s, record and XCom sizes and each
process's memory (``bench/ingest_scale.py``). The ``cpu`` section gives each client's CPU per message (all
its threads) for produce and receive plus acknowledge, on both brokers, the least a Python client
can spend beside them (``bench/per_message.py``). Usage::

    python bench/suite.py [--full] [--only SECTION,...]

where the sections are producer, consumer, latency, broker, memory, spark, connector, reader,
pulsar, brokers, backlog, topics, ui, scale and cpu.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import backlog_poke
import broker_compare
import broker_publish
import consumer
import ingest_scale
import latency
import many_topics
import memory
import per_message
import producer
import range_read
import spark_connector
import ui_page

RESULTS = Path(__file__).with_name("results")


def spark_ingest_rows(messages: int, repeat: int, backlogs: list[int]) -> list[dict[str, Any]]:
    """Spark ingestion rows/s against the in-memory Arrow source and a Python consumer loop (the
    "official" column), then the scaling cases over 1, 16 and 64 partitions and ``backlogs``.

    A scaling row's "official" column is the same partition count at the smallest backlog, so its
    ratio reads off linear time (rows/s holds) and flat memory (the peak holds).

    spark_ingest.py runs as its own script: Spark's Python workers then get its data source class
    by value, and this process never starts a JVM.
    """
    script = Path(__file__).with_name("spark_ingest.py")
    command = [
        sys.executable,
        str(script),
        "--messages",
        str(messages),
        "--repeat",
        str(repeat),
        "--scale-partitions",
        "1,16,64",
        "--scale-backlogs",
        ",".join(map(str, backlogs)),
    ]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{script.name} failed:\n{run.stderr[-3000:]}")
    result = json.loads((RESULTS / "spark_ingest.json").read_text())
    detail = {key: value for key, value in result.items() if key != "scaling"}
    rows = [
        {
            "figure": f"spark ingest {messages} JSON messages, rows/s (official column: in-memory source)",
            "official": result["baseline_rows_per_s"],
            "ours": result["ours_rows_per_s"],
            "detail": detail,
        },
        {
            "figure": f"spark ingest {messages} JSON messages, rows/s (official column: Python consumer loop)",
            "official": result["python_loop_rows_per_s"],
            "ours": result["ours_rows_per_s"],
        },
    ]
    for name, peer in result.get("peers", {}).items():
        rows.append(
            {
                "figure": f"spark ingest {messages} JSON messages, rows/s (official column: {name})",
                "official": peer["best"],
                "ours": result["ours_rows_per_s"],
            }
        )
    smallest = {case["topic_partitions"]: case for case in result["scaling"] if case["messages"] == min(backlogs)}
    for case in result["scaling"]:
        first = smallest[case["topic_partitions"]]
        label = f"{case['topic_partitions']} partition(s), {case['messages']:.0e} messages"
        rows.append(
            {
                "figure": f"spark ingest scaling, {label}, rows/s (official column: {min(backlogs):.0e})",
                "official": first["rows_per_s"],
                "ours": case["rows_per_s"],
                "detail": case,
            }
        )
        rows.append(
            {
                "figure": f"spark ingest scaling, {label}, peak MiB (official column: {min(backlogs):.0e})",
                "official": first["spark_peak_mib"],
                "ours": case["spark_peak_mib"],
            }
        )
    return rows


# name -> (quick, full) runs; each returns rows {"figure", "official", "ours", ...}.
SECTIONS: dict[str, tuple[Callable[[], list[dict[str, Any]]], Callable[[], list[dict[str, Any]]]]] = {
    "producer": (lambda: producer.measure(30_000), lambda: producer.measure(200_000)),
    "consumer": (lambda: consumer.measure(50_000), lambda: consumer.measure(200_000)),
    "latency": (lambda: latency.measure(10_000, 3), lambda: latency.measure(10_000, 15)),
    "broker": (
        lambda: broker_publish.measure(100_000, fsync=True) + broker_publish.measure(100_000, fsync=False),
        lambda: broker_publish.measure(300_000, fsync=True) + broker_publish.measure(300_000, fsync=False),
    ),
    "memory": (lambda: memory.measure(64, 500, 3, 5_000), lambda: memory.measure(64, 500, 10, 20_000)),
    "spark": (
        lambda: spark_ingest_rows(200_000, 1, [100_000, 1_000_000]),
        lambda: spark_ingest_rows(1_000_000, 3, [100_000, 1_000_000, 10_000_000]),
    ),
    "connector": (lambda: spark_connector.rows(200_000, 3), lambda: spark_connector.rows(200_000, 5)),
    "reader": (lambda: range_read.rows(200_000, 3), lambda: range_read.rows(1_000_000, 3)),
    "pulsar": (
        lambda: (
            producer.measure(30_000, broker_kind="pulsar")
            + consumer.measure(50_000, broker_kind="pulsar")
            + latency.measure(10_000, 3, broker_kind="pulsar")
        ),
        lambda: (
            producer.measure(200_000, broker_kind="pulsar")
            + consumer.measure(200_000, broker_kind="pulsar")
            + latency.measure(10_000, 15, broker_kind="pulsar")
        ),
    ),
    "brokers": (lambda: broker_compare.measure(50_000), lambda: broker_compare.measure(200_000)),
    "backlog": (lambda: backlog_poke.measure([1, 1024], 1), lambda: backlog_poke.measure([1, 1024], 3)),
    "topics": (lambda: many_topics.suite_rows(10_000, 1_000, 200), lambda: many_topics.suite_rows(10_000, 1_000, 1_000)),
    "ui": (lambda: ui_page.rows(100, 4, 3), lambda: ui_page.rows(100, 4, 10)),
    "scale": (
        lambda: ingest_scale.rows([100_000, 1_000_000], 64, [1, 64, 1024]),
        lambda: ingest_scale.rows([1_000_000, 10_000_000], 64, [1, 64, 1024]),
    ),
    "cpu": (lambda: per_message.suite_rows(30_000, 3), lambda: per_message.suite_rows(100_000, 5)),
}


def target(row: dict[str, Any]) -> tuple[str, bool] | None:
    """The project's target for a figure, and whether this run met it."""
    figure, ours = row["figure"], row["ours"]
    if figure.startswith(("produce ", "consume ")):
        return ">= 1.0x official", ours >= row["official"]
    if figure.startswith("broker publish") and "fsync on" in figure:
        floor = 300_000 if "batching on" in figure else 20_000
        return f">= {floor:,} msg/s", max(ours, row["official"]) >= floor
    if figure.startswith("spark ingest") and "pulsar-spark connector" in figure:
        return ">= 1.2x connector", ours >= 1.2 * row["official"]
    if figure.startswith("spark ingest scaling") and "rows/s" in figure:
        return ">= 0.8x the smallest backlog (linear time)", ours >= 0.8 * row["official"]
    if figure.startswith("spark ingest scaling"):
        return "<= 1.25x the smallest backlog (flat memory)", ours <= 1.25 * row["official"]
    if figure.startswith("spark ingest") and "official column: Python consumer loop" in figure:
        return ">= 3x the loop", ours >= 3 * row["official"]
    if figure.startswith("spark ingest") and "in-memory source" in figure:
        return ">= 0.8x in-memory source", ours >= 0.8 * row["official"]
    if figure.startswith("spark ingest"):  # a JVM connector
        return ">= 1.2x the connector", ours >= 1.2 * row["official"]
    if "cpu_bound" in row:
        return f"<= {row['cpu_bound']}x official", ours <= row["cpu_bound"] * row["official"]
    if "min_ratio" in row:
        return f">= {row['min_ratio']}x the official column", ours >= row["min_ratio"] * row["official"]
    if "max_ratio" in row:
        return f"<= {row['max_ratio']}x the official column", ours <= row["max_ratio"] * row["official"]
    if "budget" in row:
        return f"<= {row['budget']:g}", ours <= row["budget"]
    if "p99" in figure:
        return "< 20 ms", ours < 20
    if figure.startswith("backlog poke"):
        met = ours <= row["bound_ms"] and ours <= row["bound_ratio"] * row["official"]
        return f"<= {row['bound_ms']:,} ms and <= {row['bound_ratio']}x 1 partition", met
    if "goal_seconds" in row:
        return f"< {row['goal_seconds']:g} s on our broker", ours < row["goal_seconds"]
    if "bound" in row:
        return f"<= {row['bound']} MiB", ours <= row["bound"]
    return None


def _format(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def print_table(rows: list[dict[str, Any]]) -> None:
    """One line per figure: both clients, the ratio, the target."""
    width = max(len(row["figure"]) for row in rows)
    print(f"\n{'figure':<{width}}  {'official':>11}  {'ours':>11}  {'ours/off':>8}  target")
    for row in rows:
        check = target(row)
        verdict = f"{check[0]} {'met' if check[1] else 'MISSED'}" if check else ""
        print(f"{row['figure']:<{width}}  {_format(row['official']):>11}  {_format(row['ours']):>11}  {row['ratio']:>8.2f}  {verdict}")


def main() -> int:
    """Run the chosen sections, print the table, write latest.json; exit 0 (targets are reported, not enforced)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="longer runs, steadier figures")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections to run")
    args = parser.parse_args()
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; choose from {sorted(SECTIONS)}")
    rows: list[dict[str, Any]] = []
    started = time.time()
    for name in chosen:
        print(f"running {name} ...", flush=True)
        for row in SECTIONS[name][1 if args.full else 0]():
            row["ratio"] = round(row["ours"] / row["official"], 3) if row["official"] else float("nan")
            row["section"] = name
            rows.append(row)
    print_table(rows)
    RESULTS.mkdir(exist_ok=True)
    machine = {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0]}
    document = {
        "mode": "full" if args.full else "quick",
        "started": started,
        "seconds": round(time.time() - started),
        "machine": machine,
        "rows": rows,
    }
    (RESULTS / "latest.json").write_text(json.dumps(document, indent=2))
    print(f"\nwrote {RESULTS / 'latest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
