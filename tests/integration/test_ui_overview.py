"""The Pulsar page's refresh of a namespace (airflow_pulsar/ui/overview.py), on both brokers: the
message counts, the oldest message's age from the count's own entry lookups, and the entries a
partitioned dead-letter topic stores, from its partitions' internal stats read in one call."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from airflow_pulsar.client import Client, InitialPosition
from airflow_pulsar.client.admin import AsyncPulsarAdmin, PulsarAdmin
from airflow_pulsar.ui.overview import TopicFigures, read_namespaces
from airflow_pulsar.ui.recount import CountMemo

SUB = "page"
PARTITIONS = 3
PER_PARTITION = 12  # in batches of 4: 3 entries a partition
DEAD_LETTERS = 5


def test_a_refresh_counts_each_backlog_and_its_oldest_message(broker: Any, our_client: Client, topic_name: str) -> None:
    namespace = f"public/page-{time.monotonic_ns() % 1_000_000_000}"
    topic = f"persistent://{namespace}/{topic_name}"
    dead_letter = f"{topic}-{SUB}-DLQ"
    with PulsarAdmin(broker.web_url, timeout_seconds=30) as admin:
        admin.create_namespace(namespace)
        admin.create_partitioned_topic(topic, PARTITIONS)
        admin.create_subscription(topic, SUB, InitialPosition.Earliest)
        admin.create_partitioned_topic(dead_letter, 2)
        for index in range(PARTITIONS):
            producer = our_client.create_producer(
                f"{topic}-partition-{index}", batching_max_messages=4, batching_max_publish_delay_ms=5000
            )
            for message in range(PER_PARTITION):
                producer.send_async(f"m{message}".encode(), None)
            producer.flush()
            producer.close()
        dead = our_client.create_producer(dead_letter, batching_enabled=False)
        for index in range(DEAD_LETTERS):
            dead.send(f"dead {index}".encode())
        dead.close()
        peeked = min(admin.peek_message(f"{topic}-partition-{i}", SUB).publish_time_ms for i in range(PARTITIONS))

    async def refresh(memo: CountMemo) -> tuple[TopicFigures, ...]:
        async with AsyncPulsarAdmin(broker.web_url, timeout_seconds=30) as admin:
            topics, _ = await read_namespaces(admin, [namespace], memo)
        return topics

    figures = {figure.name: figure for figure in asyncio.run(refresh(CountMemo()))}
    assert set(figures) == {topic, dead_letter}
    (sub,) = figures[topic].subscriptions
    assert (sub.messages, sub.entries, sub.exact, sub.error) == (PARTITIONS * PER_PARTITION, PARTITIONS * 3, True, None)
    assert sub.oldest_age is not None and abs(sub.oldest_age - (time.time() - peeked / 1000)) < 5
    assert figures[dead_letter].partitions == 2 and figures[dead_letter].stored_entries == DEAD_LETTERS

    # The age comes with the count, from its lookup of each partition's oldest unacknowledged entry.
    with PulsarAdmin(broker.web_url, timeout_seconds=30) as admin:
        counted = admin.message_backlog(topic, SUB)
    assert counted.oldest_publish_ms == peeked
    assert all(part.oldest_publish_ms is not None for part in counted.partitions)
