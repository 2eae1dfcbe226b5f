"""Producer throughput: our producer and the official one, same broker, same settings, one run.

For each case (100 B and 1 KiB messages, 1 and 4 partitions, no compression and LZ4) both
producers send the same number of messages with ``send_async`` and then ``flush``; the rate is
messages per second until the last receipt, the best of ``--rounds`` interleaved rounds (each
round on a fresh topic). Settings are identical and explicit on both sides (batching on: the
official sync API defaults it off). The unbatched cases send 100 B messages with batching off
(the official client's default), from 1, 4 and 16 producers of one client, so on one connection,
each producer on a thread of its own and on a topic of its own. Fsync is off by default so the
clients, not the disk, are measured. Usage::

    python bench/producer.py [--messages N] [--rounds R] [--fsync] [--json bench/results/producer.json]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import brokers
import pulsar
from rounds import DEFAULT_ROUNDS, best_of_rounds

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.producer import CompressionType

SETTINGS: dict[str, Any] = {
    "batching_enabled": True,
    "batching_max_messages": 1000,
    "batching_max_allowed_size_in_bytes": 131072,
    "batching_max_publish_delay_ms": 10,
    "max_pending_messages": 5000,
    "max_pending_messages_across_partitions": 50_000,
    "block_if_queue_full": True,
    "send_timeout_millis": 60_000,
}
CASES = [(size, partitions, codec) for size in (100, 1024) for partitions in (1, 4) for codec in ("NONE", "LZ4")]
# On Apache Pulsar only the base cases: the JVM broker, not the codec, is what that run compares.
PULSAR_CASES = [(100, 1, "NONE"), (100, 4, "NONE")]
# Unbatched: how many producers share the client's one connection.
UNBATCHED_PRODUCERS = (1, 4, 16)


def _rate(producer: Any, payload: bytes, messages: int) -> float:
    start = time.perf_counter()
    for _ in range(messages):
        producer.send_async(payload, None)
    producer.flush()
    return messages / (time.perf_counter() - start)


def run_official(broker: brokers.Broker, topic: str, payload: bytes, messages: int, codec: str) -> float:
    """Messages per second of the official client (C++ core)."""
    client = pulsar.Client(
        broker.service_url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        producer = client.create_producer(topic, compression_type=getattr(pulsar.CompressionType, codec), **SETTINGS)
        return _rate(producer, payload, messages)
    finally:
        client.close()


def run_ours(broker: brokers.Broker, topic: str, payload: bytes, messages: int, codec: str) -> float:
    """Messages per second of our producer."""
    with Client(broker.service_url, operation_timeout_seconds=30) as client:
        producer = client.create_producer(topic, compression_type=CompressionType[codec], **SETTINGS)
        return _rate(producer, payload, messages)


def _unbatched_rate(client: Any, topic: str, producers: int, payload: bytes, messages: int) -> float:
    """Messages per second of ``producers`` unbatched producers of one client, each on its own thread
    and topic (``{topic}-{i}``), ``messages`` in all, until the last receipt."""
    made = [client.create_producer(f"{topic}-{index}", **{**SETTINGS, "batching_enabled": False}) for index in range(producers)]
    share = messages // producers
    ready = threading.Barrier(producers + 1)

    def send(producer: Any) -> None:
        ready.wait()
        for _ in range(share):
            producer.send_async(payload, None)
        producer.flush()

    threads = [threading.Thread(target=send, args=(producer,)) for producer in made]
    for thread in threads:
        thread.start()
    ready.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    return share * producers / (time.perf_counter() - start)


def run_official_unbatched(broker: brokers.Broker, topic: str, producers: int, payload: bytes, messages: int) -> float:
    """Unbatched messages per second of the official client's producers."""
    client = pulsar.Client(
        broker.service_url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        return _unbatched_rate(client, topic, producers, payload, messages)
    finally:
        client.close()


def run_ours_unbatched(broker: brokers.Broker, topic: str, producers: int, payload: bytes, messages: int) -> float:
    """Unbatched messages per second of our producers."""
    with Client(broker.service_url, operation_timeout_seconds=30) as client:
        return _unbatched_rate(client, topic, producers, payload, messages)


def measure_unbatched(broker: brokers.Broker, messages: int, rounds: int, broker_kind: str) -> list[dict[str, Any]]:
    """One row per producer count, 100 B messages with batching off, best round of each client."""
    payload = (b"0123456789abcdef" * 7)[:100]
    runners: dict[str, Callable[..., float]] = {"official": run_official_unbatched, "ours": run_ours_unbatched}
    rows = []
    for producers in UNBATCHED_PRODUCERS:
        count = messages // producers * producers

        def round_of(who: str, run: Callable[..., float], producers: int = producers, count: int = count) -> Callable[[int], float]:
            def one_round(index: int) -> float:
                topic = f"bench-{who}-unbatched-{producers}-{index}"
                rate = run(broker, topic, producers, payload, count)
                stored = sum(_stored(broker, f"{topic}-{i}", 1) for i in range(producers))
                if stored != count:
                    raise RuntimeError(f"{who}: broker stored {stored} of {count} messages")
                return rate

            return one_round

        best = best_of_rounds(rounds, {who: round_of(who, run) for who, run in runners.items()})
        figure = f"produce 100 B unbatched, {producers} producer(s) on one connection{brokers.on(broker_kind)} (msg/s)"
        rows.append({"figure": figure, **best, "messages": count})
    return rows


def _topic(broker: brokers.Broker, name: str, partitions: int) -> str:
    if partitions > 1:
        path = f"/admin/v2/persistent/public/default/{name}/partitions"
        broker.admin("PUT", path, json=partitions).raise_for_status()
    return name


def _stored(broker: brokers.Broker, topic: str, partitions: int) -> int:
    if partitions == 1:
        return broker.topic_stats(topic)["msgInCounter"]
    stats = broker.admin("GET", f"/admin/v2/persistent/public/default/{topic}/partitioned-stats").json()
    return stats["msgInCounter"]


def measure(
    messages: int, fsync: bool = False, rounds: int = DEFAULT_ROUNDS, broker_kind: str = "embedded"
) -> list[dict[str, Any]]:
    """Every case for both producers: one row per case with the best msg/s of each."""
    runners: dict[str, Callable[..., float]] = {"official": run_official, "ours": run_ours}
    rows = []
    cases = CASES if broker_kind == "embedded" else PULSAR_CASES
    with brokers.running(broker_kind, fsync) as broker:
        for size, partitions, codec in cases:
            count = messages if size == 100 else messages // 2
            payload = (b"0123456789abcdef" * (size // 16 + 1))[:size]

            def round_of(
                who: str,
                run: Callable[..., float],
                size: int = size,
                partitions: int = partitions,
                codec: str = codec,
                payload: bytes = payload,
                count: int = count,
            ) -> Callable[[int], float]:
                def one_round(index: int) -> float:
                    topic = _topic(broker, f"bench-{who}-{size}-{partitions}-{codec}-{index}", partitions)
                    rate = run(broker, topic, payload, count, codec)
                    stored = _stored(broker, topic, partitions)
                    if stored != count:
                        raise RuntimeError(f"{who}: broker stored {stored} of {count} messages")
                    return rate

                return one_round

            best = best_of_rounds(rounds, {who: round_of(who, run) for who, run in runners.items()})
            label = "1 KiB" if size == 1024 else f"{size} B"
            figure = f"produce {label}, {partitions} partition(s), {codec}{brokers.on(broker_kind)} (msg/s)"
            rows.append({"figure": figure, **best, "messages": count})
        rows += measure_unbatched(broker, messages, rounds, broker_kind)
    return rows


def main() -> None:
    """Run every case for both producers and print msg/s and the ratio ours/official."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages per 100-byte case (1 KiB: half)")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="interleaved rounds; the best counts")
    parser.add_argument("--fsync", action="store_true", help="keep the broker's fsync on")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--broker", choices=brokers.KINDS, default="embedded", help="the broker to run against")
    args = parser.parse_args()
    rows = measure(args.messages, args.fsync, args.rounds, args.broker)
    for row in rows:
        print(f"{row['figure']}: official {row['official']:,}  ours {row['ours']:,}  ratio {row['ours'] / row['official']:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"settings": SETTINGS, "fsync": args.fsync, "results": rows}, indent=2))

if __name__ == "__main__":
    main()
