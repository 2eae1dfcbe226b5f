"""Produce and consume with the official client: batching, message fields, compression, partitions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import pulsar
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.hashing import murmur3_32
from tests.support.official_client import (
    OfficialFactory,
    assert_nothing_more,
    create_partitioned,
    data_of,
    full_name,
    id_key,
    read_n,
    receive_n,
)
from tests.support.polling import wait_until

pytestmark = pytest.mark.interop


@pytest.mark.parametrize("batching", [False, True], ids=["batching-off", "batching-on"])
def test_produce_consume_round_trip(official: pulsar.Client, topic_name: str, batching: bool) -> None:
    consumer = official.subscribe(topic_name, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = official.create_producer(
        topic_name, batching_enabled=batching, batching_max_publish_delay_ms=50, batching_max_messages=1000
    )
    count = 30
    sent_ids = []
    for i in range(count):
        producer.send_async(
            f"message-{i}".encode(),
            lambda result, msg_id: sent_ids.append((result, msg_id)),
            properties={"index": str(i), "kind": "round-trip"},
            partition_key=f"key-{i % 3}",
            ordering_key=f"order-{i % 2}",
            event_timestamp=1_700_000_000_000 + i,
        )
    producer.flush()
    assert len(sent_ids) == count and all(result == pulsar.Result.Ok for result, _ in sent_ids)

    messages = receive_n(consumer, count)
    assert data_of(messages) == [f"message-{i}".encode() for i in range(count)]
    for i, message in enumerate(messages):
        assert message.properties() == {"index": str(i), "kind": "round-trip"}
        assert message.partition_key() == f"key-{i % 3}"
        assert message.ordering_key() == f"order-{i % 2}"
        assert message.event_timestamp() == 1_700_000_000_000 + i
        assert message.publish_timestamp() > 0
        assert message.producer_name() == producer.producer_name()
        assert message.redelivery_count() == 0
        assert message.topic_name() == full_name(topic_name)
    ids = [id_key(m.message_id()) for m in messages]
    assert ids == sorted(ids) and len(set(ids)) == count
    # The ids the producer got back name the same messages the consumer sees.
    assert sorted(id_key(msg_id) for _, msg_id in sent_ids) == ids
    if batching:
        assert any(m.message_id().batch_index() > 0 for m in messages), "no batch was formed"
        assert len({m.message_id().entry_id() for m in messages}) < count
    else:
        assert all(m.message_id().batch_index() == -1 for m in messages)
        assert len({m.message_id().entry_id() for m in messages}) == count
    for message in messages:
        consumer.acknowledge(message)
    assert_nothing_more(consumer.receive)


def test_many_messages_through_a_small_receiver_queue(official: pulsar.Client, topic_name: str) -> None:
    # Batches of 100 against a queue of 10: permits go negative and FLOW has to catch up, many times.
    consumer = official.subscribe(topic_name, "sub", receiver_queue_size=10)
    producer = official.create_producer(
        topic_name, batching_enabled=True, batching_max_messages=100, block_if_queue_full=True
    )
    count = 3000
    for i in range(count):
        producer.send_async(str(i).encode(), None)
    producer.flush()
    received = receive_n(consumer, count)
    assert [int(m.data()) for m in received] == list(range(count))
    consumer.acknowledge_cumulative(received[-1])
    assert_nothing_more(consumer.receive)


def test_sync_send_returns_ids_and_empty_payload(official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(topic_name, "sub")
    producer = official.create_producer(topic_name)
    first = producer.send(b"")
    second = producer.send(b"x" * 100_000)
    assert (first.entry_id(), second.entry_id()) == (0, 1)
    received = receive_n(consumer, 2)
    assert data_of(received) == [b"", b"x" * 100_000]
    assert [id_key(m.message_id()) for m in received] == [id_key(first), id_key(second)]


def test_message_just_under_the_size_limit(official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(topic_name, "sub")
    producer = official.create_producer(topic_name)
    # The broker advertises 5 MiB in CONNECTED; the client checks against that, so both sides agree.
    largest = bytes(range(256)) * (5 * 4096 - 4)
    producer.send(largest)
    assert consumer.receive(timeout_millis=5000).data() == largest
    with pytest.raises(pulsar.MessageTooBig):
        producer.send(largest + b"x" * 2048)


@pytest.mark.parametrize(
    "compression",
    [
        pulsar.CompressionType.NONE,
        pulsar.CompressionType.LZ4,
        pulsar.CompressionType.ZLib,
        pulsar.CompressionType.ZSTD,
        pulsar.CompressionType.SNAPPY,
    ],
    ids=lambda c: c.name,
)
def test_compression_with_batching(
    broker: BrokerProcess, official: pulsar.Client, topic_name: str, compression: pulsar.CompressionType
) -> None:
    consumer = official.subscribe(topic_name, "sub")
    producer = official.create_producer(
        topic_name, compression_type=compression, batching_enabled=True, batching_max_publish_delay_ms=50
    )
    payloads = [(f"payload {i} " * 100).encode() for i in range(40)]
    for payload in payloads:
        producer.send_async(payload, None, properties={"n": str(len(payload))})
    producer.flush()
    messages = receive_n(consumer, len(payloads))
    assert data_of(messages) == payloads
    assert [m.properties() for m in messages] == [{"n": str(len(p))} for p in payloads]
    stored = broker.topic_stats(topic_name)["storageSize"]
    raw = sum(len(p) for p in payloads)
    if compression == pulsar.CompressionType.NONE:
        assert stored > raw
    else:
        # The broker keeps what the producer compressed, verbatim.
        assert stored < raw // 2


def _read_partitions(client: pulsar.Client, topic: str, partitions: int, total: int) -> dict[int, list[str]]:
    """Read every partition from the start with a reader on ``<topic>-partition-i``."""
    keys: dict[int, list[str]] = {}
    for index in range(partitions):
        reader = client.create_reader(f"{topic}-partition-{index}", pulsar.MessageId.earliest)
        found = []
        while reader.has_message_available():
            found.append(reader.read_next(timeout_millis=5000).partition_key())
        keys[index] = found
        reader.close()
    assert sum(len(v) for v in keys.values()) == total
    return keys


def test_partitioned_topic_produce_consume_and_stats(
    broker: BrokerProcess, official: pulsar.Client, topic_name: str
) -> None:
    create_partitioned(broker, topic_name, 4)
    assert broker.admin("GET", f"/admin/v2/persistent/public/default/{topic_name}/partitions").json() == {
        "partitions": 4,
        "deleted": False,
    }
    assert official.get_topic_partitions(topic_name) == [full_name(f"{topic_name}-partition-{i}") for i in range(4)]
    consumer = official.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = official.create_producer(topic_name, batching_enabled=True, batching_max_publish_delay_ms=20)
    keys = [f"key-{i}" for i in range(16)]
    sent = [(keys[i % len(keys)], f"value-{i}".encode()) for i in range(80)]
    for key, value in sent:
        producer.send_async(value, None, partition_key=key)
    producer.flush()

    received = receive_n(consumer, len(sent))
    assert sorted((m.partition_key(), m.data()) for m in received) == sorted(sent)
    partitions_seen = {m.message_id().partition() for m in received}
    assert partitions_seen <= {0, 1, 2, 3} and len(partitions_seen) > 1
    assert {m.topic_name() for m in received} <= {full_name(f"{topic_name}-partition-{i}") for i in range(4)}
    # Per key, order is kept (one key, one partition).
    by_key = defaultdict(list)
    for message in received:
        by_key[message.partition_key()].append(int(message.data().split(b"-")[1]))
    assert all(values == sorted(values) for values in by_key.values())
    for message in received:
        consumer.acknowledge(message)

    def partitioned_stats() -> dict:
        return broker.admin("GET", f"/admin/v2/persistent/public/default/{topic_name}/partitioned-stats").json()

    stats = partitioned_stats()
    assert stats["metadata"]["partitions"] == 4
    assert sorted(stats["partitions"]) == [full_name(f"{topic_name}-partition-{i}") for i in range(4)]
    assert stats["msgInCounter"] == len(sent)
    assert sum(p["msgInCounter"] for p in stats["partitions"].values()) == len(sent)
    assert "sub" in stats["subscriptions"]
    wait_until(lambda: partitioned_stats()["subscriptions"]["sub"]["msgBacklog"] == 0)

    placement = _read_partitions(official, topic_name, 4, len(sent))
    # The default router is sticky per key: every key lives in exactly one partition, and the
    # consumer saw each message on the partition a reader finds it in.
    homes = {key: {p for p, found in placement.items() if key in found} for key in keys}
    assert all(len(home) == 1 for home in homes.values())
    assert all(m.message_id().partition() in homes[m.partition_key()] for m in received)


def test_reader_on_a_partitioned_topic(broker: BrokerProcess, official: pulsar.Client, topic_name: str) -> None:
    create_partitioned(broker, topic_name, 3)
    producer = official.create_producer(topic_name)
    for i in range(9):
        producer.send(f"m{i}".encode())
    reader = official.create_reader(topic_name, pulsar.MessageId.earliest)
    read = []
    while reader.has_message_available():
        read.append(reader.read_next(timeout_millis=5000))
    assert sorted(data_of(read)) == [f"m{i}".encode() for i in range(9)]
    assert {m.message_id().partition() for m in read} == {0, 1, 2}


def test_partitioned_placement_by_murmur3_router(
    broker: BrokerProcess, official: pulsar.Client, topic_name: str
) -> None:
    # The Python client has no hashing_scheme option and its C++ default is BoostHash, which is
    # neither of Pulsar's Java-compatible hashes; route with Murmur3 explicitly (Java's default).
    create_partitioned(broker, topic_name, 4)
    producer = official.create_producer(
        topic_name,
        batching_enabled=True,
        batching_type=pulsar.BatchingType.KeyBased,
        message_router=lambda message, partitions: murmur3_32(message.partition_key()) % partitions,
    )
    keys = [f"key{i:02d}" for i in range(20)] + ["k1", "key1", "key01"]
    for key in keys:
        producer.send_async(key.encode(), None, partition_key=key)
    producer.flush()
    placement = _read_partitions(official, topic_name, 4, len(keys))
    for index, found in placement.items():
        assert sorted(found) == sorted(k for k in keys if murmur3_32(k) % 4 == index)
    # The documented Murmur3 vectors, so the expectation itself is right.
    assert [murmur3_32(k) for k in ("k1", "key1", "key01")] == [2110152746, 462881061, 39696932]


def test_partitioned_topic_reader_on_one_partition_sees_only_it(
    broker: BrokerProcess, official: pulsar.Client, topic_name: str
) -> None:
    create_partitioned(broker, topic_name, 2)
    producer = official.create_producer(
        topic_name, message_router=lambda message, partitions: int(message.partition_key()) % partitions
    )
    for i in range(6):
        producer.send(f"m{i}".encode(), partition_key=str(i))
    reader = official.create_reader(f"{topic_name}-partition-1", pulsar.MessageId.earliest)
    assert data_of(read_n(reader, 3)) == [b"m1", b"m3", b"m5"]
    assert_nothing_more(reader.read_next)


def test_deduplication_answers_duplicates(
    broker_factory: Callable[..., BrokerProcess], official_factory: OfficialFactory
) -> None:
    dedup_broker = broker_factory("--dedup")
    client = official_factory(dedup_broker)
    producer = client.create_producer("dedup", producer_name="the-producer")
    first = [producer.send(f"m{i}".encode()) for i in range(5)]  # sequence ids 0..4
    assert [m.entry_id() for m in first] == list(range(5))
    producer.close()
    # The broker tells a returning producer where it stopped.
    producer = client.create_producer("dedup", producer_name="the-producer")
    assert producer.last_sequence_id() == 4
    assert producer.send(b"m5").entry_id() == 5
    producer.close()
    # Restarting at sequence id 2 resends 2..4: the broker stores nothing and answers (-1, -1).
    producer = client.create_producer("dedup", producer_name="the-producer", initial_sequence_id=1)
    duplicates = [producer.send(f"again{i}".encode()) for i in range(2, 6)]
    assert [(d.ledger_id(), d.entry_id()) for d in duplicates] == [(-1, -1)] * 4
    assert producer.send(b"m6").entry_id() == 6
    reader = client.create_reader("dedup", pulsar.MessageId.earliest)
    assert data_of(read_n(reader, 7)) == [f"m{i}".encode() for i in range(7)]
    assert_nothing_more(reader.read_next)


def test_exclusive_producer_access_mode(official: pulsar.Client, topic_name: str) -> None:
    """Pulsar's rules: a Shared producer beside an exclusive one is busy, a second Exclusive one is
    fenced; once the owner closes, the topic is open to all again."""
    owner = official.create_producer(topic_name, access_mode=pulsar.ProducerAccessMode.Exclusive)
    with pytest.raises(pulsar.ProducerBusy):
        official.create_producer(topic_name)
    with pytest.raises(pulsar.ProducerFenced):
        official.create_producer(topic_name, access_mode=pulsar.ProducerAccessMode.Exclusive)
    owner.send(b"still mine")
    owner.close()
    shared = official.create_producer(topic_name)
    shared.send(b"shared again")
    # An exclusive producer is refused while a shared one is there, fenced too.
    with pytest.raises(pulsar.ProducerFenced):
        official.create_producer(topic_name, access_mode=pulsar.ProducerAccessMode.Exclusive)
    shared.close()
    reader = official.create_reader(topic_name, pulsar.MessageId.earliest)
    assert data_of(read_n(reader, 2)) == [b"still mine", b"shared again"]


def test_exclusive_with_fencing_fences_for_good(official: pulsar.Client, topic_name: str) -> None:
    """ExclusiveWithFencing takes the topic over: the producer it fences stays fenced (its sends
    fail, even after the fencing producer is gone) and nothing it sends afterwards is stored."""
    owner = official.create_producer(topic_name, access_mode=pulsar.ProducerAccessMode.Exclusive)
    owner.send(b"before")
    fencer = official.create_producer(topic_name, access_mode=pulsar.ProducerAccessMode.ExclusiveWithFencing)
    with pytest.raises(pulsar.ProducerFenced):
        owner.send(b"fenced")
    fencer.send(b"from the fencer")
    fencer.close()
    with pytest.raises(pulsar.ProducerFenced):
        owner.send(b"still fenced")
    official.create_producer(topic_name).send(b"a newcomer")
    reader = official.create_reader(topic_name, pulsar.MessageId.earliest)
    assert data_of(read_n(reader, 3)) == [b"before", b"from the fencer", b"a newcomer"]
    assert_nothing_more(reader.read_next)


def test_string_schema_round_trip(official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(topic_name, "sub", schema=pulsar.schema.StringSchema())
    producer = official.create_producer(topic_name, schema=pulsar.schema.StringSchema())
    producer.send("héllo")
    assert consumer.receive(timeout_millis=5000).value() == "héllo"


def test_chunked_message_above_max_message_size(
    broker_factory: Callable[..., BrokerProcess], official_factory: OfficialFactory
) -> None:
    small = broker_factory("--max-message-size", "20000")
    client = official_factory(small)
    consumer = client.subscribe("chunks", "sub")
    big = bytes(range(256)) * 400  # 102400 bytes: six chunks
    plain = client.create_producer("chunks")
    with pytest.raises(pulsar.MessageTooBig):
        plain.send(big)
    plain.send(b"small")
    chunked = client.create_producer("chunks", chunking_enabled=True)
    chunked.send(big)
    assert consumer.receive(timeout_millis=5000).data() == b"small"
    assert consumer.receive(timeout_millis=5000).data() == big
    internal = small.admin("GET", "/admin/v2/persistent/public/default/chunks/internalStats").json()
    assert internal["entriesAddedCounter"] > 2
