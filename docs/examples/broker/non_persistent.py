"""Non-persistent topics and pattern subscriptions by domain on the embedded broker.

Run with the service URL of a broker: ``python non_persistent.py pulsar://127.0.0.1:6650``.
"""

from __future__ import annotations

import re
import sys

from airflow_pulsar.client import Client, RegexSubscriptionMode


def main(service_url: str) -> list[str]:
    """Publish to a non-persistent topic before and after a consumer subscribes; read it, and a
    persistent topic, through one pattern consumer of both domains. Returns what was received."""
    client = Client(service_url)
    try:
        ticks = "non-persistent://public/default/example-ticks"
        orders = "persistent://public/default/example-orders"
        producer = client.create_producer(ticks)
        producer.send(b"nobody listens yet")  # dropped: no subscription is connected
        consumer = client.subscribe(ticks, "dashboard")
        producer.send(b"tick 1")
        received = [consumer.receive(timeout_millis=5000).data().decode()]

        order_producer = client.create_producer(orders)
        # Both topics exist now, so the pattern consumer finds both at once.
        both = client.subscribe(
            re.compile("persistent://public/default/example-.*"),
            "everything",
            regex_subscription_mode=RegexSubscriptionMode.AllTopics,
        )
        order_producer.send(b"order 1")
        producer.send(b"tick 2")
        received += sorted(both.receive(timeout_millis=5000).data().decode() for _ in range(2))
        return received
    finally:
        client.close()


if __name__ == "__main__":
    print(main(sys.argv[1]))
