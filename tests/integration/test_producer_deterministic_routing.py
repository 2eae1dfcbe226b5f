"""Deterministic routing and the per-partition sequence ids a producer reads back, on both brokers.

A producer that comes back under an earlier one's name (a retried task) finds, through
``last_sequence_ids()``, how far the earlier one got on each partition, and with a
``DeterministicRouter`` sends every message to the partition it went to before. Each test works
in a namespace of its own with deduplication on: the Pulsar instance is shared by the session.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_pulsar.client import Client, DeterministicRouter, MessageId, OutgoingMessage
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.hashing import java_string_hash

PARTITIONS = 3


@pytest.fixture
def admin(broker: Any) -> Iterator[PulsarAdmin]:
    with PulsarAdmin(broker.web_url) as made:
        yield made


@pytest.fixture
def deduplicated(admin: PulsarAdmin) -> str:
    """A namespace of the test's own with deduplication on."""
    namespace = f"public/routing-{uuid.uuid4().hex[:10]}"
    admin.create_namespace(namespace)
    admin.set_namespace_deduplication(namespace, True)
    return namespace


def _wait_for_deduplication(admin: PulsarAdmin, topics: list[str]) -> None:
    """Pulsar applies the namespace's policy to a loaded topic asynchronously."""
    deadline = time.monotonic() + 30
    for topic in topics:
        while admin.topic_stats(topic).get("deduplicationStatus") != "Enabled":
            assert time.monotonic() < deadline, f"deduplication never came on for {topic}"
            time.sleep(0.1)


def _send(producer: Any, messages: list[tuple[int, str | None]]) -> list[MessageId]:
    """send_async each (sequence id, key) with a payload naming it, flush, and return the ids in order."""
    ids: list[Any] = [None] * len(messages)
    for index, (sequence_id, key) in enumerate(messages):
        producer.send_async(
            b"m%d" % sequence_id, lambda result, message_id, index=index: ids.__setitem__(index, message_id),
            partition_key=key, sequence_id=sequence_id,
        )
    producer.flush()
    assert None not in ids
    return ids


def test_a_producer_under_the_same_name_reads_each_partition_s_last_sequence_id_and_routes_alike(
    broker: Any, admin: PulsarAdmin, deduplicated: str
) -> None:
    topic = f"persistent://{deduplicated}/orders"
    admin.create_partitioned_topic(topic, PARTITIONS)
    partitions = [f"{topic}-partition-{index}" for index in range(PARTITIONS)]
    _wait_for_deduplication(admin, partitions)
    router = DeterministicRouter(messages_per_partition=2)
    messages = [(sequence_id, None) for sequence_id in range(8)] + [(8, "key1"), (9, "BB")]
    with Client(broker.service_url) as client:
        first = client.create_producer(topic, producer_name="retried", message_router=router, batching_max_publish_delay_ms=1)
        assert first.last_sequence_ids() == dict.fromkeys(partitions, -1)
        ids = _send(first, messages)
        expected = [router(OutgoingMessage(b"", partition_key=key, sequence_id=number), PARTITIONS) for number, key in messages]
        assert [message_id.partition() for message_id in ids] == expected
        # Runs of two sequence ids round the partitions; both keys hash to partition 0.
        assert expected == [0, 0, 1, 1, 2, 2, 0, 0, 0, 0]
        assert java_string_hash("key1") % PARTITIONS == java_string_hash("BB") % PARTITIONS == 0
        highest = dict(zip(partitions, [9, 3, 5], strict=True))
        assert first.last_sequence_ids() == highest
        first.close()

        again = client.create_producer(topic, producer_name="retried", message_router=DeterministicRouter(messages_per_partition=2))
        assert again.last_sequence_ids() == highest, "the broker reports what it stored under the name, per partition"
        resent = _send(again, messages)
        assert [(message_id.partition(), message_id.ledger_id(), message_id.entry_id()) for message_id in resent] == [
            (partition, -1, -1) for partition in expected
        ], "each message went where it went before, and the broker knew it"
        again.close()


def test_a_non_partitioned_producer_reports_its_topic(broker: Any, admin: PulsarAdmin, deduplicated: str) -> None:
    topic = f"persistent://{deduplicated}/plain"
    admin.create_topic(topic)
    _wait_for_deduplication(admin, [topic])
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic, producer_name="plain", batching_enabled=False)
        assert producer.last_sequence_ids() == {topic: -1}
        producer.send(b"x", sequence_id=41)
        assert producer.last_sequence_ids() == {topic: 41} and producer.last_sequence_id() == 41
        producer.close()
        assert client.create_producer(topic, producer_name="plain").last_sequence_ids() == {topic: 41}
