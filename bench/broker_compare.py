"""Our broker against Apache Pulsar standalone, both driven by the official client, in one run.

For fsync on and off (Pulsar's ``journalSyncData``), each broker is started fresh and measured
for: start time (process start to serving), publish rate of 100-byte messages with batching off
and on (best of interleaved rounds, each on a fresh topic, checked against the broker's counter),
the rate at which the official consumer drains a batched backlog, and the broker's resident
memory afterwards. In each row the "official" column is Apache Pulsar and "ours" is our broker.
Usage::

    python bench/broker_compare.py [--messages N] [--rounds R]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import brokers
import pulsar
from broker_publish import publish_rate
from consumer import TOPIC, drain, produce_backlog
from rounds import DEFAULT_ROUNDS

PEER = "pulsar"
OURS = "embedded"


def _rss_mib(broker: Any) -> float:
    assert broker.process is not None
    for line in Path(f"/proc/{broker.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS line")


def _consume_rate(broker: Any, messages: int) -> float:
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=30,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        produce_backlog(client, messages)
        consumer = client.subscribe(TOPIC, "bench", initial_position=pulsar.InitialPosition.Earliest,
                                    receiver_queue_size=1000)
        return drain(consumer, messages, batch=False)
    finally:
        client.close()


def _one_broker(kind: str, fsync: bool, messages: int, rounds: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix=f"bench-compare-{kind}-") as data_dir:
        began = time.perf_counter()
        broker = brokers.start(kind, Path(data_dir), fsync)
        figures["start"] = time.perf_counter() - began
        try:
            for batching, count in ((False, messages // 5), (True, messages)):
                figures[f"publish-{batching}"] = max(
                    publish_rate(broker, "official", f"compare-{batching}-{index}", count, batching)
                    for index in range(rounds)
                )
            figures["consume"] = _consume_rate(broker, messages)
            figures["rss"] = _rss_mib(broker)
        finally:
            broker.stop()
    return figures


def measure(messages: int, rounds: int = DEFAULT_ROUNDS) -> list[dict[str, Any]]:
    """Rows for fsync on and off: publish (batching off and on), consume, start time, RSS."""
    rows: list[dict[str, Any]] = []
    for fsync in (True, False):
        sync = f"fsync {'on' if fsync else 'off'}"
        peer, ours = (_one_broker(kind, fsync, messages, rounds) for kind in (PEER, OURS))
        for batching in (False, True):
            key = f"publish-{batching}"
            rows.append({
                "figure": f"brokers: official client publish 100 B, batching {'on' if batching else 'off'}, {sync}, "
                          "ours vs Apache Pulsar (msg/s)",
                "official": round(peer[key]), "ours": round(ours[key]),
            })
        rows.append({"figure": f"brokers: official client consume batched backlog of {messages}, {sync}, "
                               "ours vs Apache Pulsar (msg/s)",
                     "official": round(peer["consume"]), "ours": round(ours["consume"])})
        rows.append({"figure": f"brokers: start to serving, {sync}, ours vs Apache Pulsar (s)",
                     "official": round(peer["start"], 2), "ours": round(ours["start"], 2), "lower_is_better": True})
        rows.append({"figure": f"brokers: RSS after the runs, {sync}, ours vs Apache Pulsar (MiB)",
                     "official": round(peer["rss"]), "ours": round(ours["rss"]), "lower_is_better": True})
    return rows


def main() -> None:
    """Print every row: Apache Pulsar, ours, ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="publish rounds per broker; the best counts")
    args = parser.parse_args()
    for row in measure(args.messages, args.rounds):
        print(f"{row['figure']}: Apache Pulsar {row['official']:,}  ours {row['ours']:,}  "
              f"ratio {row['ours'] / row['official']:.2f}")


if __name__ == "__main__":
    main()
