"""Broker publish rate: messages per second the standalone broker accepts, fsync on and off.

Each client (the official ``pulsar-client`` with its C++ core, and ours) sends 100-byte messages
asynchronously to its own topic, batching off and on; the rate is messages per second until the
last receipt, the best of ``--rounds`` interleaved rounds (a fresh topic each), and the broker's
own counter proves every message arrived. Unbatched, each message is one entry: the broker's
group commit is what keeps up. Usage::

    python bench/broker_publish.py [--messages N] [--rounds R] [--no-fsync]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import pulsar
from rounds import DEFAULT_ROUNDS, best_of_rounds

import airflow_pulsar.client as ours
from airflow_pulsar.broker.process import BrokerProcess

PAYLOAD = b"x" * 100
PRODUCER_SETTINGS: dict[str, Any] = {
    "batching_max_messages": 1000,
    "batching_max_publish_delay_ms": 10,
    "max_pending_messages": 50_000,
    "block_if_queue_full": True,
}


def _open(kind: str, service_url: str) -> Any:
    if kind == "official":
        return pulsar.Client(service_url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    return ours.Client(service_url, operation_timeout_seconds=30)


def publish_rate(broker: BrokerProcess, kind: str, topic: str, messages: int, batching: bool) -> float:
    """Send ``messages`` asynchronously and return messages per second until the last receipt.

    Receipt callbacks are left out: the official client runs each one under the GIL on its IO
    thread, which would measure the callback rather than the broker.
    """
    client = _open(kind, broker.service_url)
    try:
        producer = client.create_producer(topic, batching_enabled=batching, **PRODUCER_SETTINGS)
        start = time.perf_counter()
        for _ in range(messages):
            producer.send_async(PAYLOAD, None)
        producer.flush()
        elapsed = time.perf_counter() - start
    finally:
        client.close()
    stored = broker.topic_stats(topic)["msgInCounter"]
    if stored != messages:
        raise RuntimeError(f"{kind}: broker stored {stored} of {messages} messages")
    return messages / elapsed


def measure(messages: int, fsync: bool, rounds: int = DEFAULT_ROUNDS) -> list[dict[str, Any]]:
    """Batching off (a fifth of ``messages``) and on, driven by each client; one row per mode (best rounds)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as data_dir:
        broker = BrokerProcess(Path(data_dir), *([] if fsync else ["--no-fsync"])).start()
        try:
            for batching, count in ((False, messages // 5), (True, messages)):
                best = best_of_rounds(rounds, {
                    kind: lambda index, kind=kind, batching=batching, count=count: publish_rate(
                        broker, kind, f"bench-publish-{kind}-{batching}-{index}", count, batching
                    )
                    for kind in ("official", "ours")
                })
                rows.append({
                    "figure": f"broker publish 100 B, batching {'on' if batching else 'off'}, fsync {'on' if fsync else 'off'} (msg/s)",
                    **best, "messages": count,
                })
        finally:
            broker.stop()
    return rows


def main() -> None:
    """Print the publish rate with batching off and on."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="interleaved rounds; the best counts")
    parser.add_argument("--no-fsync", action="store_true")
    args = parser.parse_args()
    for row in measure(args.messages, not args.no_fsync, args.rounds):
        print(f"{row['figure']}: driven by official {row['official']:,}  by ours {row['ours']:,}")


if __name__ == "__main__":
    main()
