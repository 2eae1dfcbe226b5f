"""Helpers of the consumer integration tests (their clients are fixtures of tests/integration/conftest.py).

The official ``pulsar-client`` producer creates the data, so these tests depend on our consumer
only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulsar

from airflow_pulsar.client.admin import PulsarAdmin

TIMEOUT_MS = 5000


def produce(
    official: pulsar.Client,
    topic: str,
    count: int,
    *,
    batch: int = 0,
    key: Callable[[int], str] | None = None,
    **producer_settings: Any,
) -> list[pulsar.MessageId]:
    """Send ``m0``..``m{count-1}``; with ``batch`` > 0, in batches of exactly that many."""
    producer = official.create_producer(
        topic,
        batching_enabled=batch > 0,
        batching_max_messages=max(batch, 2),
        batching_max_publish_delay_ms=60_000,
        **producer_settings,
    )
    ids: list[Any] = [None] * count
    for i in range(count):
        keywords: dict[str, Any] = {"properties": {"i": str(i)}, "event_timestamp": 1_000_000 + i}
        if key is not None:
            keywords["partition_key"] = key(i)
        producer.send_async(f"m{i}".encode(), _store(ids, i), **keywords)
        if batch and (i + 1) % batch == 0:
            producer.flush()
    producer.flush()
    producer.close()
    return ids


def _store(ids: list[Any], index: int) -> Callable[[Any, Any], None]:
    def callback(result: Any, message_id: Any) -> None:
        ids[index] = message_id

    return callback


def receive_all(consumer: Any, count: int, timeout_ms: int = TIMEOUT_MS) -> list[Any]:
    """Exactly ``count`` messages, each within the timeout."""
    return [consumer.receive(timeout_ms) for _ in range(count)]


def nothing_more(receive: Callable[[int], Any], timeout_ms: int = 300) -> bool:
    """Whether ``receive`` times out (no further message)."""
    from airflow_pulsar.client.exceptions import Timeout

    try:
        receive(timeout_ms)
    except Timeout:
        return True
    return False


def data(messages: list[Any]) -> list[bytes]:
    """Payloads, in order."""
    return [m.data() for m in messages]


def backlog(broker: Any, topic: str, subscription: str) -> int:
    """The subscription's backlog in messages, each message of a batch counted (exact from the
    broker entry index, on both brokers); Pulsar's own msgBacklog counts entries."""
    with PulsarAdmin(broker.web_url, timeout_seconds=30) as admin:
        return admin.message_backlog(topic, subscription).messages


def broker_consumer(broker: Any, topic: str, subscription: str) -> dict[str, Any]:
    """The broker's stats entry of the subscription's only consumer."""
    (consumer,) = broker.topic_stats(topic)["subscriptions"][subscription]["consumers"]
    return consumer


def key_of(message_id: Any) -> tuple[int, int, int, int]:
    """(ledger, entry, partition, batch index) of either client's MessageId."""
    return (message_id.ledger_id(), message_id.entry_id(), message_id.partition(), message_id.batch_index())
