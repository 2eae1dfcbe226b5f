"""Compacting a topic and reading its latest value per key.

Run with both URLs of a broker and a topic:
``python compaction.py pulsar://127.0.0.1:6650 http://127.0.0.1:8080 persistent://public/default/rates``.
"""

from __future__ import annotations

import sys
import time

from airflow_pulsar.client import Client, MessageId
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.exceptions import Timeout


def main(service_url: str, admin_url: str, topic: str) -> list[str]:
    """Publish rates by currency, compact, and read the compacted view: one value per key."""
    client = Client(service_url)
    try:
        producer = client.create_producer(topic)
        for currency, rate in [("usd", "1.1"), ("eur", "0.9"), ("usd", "1.0"), ("gbp", "0.8"), ("eur", "0.93")]:
            producer.send(rate.encode(), partition_key=currency)
        producer.send(b"", partition_key="gbp")  # an empty payload is a tombstone: gbp goes
        with PulsarAdmin(admin_url) as admin:
            admin.trigger_compaction(topic)
            while admin.compaction_status(topic)["status"] == "RUNNING":
                time.sleep(0.1)
        reader = client.create_reader(topic, MessageId.earliest, is_read_compacted=True)
        latest = []
        try:
            while True:
                message = reader.read_next(timeout_millis=2000)
                latest.append(f"{message.partition_key()}={message.data().decode()}")
        except Timeout:
            pass
        return sorted(latest)
    finally:
        client.close()


if __name__ == "__main__":
    print(main(*sys.argv[1:4]))
