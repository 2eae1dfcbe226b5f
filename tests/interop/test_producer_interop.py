"""Our producer, the official client's consumer: batches, every codec, chunks, keyed partitions."""

from __future__ import annotations

import os
import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.hashing import java_string_hash
from airflow_pulsar.client.producer import BatchingType, CompressionType
from tests.support.official_client import assert_nothing_more, data_of, read_n, receive_n
from tests.support.polling import wait_until

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


# Partition keys in send order, None for a message without one.
KEYED_SENDS = ["k1", "k2", "k1", None, "k3", "k2", None, "k1"]


def _entries_as_sent(producer: Any, admin: PulsarAdmin, topic: str) -> list[tuple[str | None, int | None]]:
    """Send :data:`KEYED_SENDS` within one batching delay, then flush; each entry written, in
    order, as (its partition key, its messages)."""
    ids: list[Any] = []
    for index, key in enumerate(KEYED_SENDS):
        keyed = {} if key is None else {"partition_key": key}
        producer.send_async(b"m%d" % index, lambda result, message_id: ids.append(message_id), **keyed)
    producer.flush()
    wait_until(lambda: len(ids) == len(KEYED_SENDS), "every send's callback")
    entries = sorted({(message_id.ledger_id(), message_id.entry_id()) for message_id in ids})
    peeked = [admin.get_message_by_id(topic, ledger, entry) for ledger, entry in entries]
    return [(entry.partition_key, entry.batch_size) for entry in peeked]


@pytest.mark.parametrize("batching", ["Default", "KeyBased"])
def test_batch_entries_carry_the_keys_the_official_producer_writes(
    broker: Any, our_client: Client, official: pulsar.Client, topic_name: str, batching: str
) -> None:
    """A Key_Shared subscription dispatches a whole entry by its metadata's key: the first
    message's, as both producers write it; key-based batching makes an entry per key."""
    settings: dict[str, Any] = {"batching_enabled": True, "batching_max_publish_delay_ms": 60_000}
    theirs = official.create_producer(f"{topic_name}-official", batching_type=getattr(pulsar.BatchingType, batching), **settings)
    ours = our_client.create_producer(f"{topic_name}-ours", batching_type=BatchingType[batching], **settings)
    with PulsarAdmin(broker.web_url) as admin:
        written = _entries_as_sent(theirs, admin, f"{topic_name}-official")
        assert _entries_as_sent(ours, admin, f"{topic_name}-ours") == written
    assert written == {
        "Default": [("k1", 8)],
        # One entry per key, in the order of each key's first message.
        "KeyBased": [("k1", 3), ("k2", 2), (None, 2), ("k3", 1)],
    }[batching]


def test_key_based_batches_are_all_stored_on_a_topic_with_deduplication(
    broker: Any, our_client: Client, official: pulsar.Client
) -> None:
    """The key batches of one flush have interleaved sequence ids: sent as the official producer
    sends them, none is taken for a duplicate of the one before it."""
    namespace = f"public/key-based-{uuid.uuid4().hex[:10]}"
    stored = {}
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_namespace(namespace)
        admin.set_namespace_deduplication(namespace, True)
        for name, client, batching_type in (
            ("official", official, pulsar.BatchingType.KeyBased),
            ("ours", our_client, BatchingType.KeyBased),
        ):
            topic = f"persistent://{namespace}/{name}"
            admin.create_topic(topic)
            wait_until(lambda topic=topic: admin.topic_stats(topic).get("deduplicationStatus") == "Enabled", f"deduplication on {topic}")
            producer = client.create_producer(
                topic, batching_enabled=True, batching_type=batching_type, batching_max_publish_delay_ms=60_000
            )
            for index, key in enumerate(["a", "b", "a", "b", "a", "c"]):
                producer.send_async(b"m%d" % index, None, partition_key=key)
            producer.flush()
            reader = official.create_reader(topic, pulsar.MessageId.earliest)
            stored[name] = data_of(read_n(reader, 6))
            assert_nothing_more(reader.read_next)
    # Each key's batch in the order of its first message.
    assert stored["ours"] == stored["official"] == [b"m0", b"m2", b"m4", b"m1", b"m3", b"m5"]


def test_a_resumed_producer_keeps_stored_sequence_ids_out_of_its_new_batches(
    broker: Any, our_client: Client, official: pulsar.Client
) -> None:
    """A producer started again under the same name resends from its last receipt, with batching on.
    The broker takes a batch for a duplicate by its first sequence id: the resent messages it
    already holds go in batches of their own, so the new ones are all stored (a batch of 2..7 after
    0..3 were stored lost 4..7)."""
    namespace = f"public/resumed-{uuid.uuid4().hex[:10]}"
    topic = f"persistent://{namespace}/stream"
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_namespace(namespace)
        admin.set_namespace_deduplication(namespace, True)
        admin.create_topic(topic)
        wait_until(lambda: admin.topic_stats(topic).get("deduplicationStatus") == "Enabled", f"deduplication on {topic}")
    earlier = official.create_producer(topic, producer_name="resumed", batching_enabled=False)
    for seq in range(4):
        earlier.send(b"m%d" % seq, sequence_id=seq)
    earlier.close()
    producer = our_client.create_producer(topic, producer_name="resumed", batching_max_publish_delay_ms=60_000)
    assert producer.last_sequence_id() == 3
    receipts: dict[int, Any] = {}
    for seq in range(2, 8):
        producer.send_async(b"m%d" % seq, lambda result, message_id, seq=seq: receipts.__setitem__(seq, message_id), sequence_id=seq)
    producer.flush()
    assert [receipts[seq].ledger_id() for seq in (2, 3)] == [-1, -1]  # answered as duplicates
    assert all(receipts[seq].ledger_id() >= 0 for seq in range(4, 8))
    reader = official.create_reader(topic, pulsar.MessageId.earliest)
    assert data_of(read_n(reader, 8)) == [b"m%d" % seq for seq in range(8)]
    assert_nothing_more(reader.read_next)
