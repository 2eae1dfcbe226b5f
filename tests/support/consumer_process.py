"""A consumer process for the crash tests to kill with -9.

    python tests/support/consumer_process.py SERVICE_URL TOPIC SUBSCRIPTION CONSUMER_TYPE COUNT

It subscribes (from the earliest message), receives COUNT messages, acknowledges every other one
with a broker receipt (batch index acks on, so a half-acknowledged batch keeps its acked half),
prints one JSON line ``{"received": [...], "acked": [...]}`` (payloads as
text) and then waits, holding the rest unacknowledged, until it is killed.
"""

from __future__ import annotations

import json
import sys
import time

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import ConsumerType, InitialPosition


def main(service_url: str, topic: str, subscription: str, consumer_type: str, count: int) -> None:
    client = Client(service_url, operation_timeout_seconds=10)
    consumer = client.subscribe(
        topic,
        subscription,
        consumer_type=ConsumerType[consumer_type],
        initial_position=InitialPosition.Earliest,
        ack_receipt_enabled=True,
        batch_index_ack_enabled=True,
    )
    received, acked = [], []
    for index in range(count):
        message = consumer.receive(10_000)
        received.append(message.data().decode())
        if index % 2 == 0:
            consumer.acknowledge(message)  # returns once the broker confirmed it
            acked.append(message.data().decode())
    print(json.dumps({"received": received, "acked": acked}), flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
