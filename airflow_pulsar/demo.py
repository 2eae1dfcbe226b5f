"""``make demo``: start the embedded broker, create a topic, and make a produce/consume round trip
with the bundled client.

The broker's data and log stay under ``var/demo/`` so they can be looked at afterwards.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import airflow_pulsar.client as pulsar
from airflow_pulsar.client.standalone.process import BrokerProcess

DATA_DIR = Path("var/demo/broker")
TOPIC = "demo-events"
SUBSCRIPTION = "demo"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the round trip and print what happened; exits non-zero if anything is missing."""
    broker = BrokerProcess(DATA_DIR).start()
    print(f"broker running: {broker.service_url} (admin {broker.web_url}, data {DATA_DIR.resolve()})")
    try:
        broker.admin("PUT", f"/admin/v2/persistent/public/default/{TOPIC}/partitions", content="4")
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
        consumer = client.subscribe(TOPIC, SUBSCRIPTION, initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(TOPIC, batching_enabled=True)
        sent = [f"event-{i}-{time.time_ns()}".encode() for i in range(100)]
        for i, payload in enumerate(sent):
            producer.send_async(payload, None, partition_key=f"user-{i % 7}")
        producer.flush()
        stats = broker.admin("GET", f"/admin/v2/persistent/public/default/{TOPIC}/partitioned-stats").json()
        print(f"produced {len(sent)} messages; backlog of '{SUBSCRIPTION}': {stats['subscriptions'][SUBSCRIPTION]['msgBacklog']}")
        received = set()
        while len(received) < len(sent):
            message = consumer.receive(10_000)
            received.add(message.data())
            consumer.acknowledge(message)
        client.close()
        time.sleep(0.2)  # acks are grouped for 100 ms before they reach the broker
        stats = broker.admin("GET", f"/admin/v2/persistent/public/default/{TOPIC}/partitioned-stats").json()
        backlog = stats["subscriptions"][SUBSCRIPTION]["msgBacklog"]
        print(f"consumed and acknowledged {len(received)} messages; backlog now {backlog}")
        for name, part in sorted(stats["partitions"].items()):
            print(f"  {name}: {part['msgInCounter']} messages in")
        ok = received == set(sent)
        print("round trip OK" if ok else "round trip FAILED: messages missing")
        return 0 if ok else 1
    finally:
        broker.stop()
        print(f"broker stopped; its log is {broker.log_path.resolve()}")


if __name__ == "__main__":
    sys.exit(main())
