"""The embedded broker with many topics: 10,000 topics holding a message each, 1,000 of them with a
consumer connected, then a restart over that data.

Measures the time to create the topics, the broker's resident memory with the consumers connected,
its start time after a restart (process start to the ready line, and to the first lookup served),
and the latency of topic lookups (the binary protocol's LOOKUP, through our client's
``get_topic_partitions`` and producer creation, and the REST lookup), each against the budget in
:data:`BUDGET`. Usage::

    python bench/many_topics.py [--topics 10000] [--consumers 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from memory import rss_bytes

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client, InitialPosition

RESULTS = Path(__file__).with_name("results")
NAMESPACE = "persistent://public/default"
MIB = 1024 * 1024
# What the broker must hold to at 10,000 topics and 1,000 consumers on one machine.
BUDGET = {
    "restart_to_ready_s": 2.0,
    "restart_to_first_lookup_s": 2.0,
    "rss_with_consumers_mib": 200.0,
    "lookup_p99_ms": 20.0,
}


async def _create_topics(web_url: str, names: list[str], in_flight: int) -> None:
    """PUT each topic over admin REST, ``in_flight`` at a time."""
    bound = asyncio.Semaphore(in_flight)
    async with httpx.AsyncClient(base_url=web_url, timeout=60, limits=httpx.Limits(max_connections=in_flight)) as http:

        async def create(name: str) -> None:
            async with bound:
                response = await http.put(f"/admin/v2/persistent/public/default/{name}")
                if response.status_code not in (204, 409):
                    raise RuntimeError(f"creating {name}: HTTP {response.status_code} {response.text}")

        await asyncio.gather(*(create(name) for name in names))


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


def _lookups(broker: BrokerProcess, names: list[str], samples: int) -> dict[str, Any]:
    """Latency of a binary lookup (a producer's creation: partition metadata, LOOKUP, PRODUCER) and
    of the REST lookup, on topics picked at random, each once."""
    picked = random.Random(7).sample(names, samples)
    binary = []
    with Client(broker.service_url, operation_timeout_seconds=30) as client:
        for name in picked:
            began = time.perf_counter()
            client.create_producer(f"{NAMESPACE}/{name}").close()
            binary.append(time.perf_counter() - began)
    rest = []
    with httpx.Client(base_url=broker.web_url, timeout=30) as http:
        for name in picked:
            began = time.perf_counter()
            http.get(f"/lookup/v2/topic/persistent/public/default/{name}").raise_for_status()
            rest.append(time.perf_counter() - began)
    return {"producer_create": _percentiles(binary), "rest_lookup": _percentiles(rest)}


def measure(topics: int, consumers: int, samples: int) -> dict[str, Any]:
    """Run the whole scenario on a fresh broker; the figures."""
    names = [f"many-{index:05d}" for index in range(topics)]
    figures: dict[str, Any] = {"topics": topics, "consumers": consumers}
    with tempfile.TemporaryDirectory(prefix="bench-many-topics-") as data:
        broker = BrokerProcess(Path(data) / "broker").start()
        try:
            began = time.perf_counter()
            asyncio.run(_create_topics(broker.web_url, names, in_flight=32))
            figures["create_topics_s"] = round(time.perf_counter() - began, 2)
            with Client(broker.service_url, operation_timeout_seconds=60) as client:
                began = time.perf_counter()
                for name in names:  # one message on every topic, so each has a ledger to reopen
                    producer = client.create_producer(f"{NAMESPACE}/{name}", batching_enabled=False)
                    producer.send(b"x")
                    producer.close()
                figures["produce_one_each_s"] = round(time.perf_counter() - began, 2)
                began = time.perf_counter()
                opened = [
                    client.subscribe(f"{NAMESPACE}/{name}", "many", initial_position=InitialPosition.Earliest)
                    for name in names[:consumers]
                ]
                figures["subscribe_s"] = round(time.perf_counter() - began, 2)
                assert broker.process is not None
                figures["rss_with_consumers_mib"] = round(rss_bytes(broker.process.pid) / MIB, 1)
                figures["lookups"] = _lookups(broker, names, samples)
                for consumer in opened:
                    consumer.close()
            broker.stop()
            began = time.perf_counter()
            broker.start()
            figures["restart_to_ready_s"] = round(time.perf_counter() - began, 2)
            with Client(broker.service_url, operation_timeout_seconds=60) as client:
                client.create_producer(f"{NAMESPACE}/{names[-1]}").close()
            figures["restart_to_first_lookup_s"] = round(time.perf_counter() - began, 2)
            assert broker.process is not None
            figures["rss_after_restart_mib"] = round(rss_bytes(broker.process.pid) / MIB, 1)
            figures["lookups_after_restart"] = _lookups(broker, names, samples)
        finally:
            broker.stop()
    held = {
        "restart_to_ready_s": figures["restart_to_ready_s"],
        "restart_to_first_lookup_s": figures["restart_to_first_lookup_s"],
        "rss_with_consumers_mib": figures["rss_with_consumers_mib"],
        "lookup_p99_ms": max(figures[key]["producer_create"]["p99_ms"] for key in ("lookups", "lookups_after_restart")),
    }
    figures["budget"] = {name: {"goal": BUDGET[name], "measured": value, "held": value <= BUDGET[name]} for name, value in held.items()}
    return figures


# The figures the suite prints, with their units.
_SUITE_FIGURES = {
    "restart_to_ready_s": "restart to ready, s",
    "restart_to_first_lookup_s": "restart to first lookup served, s",
    "rss_with_consumers_mib": "RSS with the consumers connected, MiB",
    "lookup_p99_ms": "producer creation (lookup) p99, ms",
}


def suite_rows(topics: int, consumers: int, samples: int) -> list[dict[str, Any]]:
    """The budget figures at ``topics`` and ``consumers`` beside the same at a twentieth of them
    (the "official" column), so that the ratio reads off how each grows."""
    small = measure(max(topics // 20, 1), max(consumers // 20, 1), samples)
    large = measure(topics, consumers, samples)
    return [
        {
            "figure": f"broker, {topics:,} topics, {consumers:,} consumers: {label} (official column: a twentieth)",
            "official": small["budget"][name]["measured"],
            "ours": large["budget"][name]["measured"],
            "budget": BUDGET[name],
        }
        for name, label in _SUITE_FIGURES.items()
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--consumers", type=int, default=1_000)
    parser.add_argument("--samples", type=int, default=500, help="lookups timed, each of a different topic")
    args = parser.parse_args()
    figures = measure(args.topics, args.consumers, args.samples)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "many_topics.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0 if all(check["held"] for check in figures["budget"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
