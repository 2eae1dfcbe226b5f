"""End-to-end latency at a fixed rate: send time to receive time, both clients, same broker.

A producer thread sends 100-byte messages at ``--rate`` messages per second (batching on, 1 ms
delay), each stamped with ``perf_counter_ns`` at send; a consumer in the same process receives
them and records the difference. Same process, same clock, so no clock skew enters. Then a
producer with batching off sends ``--sync-sends`` messages one at a time with ``send()``, each
waiting for its receipt: the p50 and p99 of that round trip. Usage::

    python bench/latency.py [--rate 10000] [--seconds 5] [--sync-sends 2000]
"""

from __future__ import annotations

import argparse
import json
import struct
import threading
import time
from pathlib import Path
from typing import Any

import brokers

STAMP = struct.Struct(">q")


def _paced_send(producer: Any, rate: int, seconds: float) -> int:
    """Send at ``rate`` per second for ``seconds``; returns how many were sent."""
    total = int(rate * seconds)
    start = time.perf_counter()
    padding = b"x" * (100 - STAMP.size)
    for i in range(total):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0.0005:
            time.sleep(delay)
        producer.send_async(STAMP.pack(time.perf_counter_ns()) + padding, None)
    producer.flush()
    return total


def _percentile(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


def run(client: Any, topic: str, rate: int, seconds: float) -> dict[str, float]:
    """p50/p99/max latency in milliseconds for one client library."""
    consumer = client.subscribe(topic, "latency", receiver_queue_size=1000)
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=1000, batching_max_publish_delay_ms=1,
        max_pending_messages=50_000, block_if_queue_full=True,
    )
    latencies: list[float] = []
    expected = int(rate * seconds)

    def receive() -> None:
        while len(latencies) < expected:
            message = consumer.receive(10_000)
            latencies.append((time.perf_counter_ns() - STAMP.unpack_from(message.data())[0]) / 1e6)
            consumer.acknowledge(message)

    receiver = threading.Thread(target=receive, daemon=True)
    receiver.start()
    _paced_send(producer, rate, seconds)
    receiver.join(timeout=60)
    if len(latencies) < expected:
        raise RuntimeError(f"received {len(latencies)} of {expected} messages")
    latencies.sort()
    return {"p50_ms": _percentile(latencies, 0.50), "p99_ms": _percentile(latencies, 0.99), "max_ms": latencies[-1]}


def run_sync_sends(client: Any, topic: str, count: int) -> dict[str, float]:
    """p50/p99/max in milliseconds of ``send()`` one at a time, batching off: each waits for its receipt."""
    producer = client.create_producer(topic, batching_enabled=False)
    payload = b"x" * 100
    for _ in range(100):  # warm up: connection, producer, broker caches
        producer.send(payload)
    latencies: list[float] = []
    for _ in range(count):
        start = time.perf_counter_ns()
        producer.send(payload)
        latencies.append((time.perf_counter_ns() - start) / 1e6)
    latencies.sort()
    return {"p50_ms": _percentile(latencies, 0.50), "p99_ms": _percentile(latencies, 0.99), "max_ms": latencies[-1]}


def measure(rate: int, seconds: float, broker_kind: str = "embedded", sync_sends: int = 2000) -> list[dict[str, Any]]:
    """Latency of both clients through one broker (fsync on, as in production)."""
    import pulsar

    import airflow_pulsar.client as ours

    results: dict[str, dict[str, float]] = {}
    sync: dict[str, dict[str, float]] = {}
    with brokers.running(broker_kind, fsync=True) as broker:
        official = pulsar.Client(broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        results["official"] = run(official, "latency-official", rate, seconds)
        sync["official"] = run_sync_sends(official, "latency-sync-official", sync_sends)
        official.close()
        with ours.Client(broker.service_url) as client:
            results["ours"] = run(client, "latency-ours", rate, seconds)
            sync["ours"] = run_sync_sends(client, "latency-sync-ours", sync_sends)
    on = brokers.on(broker_kind)
    rows = [
        {"figure": f"end-to-end {key[:3]} latency at {rate} msg/s, 1 ms batching{on} (ms)", "official": round(results["official"][key], 2),
         "ours": round(results["ours"][key], 2), "lower_is_better": True}
        for key in ("p50_ms", "p99_ms")
    ]
    rows += [
        {"figure": f"send() {key[:3]} round trip, one at a time, unbatched{on} (ms)", "official": round(sync["official"][key], 3),
         "ours": round(sync["ours"][key], 3), "lower_is_better": True}
        for key in ("p50_ms", "p99_ms")
    ]
    return rows


def main() -> None:
    """Print p50 and p99 for both clients."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--sync-sends", type=int, default=2000, help="one-at-a-time send() calls timed")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--broker", choices=brokers.KINDS, default="embedded", help="the broker to run against")
    args = parser.parse_args()
    rows = measure(args.rate, args.seconds, args.broker, args.sync_sends)
    for row in rows:
        print(f"{row['figure']}: official {row['official']}  ours {row['ours']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
