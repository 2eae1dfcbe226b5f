"""Broker publish rate: messages per second the standalone broker accepts from the official client.

Runs the official ``pulsar-client`` producer (C++ core) against our broker process with 100-byte
messages, batching off and on, fsync on by default. Usage::

    python bench/broker_publish.py [--messages N] [--no-fsync]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pulsar

from airflow_pulsar.client.standalone.process import BrokerProcess

PAYLOAD = b"x" * 100


def publish_rate(broker: BrokerProcess, topic: str, messages: int, batching: bool) -> float:
    """Send ``messages`` asynchronously and return messages per second until the last receipt.

    Receipt callbacks are left out: the official client runs each one under the GIL on its IO
    thread, which would measure the callback rather than the broker. The broker's own counter
    then proves every message arrived.
    """
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=30, io_threads=1)
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
        batching_max_messages=1000,
        batching_max_publish_delay_ms=10,
        max_pending_messages=50_000,
        block_if_queue_full=True,
    )
    start = time.perf_counter()
    for _ in range(messages):
        producer.send_async(PAYLOAD, None)
    producer.flush()
    elapsed = time.perf_counter() - start
    client.close()
    stored = broker.topic_stats(topic)["msgInCounter"]
    if stored != messages:
        raise RuntimeError(f"broker stored {stored} of {messages} messages")
    return messages / elapsed


def main() -> None:
    """Print the publish rate with batching off and on."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--no-fsync", action="store_true")
    args = parser.parse_args()
    extra = ["--no-fsync"] if args.no_fsync else []
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as data_dir:
        broker = BrokerProcess(Path(data_dir), *extra).start()
        try:
            fsync = "off" if args.no_fsync else "on"
            for batching, count in ((False, args.messages // 5), (True, args.messages)):
                rate = publish_rate(broker, f"bench-publish-{batching}", count, batching)
                print(f"official client -> broker, 100 B, batching {'on ' if batching else 'off'}, fsync {fsync}: "
                      f"{rate:,.0f} msg/s ({count} messages)")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
