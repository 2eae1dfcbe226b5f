"""The backlog sensor's poke against partition count: one ``AsyncPulsarAdmin.message_backlog``
reading (what the trigger and the sensor do each poke while the entries are below the threshold:
a full count) of a topic of 1, 16, 64, 256 and 1,024 partitions with a message waiting on every
partition, on our broker and on Apache Pulsar.

Each reading runs in a fresh interpreter that imports the project from a checkout (this one, or
``--baseline DIR``, e.g. an export of main, to compare), on one admin client: one reading to warm
up, then ``--repeat`` timed ones, of which the best counts. ``--delay`` readings go through
bench/delay_proxy.py in front of the admin port, which adds that many seconds each way (a broker
10 ms away by default). Goals: the 1,024-partition poke within 2 s on both brokers here, and within
10x the 1-partition poke. Usage::

    python bench/backlog_poke.py [--partitions 1,16,64,256,1024] [--repeat 3] [--baseline DIR]
        [--delay 0.010] [--delayed-partitions 1,1024] [--brokers embedded,pulsar]

Writes bench/results/backlog_poke.json; ``rows`` is the suite's entry (its ``backlog`` section).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "backlog_poke.json"
CHECKOUT = Path(__file__).resolve().parents[1]
SUB = "bench"
GOAL_MS = 2000
GOAL_RATIO = 10


def poke_worker(web_url: str, topic: str, repeat: int) -> dict[str, Any]:
    """In this interpreter: one warm-up reading and ``repeat`` timed ones on one admin client."""
    from airflow_pulsar.client.admin import AsyncPulsarAdmin

    async def read() -> list[tuple[float, float, int]]:
        timed = []
        async with AsyncPulsarAdmin(web_url, timeout_seconds=120) as admin:
            for _ in range(repeat + 1):
                wall, cpu = time.perf_counter(), time.process_time()
                backlog = await admin.message_backlog(topic, SUB)
                timed.append((time.perf_counter() - wall, time.process_time() - cpu, backlog.messages))
        return timed[1:]

    timed = asyncio.run(read())
    return {"ms": [round(wall * 1000, 1) for wall, _, _ in timed], "cpu_ms": [round(cpu * 1000, 1) for _, cpu, _ in timed],
            "messages": timed[0][2]}


def poke(web_url: str, topic: str, repeat: int, checkout: Path) -> dict[str, Any]:
    """``poke_worker`` in a fresh interpreter importing the project from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, __file__, "--worker", web_url, topic, str(repeat)], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"the poke from {checkout} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def backlogged_topic(broker: Any, partitions: int, per_partition: int = 1, topic: str | None = None) -> str:
    """A topic of ``partitions`` partitions with ``per_partition`` unbatched messages waiting on
    each for SUB (the topic's name, unless given, says how many partitions)."""
    from airflow_pulsar.client import Client, InitialPosition, PartitionsRoutingMode
    from airflow_pulsar.client.admin import PulsarAdmin

    topic = topic or f"persistent://public/default/bench-backlog-{partitions}"
    with PulsarAdmin(broker.web_url, timeout_seconds=120) as admin, Client(broker.service_url, operation_timeout_seconds=120) as client:
        admin.create_partitioned_topic(topic, partitions)
        admin.create_subscription(topic, SUB, InitialPosition.Earliest)
        producer = client.create_producer(
            topic, batching_enabled=False, message_routing_mode=PartitionsRoutingMode.RoundRobinDistribution
        )
        for index in range(partitions * per_partition):
            producer.send_async(f"m{index}".encode(), None)
        producer.flush()
        producer.close()
    return topic


def measure_broker(kind: str, args: argparse.Namespace, checkouts: dict[str, Path]) -> list[dict[str, Any]]:
    """Every poke on one broker of ``kind``: each partition count, each checkout, near and (for
    ``delayed_partitions``) ``delay`` away."""
    from urllib.parse import urlsplit

    import brokers
    from delay_proxy import DelayProxy

    figures = []
    with tempfile.TemporaryDirectory(prefix=f"bench-backlog-{kind}-") as data_dir:
        broker = brokers.start(kind, Path(data_dir), fsync=False)
        try:
            address = urlsplit(broker.web_url)
            for partitions in args.partitions:
                topic = backlogged_topic(broker, partitions)
                for name, checkout in checkouts.items():
                    near = poke(broker.web_url, topic, args.repeat, checkout)
                    figures.append({"broker": kind, "checkout": name, "partitions": partitions, "delay": 0.0, **near})
                    print(f"{kind:8} {name:8} {partitions:5} partitions: best {min(near['ms']):,.0f} ms", flush=True)
                    assert near["messages"] == partitions, near
                    if partitions in args.delayed_partitions:
                        with DelayProxy(address.hostname or "127.0.0.1", address.port or 80, args.delay) as proxy:
                            far = poke(proxy.url, topic, 1, checkout)
                        figures.append({"broker": kind, "checkout": name, "partitions": partitions, "delay": args.delay, **far})
                        away = f"{args.delay * 1000:g} ms away"
                        print(f"{kind:8} {name:8} {partitions:5} partitions, {away}: {min(far['ms']):,.0f} ms", flush=True)
        finally:
            broker.stop()
    return figures


def suite_rows(figures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per broker: the largest poke beside the 1-partition poke (the "official" column), this checkout."""
    from brokers import LABELS

    rows = []
    for kind in dict.fromkeys(figure["broker"] for figure in figures):
        near = {f["partitions"]: min(f["ms"]) for f in figures if f["broker"] == kind and f["checkout"] == "this" and not f["delay"]}
        if 1 in near and len(near) > 1:
            largest = max(near)
            rows.append({
                "figure": f"backlog poke, {largest:,} partitions, ms (official column: 1 partition), {LABELS[kind]}",
                "official": near[1],
                "ours": near[largest],
                "bound_ms": GOAL_MS,
                "bound_ratio": GOAL_RATIO,
            })
    return rows


def measure(partitions: list[int], repeat: int = 3, brokers_: tuple[str, ...] = ("embedded", "pulsar")) -> list[dict[str, Any]]:
    """The suite's entry: this checkout's pokes, near only."""
    args = argparse.Namespace(partitions=partitions, repeat=repeat, delay=0.0, delayed_partitions=[])
    figures = [figure for kind in brokers_ for figure in measure_broker(kind, args, {"this": CHECKOUT})]
    return suite_rows(figures)


def print_table(figures: list[dict[str, Any]]) -> None:
    """Best ms per partition count, per broker, checkout and delay; the 1,024/1 ratio."""
    counts = sorted({f["partitions"] for f in figures})
    print(f"\n{'broker':9} {'checkout':9} {'away ms':>7} " + " ".join(f"{n:>8,}" for n in counts) + "   largest/1")
    keys = dict.fromkeys((f["broker"], f["checkout"], f["delay"]) for f in figures)
    for kind, name, delay in keys:
        row = {f["partitions"]: min(f["ms"]) for f in figures if (f["broker"], f["checkout"], f["delay"]) == (kind, name, delay)}
        cells = " ".join(f"{row[n]:>8,.0f}" if n in row else f"{'':>8}" for n in counts)
        ratio = f"{row[max(row)] / row[1]:.1f}x" if 1 in row and len(row) > 1 else ""
        print(f"{kind:9} {name:9} {delay * 1000:>7g} {cells}   {ratio}")


def main() -> int:
    """Measure, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="1,16,64,256,1024")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout (e.g. main) whose pokes to measure beside this one's")
    parser.add_argument("--delay", type=float, default=0.010, help="seconds each way for the far readings")
    parser.add_argument("--delayed-partitions", default="1,1024", help="partition counts also read through the delaying proxy")
    parser.add_argument("--brokers", default="embedded,pulsar")
    args = parser.parse_args()
    args.partitions = [int(n) for n in args.partitions.split(",")]
    args.delayed_partitions = [int(n) for n in args.delayed_partitions.split(",") if n]
    checkouts = {"this": CHECKOUT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    figures = [figure for kind in args.brokers.split(",") for figure in measure_broker(kind, args, checkouts)]
    print_table(figures)
    RESULTS.parent.mkdir(exist_ok=True)
    document = {"partitions": args.partitions, "repeat": args.repeat, "delay": args.delay, "cpus": os.cpu_count(),
                "load_average": os.getloadavg(), "figures": figures, "rows": suite_rows(figures)}
    RESULTS.write_text(json.dumps(document, indent=2))
    print(f"\nwrote {RESULTS}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        print(json.dumps(poke_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        sys.exit(0)
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ modules: brokers, delay_proxy
    sys.exit(main())
