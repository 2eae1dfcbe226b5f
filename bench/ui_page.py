"""The Pulsar page's data (airflow_pulsar/ui/overview.py) for many topics: one refresh of a
namespace of ``topics`` partitioned topics of ``partitions`` partitions, each with a subscription
holding a backlog (so that every subscription's messages are counted and its oldest message's
age read), read over the admin API as the page reads it, on our broker and on Apache Pulsar.

Two figures, each the best of ``repeat`` wall times after one unmeasured refresh, without the
page's 5-second cache: a cold refresh, which counts every subscription's messages, and a steady
one, in which nothing moved since the last, so the counts are reused (the page open on a quiet
namespace). The goal is under a second on our broker. Usage::

    python bench/ui_page.py [--topics 100] [--partitions 4] [--repeat 3] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import brokers

from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import AsyncPulsarAdmin, PulsarAdmin
from airflow_pulsar.ui.overview import CONCURRENT_READS, read_namespaces
from airflow_pulsar.ui.recount import CountMemo

NAMESPACE = "public/default"
MESSAGES_PER_TOPIC = 40
GOAL_SECONDS = 1.0


def populate(broker: Any, topics: int, partitions: int) -> None:
    """``topics`` partitioned topics, each with a subscription and a batched backlog on every partition."""
    with PulsarAdmin(broker.web_url) as admin, Client(broker.service_url) as client:
        for index in range(topics):
            topic = f"persistent://{NAMESPACE}/ui-bench-{index:03d}"
            admin.create_partitioned_topic(topic, partitions)
            admin.create_subscription(topic, "ui-bench")
            producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=5)
            for message in range(MESSAGES_PER_TOPIC):
                producer.send_async(b"m" * 100, None, partition_key=f"k{message % partitions}")
            producer.flush()
            producer.close()


def refresh_seconds(web_url: str, topics: int, repeat: int, concurrency: int = CONCURRENT_READS) -> dict[str, float]:
    """The best wall times of ``repeat`` cold and steady refreshes (after one unmeasured), each
    checked to list every topic and count every backlog."""

    async def once(memo: CountMemo) -> float:
        async with AsyncPulsarAdmin(web_url) as admin:
            started = time.perf_counter()
            listed, _ = await read_namespaces(admin, [NAMESPACE], memo, concurrency)
            elapsed = time.perf_counter() - started
        counted = [t for t in listed if t.name.rsplit("/", 1)[-1].startswith("ui-bench-")]
        assert len(counted) == topics, f"listed {len(counted)} of {topics} topics"
        assert all(s.messages == MESSAGES_PER_TOPIC for t in counted for s in t.subscriptions), "a backlog miscounted"
        return elapsed

    asyncio.run(once(CountMemo()))
    cold = min(asyncio.run(once(CountMemo())) for _ in range(repeat))
    steady_memo = CountMemo()
    asyncio.run(once(steady_memo))
    steady = min(asyncio.run(once(steady_memo)) for _ in range(repeat))
    return {"cold": cold, "steady": steady}


def measure_on(kind: str, topics: int, partitions: int, repeat: int, concurrency: int = CONCURRENT_READS) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix=f"bench-ui-{kind}-") as data_dir:
        broker = brokers.start(kind, Path(data_dir), fsync=False)
        try:
            populate(broker, topics, partitions)
            return refresh_seconds(broker.web_url, topics, repeat, concurrency)
        finally:
            broker.stop()


def rows(topics: int = 100, partitions: int = 4, repeat: int = 3) -> list[dict[str, Any]]:
    """A cold and a steady refresh: ours is our broker's time, the "official" column Apache Pulsar's."""
    ours = measure_on("embedded", topics, partitions, repeat)
    pulsar = measure_on("pulsar", topics, partitions, repeat)
    return [
        {
            "figure": f"ui page {how} refresh, {topics} topics x {partitions} partitions with backlogs, s (official column: Apache Pulsar)",
            "official": round(pulsar[how], 3),
            "ours": round(ours[how], 3),
            "goal_seconds": GOAL_SECONDS,
        }
        for how in ("cold", "steady")
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=CONCURRENT_READS)
    parser.add_argument("--brokers", default="embedded,pulsar")
    args = parser.parse_args()
    for kind in args.brokers.split(","):
        seconds = measure_on(kind, args.topics, args.partitions, args.repeat, args.concurrency)
        figures = {"broker": kind, "topics": args.topics, "partitions": args.partitions, "concurrency": args.concurrency}
        print(json.dumps({**figures, **seconds}))


if __name__ == "__main__":
    main()
