"""Partitions added to a topic while producers and consumers are open on it.

The broker gives the new partitions the topic's subscriptions, at their end, as Pulsar does; the
client's partition watch opens a producer and a consumer on each new partition, so messages routed
there are published and received with the others.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_pulsar.client import Client, ConsumerType
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.hashing import java_string_hash
from tests.support.polling import wait_until

WATCH_SECONDS = 0.5


def _key_for(partition: int, partitions: int) -> str:
    """A partition key that the default hashing scheme routes to ``partition`` of ``partitions``."""
    return next(key for key in (f"key-{i}" for i in range(10_000)) if java_string_hash(key) % partitions == partition)


def test_new_partitions_get_the_topics_subscriptions_at_their_end(broker: Any, topic_name: str) -> None:
    with PulsarAdmin(broker.web_url) as admin, Client(broker.service_url) as client:
        admin.create_partitioned_topic(topic_name, 2)
        client.subscribe(topic_name, "kept").close()
        producer = client.create_producer(topic_name, batching_enabled=False)
        for index in range(4):
            producer.send(b"before %d" % index)
        admin.update_partitioned_topic(topic_name, 3)
        assert admin.partition_count(topic_name) == 3
        stats = admin.topic_stats(f"{topic_name}-partition-2")
        assert list(stats["subscriptions"]) == ["kept"]
        assert stats["subscriptions"]["kept"]["msgBacklog"] == 0
        with pytest.raises(ValueError, match="partitions must be a positive int"):
            admin.update_partitioned_topic(topic_name, 0)


def test_open_producer_and_consumer_take_the_partitions_the_topic_gains(broker: Any, topic_name: str) -> None:
    with (
        PulsarAdmin(broker.web_url) as admin,
        Client(broker.service_url, partitions_update_interval_seconds=WATCH_SECONDS) as client,
    ):
        admin.create_partitioned_topic(topic_name, 2)
        consumer = client.subscribe(topic_name, "sub", consumer_type=ConsumerType.Shared)
        producer = client.create_producer(topic_name, batching_enabled=False)
        sent = [b"before"]
        producer.send(sent[0], partition_key=_key_for(1, 2))

        admin.update_partitioned_topic(topic_name, 4)
        newest = _key_for(3, 4)

        def routed_to_the_new_partition() -> bool:
            # Until the producer knows of partition 3 the key's hash picks one of the first two.
            sent.append(b"probe %d" % len(sent))
            return producer.send(sent[-1], partition_key=newest).partition() == 3

        wait_until(routed_to_the_new_partition, "the producer to route to partition 3", 20)
        for index in range(20):
            sent.append(b"after %d" % index)
            assert producer.send(sent[-1], partition_key=_key_for(index % 4, 4)).partition() == index % 4

        received = []
        while len(received) < len(sent):
            message = consumer.receive(timeout_millis=10_000)
            received.append(message.data())
            consumer.acknowledge(message)
        # Every message once: the consumer joined partitions 2 and 3 and missed none of theirs.
        assert sorted(received) == sorted(sent)
        consumer.close()
