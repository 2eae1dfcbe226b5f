"""Our producer, the official client's consumer: batches, every codec, chunks, keyed partitions."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.hashing import java_string_hash
from airflow_pulsar.client.producer import CompressionType
from interop_helpers import assert_nothing_more, data_of, receive_n

pytestmark = pytest.mark.interop


@pytest.fixture
def our_client(broker: Any) -> Iterator[Client]:
    with Client(broker.service_url, operation_timeout_seconds=5) as made:
        yield made


@pytest.mark.parametrize("compression", list(CompressionType), ids=lambda c: c.name)
def test_batches_in_every_codec_reach_the_official_consumer(
    our_client: Client, official: pulsar.Client, topic_name: str, compression: CompressionType
) -> None:
    consumer = official.subscribe(topic_name, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = our_client.create_producer(topic_name, compression_type=compression, batching_max_messages=64)
    count = 300
    for i in range(count):
        producer.send_async(
            b"payload-%d " % i * 8,
            lambda r, m: None,
            properties={"i": str(i)},
            partition_key=f"k{i % 5}",
            ordering_key=f"o{i % 2}",
            event_timestamp=1_700_000_000_000 + i,
        )
    producer.flush()
    stats = producer.stats()
    assert stats["messages"] == count and stats["mean_batch_size"] > 1
    if compression != CompressionType.NONE:
        assert stats["compression_ratio"] < 0.5
    messages = receive_n(consumer, count)
    assert data_of(messages) == [b"payload-%d " % i * 8 for i in range(count)]
    for i, message in enumerate(messages):
        assert message.properties() == {"i": str(i)}
        assert message.partition_key() == f"k{i % 5}"
        assert message.ordering_key() == f"o{i % 2}"
        assert message.event_timestamp() == 1_700_000_000_000 + i
        assert message.producer_name() == producer.producer_name()
    assert any(m.message_id().batch_index() > 0 for m in messages)
    assert_nothing_more(consumer.receive)


@pytest.mark.parametrize("dedup", [False, True], ids=["dedup-off", "dedup-on"])
def test_chunked_messages_are_reassembled(broker_factory: Any, official_factory: Any, topic_name: str, dedup: bool) -> None:
    # With dedup on, every chunk carries the message's sequence id and none may count as a duplicate.
    small = broker_factory("--max-message-size", "20000", *(["--dedup"] if dedup else []))
    consumer = official_factory(small).subscribe(topic_name, "sub", initial_position=pulsar.InitialPosition.Earliest)
    big = [os.urandom(70_000), os.urandom(45_000)]
    with Client(small.service_url, operation_timeout_seconds=5) as ours:
        producer = ours.create_producer(topic_name, batching_enabled=False, chunking_enabled=True)
        first = producer.send(big[0], properties={"part": "one"})
        producer.send(b"small in between")
        producer.send(big[1])
        assert small.topic_stats(topic_name)["msgInCounter"] >= 4 + 1 + 3  # one SEND per chunk
    messages = receive_n(consumer, 3)
    assert data_of(messages) == [big[0], b"small in between", big[1]]
    assert messages[0].properties() == {"part": "one"}
    assert first.entry_id() == 3, "the id of a chunked message is its last chunk's"


def test_compressed_chunks_are_reassembled(broker_factory: Any, official_factory: Any, topic_name: str) -> None:
    small = broker_factory("--max-message-size", "20000")
    consumer = official_factory(small).subscribe(topic_name, "sub", initial_position=pulsar.InitialPosition.Earliest)
    payload = os.urandom(30_000) + b"z" * 30_000
    with Client(small.service_url, operation_timeout_seconds=5) as ours:
        producer = ours.create_producer(
            topic_name, batching_enabled=False, chunking_enabled=True, compression_type=CompressionType.ZSTD
        )
        producer.send(payload)
    assert consumer.receive(5000).data() == payload


def test_keyed_messages_on_four_partitions_keep_order_and_java_hash(
    our_client: Client, official: pulsar.Client, broker: Any, topic_name: str
) -> None:
    response = broker.admin("PUT", f"/admin/v2/persistent/public/default/{topic_name}/partitions", json=4)
    assert response.status_code in (200, 204)
    consumer = official.subscribe(topic_name, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = our_client.create_producer(topic_name, batching_max_messages=20, compression_type=CompressionType.LZ4)
    count = 400
    for i in range(count):
        producer.send_async(b"%d" % i, lambda r, m: None, partition_key=f"user-{i % 37}")
    producer.flush()
    messages = receive_n(consumer, count)
    by_partition: dict[int, list[int]] = defaultdict(list)
    for message in messages:
        key = message.partition_key()
        partition = message.message_id().partition()
        assert partition == java_string_hash(key) % 4, key
        assert message.topic_name().endswith(f"-partition-{partition}")
        by_partition[partition].append(int(message.data()))
    assert sorted(sum(by_partition.values(), [])) == list(range(count))
    for values in by_partition.values():
        assert values == sorted(values), "per-partition order must be send order"
    assert len(by_partition) > 1
