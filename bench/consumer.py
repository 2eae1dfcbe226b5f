"""Consumer throughput: our consumer against the official client's, on the same backlog, one run.

The official producer (batching on, 100-byte messages) writes a backlog; then each consumer
drains it on its own subscription with the same settings (receiver queue 1000, Exclusive, an
individual ack per message), with ``receive`` and with ``batch_receive``: the best of
``--rounds`` interleaved rounds, each on a fresh subscription. A second backlog, written with
batching off (one entry per message), is drained with ``receive``. Usage::

    python bench/consumer.py [--messages N] [--rounds R]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import brokers
import pulsar
from rounds import DEFAULT_ROUNDS, best_of_rounds

from airflow_pulsar.client import consumer as ours_consumer
from airflow_pulsar.client.client import Client

PAYLOAD = b"x" * 100
TOPIC = "bench-consume"
UNBATCHED_TOPIC = "bench-consume-unbatched"
BATCH_LIMIT = 1000


def produce_backlog(client: pulsar.Client, messages: int, topic: str = TOPIC, batching: bool = True) -> None:
    """Write the backlog with the official producer, batching on unless told."""
    producer = client.create_producer(
        topic, batching_enabled=batching, batching_max_messages=1000, batching_max_publish_delay_ms=10,
        max_pending_messages=5000 if not batching else 50_000, block_if_queue_full=True,
    )
    for _ in range(messages):
        producer.send_async(PAYLOAD, None)
    producer.flush()
    producer.close()


def drain(consumer: Any, messages: int, batch: bool) -> float:
    """Receive and acknowledge ``messages``; messages per second."""
    start = time.perf_counter()
    received = 0
    if batch:
        while received < messages:
            for message in consumer.batch_receive():
                consumer.acknowledge(message)
                received += 1
    else:
        while received < messages:
            consumer.acknowledge(consumer.receive(10_000))
            received += 1
    return messages / (time.perf_counter() - start)


def run(name: str, subscribe: Callable[[str, bool], Any], messages: int, batch: bool) -> float:
    consumer = subscribe(f"{name}-{'batch' if batch else 'receive'}", batch)
    rate = drain(consumer, messages, batch)
    consumer.close()
    return rate


def measure(messages: int, rounds: int = DEFAULT_ROUNDS, broker_kind: str = "embedded") -> list[dict[str, Any]]:
    """Drain the same backlog with each client, with receive and with batch_receive (best round each)."""
    rows = []
    with brokers.running(broker_kind, fsync=False) as broker:
        official = pulsar.Client(broker.service_url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        ours = Client(broker.service_url, operation_timeout_seconds=30)
        produce_backlog(official, messages)
        produce_backlog(official, messages, UNBATCHED_TOPIC, batching=False)

        def theirs_subscribe(topic: str) -> Callable[[str, bool], Any]:
            return lambda subscription, batch: official.subscribe(
                topic, subscription, initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=1000,
                batch_receive_policy=pulsar.ConsumerBatchReceivePolicy(BATCH_LIMIT, -1, 100),
            )

        def ours_subscribe(topic: str) -> Callable[[str, bool], Any]:
            return lambda subscription, batch: ours.subscribe(
                topic, subscription, initial_position=ours_consumer.InitialPosition.Earliest, receiver_queue_size=1000,
                batch_receive_policy=ours_consumer.ConsumerBatchReceivePolicy(BATCH_LIMIT, -1, 100),
            )

        for topic, batch, label in ((TOPIC, False, "backlog"), (TOPIC, True, "backlog"), (UNBATCHED_TOPIC, False, "unbatched backlog")):
            mode = "batch_receive" if batch else "receive"
            best = best_of_rounds(rounds, {
                "official": lambda index, topic=topic, batch=batch: run(f"official-{index}", theirs_subscribe(topic), messages, batch),
                "ours": lambda index, topic=topic, batch=batch: run(f"ours-{index}", ours_subscribe(topic), messages, batch),
            })
            figure = f"consume {len(PAYLOAD)} B {label} of {messages}, {mode}{brokers.on(broker_kind)} (msg/s)"
            rows.append({"figure": figure, **best})
        ours.close()
        official.close()
    return rows


def main() -> None:
    """Print msg/s of both consumers and the ratio ours/official."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="interleaved rounds; the best counts")
    parser.add_argument("--broker", choices=brokers.KINDS, default="embedded", help="the broker to run against")
    args = parser.parse_args()
    for row in measure(args.messages, args.rounds, args.broker):
        print(f"{row['figure']}: official {row['official']:,}  ours {row['ours']:,}  ratio {row['ours'] / row['official']:.2f}")

if __name__ == "__main__":
    main()
