"""The messages of received entries as columns: the common layout read off the bytes gives what
the exact way (the client's read_batch and protobuf) gives, on every layout made here and on
corrupted bytes."""

from __future__ import annotations

import itertools
import random

import pytest

from airflow_pulsar.client.consumer import ReceivedEntry
from airflow_pulsar.client.protocol.PulsarApi_pb2 import KeyValue, MessageMetadata, SingleMessageMetadata
from airflow_pulsar.client.protocol.wire import encode_single
from airflow_pulsar.spark.job import entry_messages as module
from airflow_pulsar.spark.job.entry_messages import EntryMessages, entry_messages

PROPERTIES = [None, {"i": "1"}, {"i": "1", "é": "ü€", "": ""}, {"long": "v" * 200}, {"nul": "a\x00b"}]
KEYS = [None, "", "k7", "ключ", "k" * 130, "a\x00b"]
EVENT_TIMES = [None, 0, 1_700_000_000_123, (1 << 64) - 1]
SEQUENCE_IDS = [None, 0, 5, (1 << 63) - 1]
PAYLOADS = [b"", b"x", b"{}" * 100, bytes(range(256)) * 80]


def batch_entry(payload: bytes, count: int, wanted: int | None = None) -> ReceivedEntry:
    return ReceivedEntry(-1, 3, 4, 0, MessageMetadata(num_messages_in_batch=count), payload, count, wanted)


def outcome(read, entry: ReceivedEntry) -> EntryMessages | str:
    try:
        return read(entry)
    except Exception as exc:  # both ways must fail alike where the exact way fails
        return type(exc).__name__


def same_as_exact(entry: ReceivedEntry) -> EntryMessages | str:
    got = outcome(entry_messages, entry)
    assert got == outcome(module._read_exactly, entry)
    return got


@pytest.mark.parametrize(("properties", "key"), list(itertools.product(PROPERTIES, KEYS)))
def test_the_layouts_producers_write_are_read_as_protobuf_reads_them(properties, key) -> None:
    messages = [
        encode_single(payload, properties=properties, partition_key=key, event_time=event_time, sequence_id=sequence_id)
        for payload, event_time, sequence_id in zip(itertools.cycle(PAYLOADS), EVENT_TIMES, SEQUENCE_IDS)
    ]
    entry = batch_entry(b"".join(messages), len(messages))
    got = same_as_exact(entry)
    assert isinstance(got, EntryMessages) and got.indexes == [0, 1, 2, 3]
    texts = [key or "", *(properties or {}).keys(), *(properties or {}).values()]
    if all(len(text.encode()) < 100 for text in texts):  # one-byte lengths: the fast way takes it
        assert module._read_common_batch(entry.payload, entry.batch_size) == got


@pytest.mark.parametrize(
    "extra",
    [
        {"null_value": True}, {"ordering_key": b"o"}, {"partition_key_b64_encoded": True, "partition_key": "aw=="},
        {"null_partition_key": True},
    ],
)
def test_other_fields_are_read_the_exact_way(extra) -> None:
    entry = batch_entry(encode_single(b"v", sequence_id=1) + encode_single(b"w", properties={"p": "q"}, **extra), 2)
    got = same_as_exact(entry)
    assert isinstance(got, EntryMessages) and len(got.indexes) == 2


def test_fields_out_of_order_compaction_and_filters_are_read_the_exact_way() -> None:
    single = SingleMessageMetadata(payload_size=1, partition_key="k", properties=[KeyValue(key="a", value="b")])
    reordered = single.SerializeToString()
    reordered = reordered[-2:] + reordered[:-2]  # payload_size first: still the same metadata
    assert SingleMessageMetadata.FromString(reordered) == single
    framed = len(reordered).to_bytes(4, "big") + reordered + b"v"
    assert same_as_exact(batch_entry(framed * 2, 2)).keys == ["k", "k"]  # type: ignore[union-attr]
    compacted = SingleMessageMetadata(payload_size=1, compacted_out=True).SerializeToString()
    entry = batch_entry(len(compacted).to_bytes(4, "big") + compacted + b"v" + encode_single(b"w"), 2)
    assert same_as_exact(entry).indexes == [1]  # type: ignore[union-attr]
    plain = encode_single(b"a", partition_key="k") * 3
    assert same_as_exact(batch_entry(plain, 3, wanted=0b101)).indexes == [0, 2]  # type: ignore[union-attr]


def test_corrupted_batches_read_as_the_exact_way_reads_them() -> None:
    rng = random.Random(20)
    good = b"".join(
        encode_single(b"p%d" % i, properties={"i": str(i)}, partition_key=f"k{i}", event_time=i, sequence_id=i) for i in range(5)
    )
    for _ in range(3000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        cut = rng.choice([len(data), rng.randrange(len(data))])
        same_as_exact(batch_entry(bytes(data[:cut]), rng.choice([4, 5, 6])))


def test_an_entry_of_one_message_reads_the_entry_metadata() -> None:
    metadata = MessageMetadata(partition_key="k", event_time=9, properties=[KeyValue(key="a", value="b")], null_value=True)
    entry = ReceivedEntry(-1, 3, 4, 0, metadata, b"", 0, None)
    assert entry_messages(entry) == EntryMessages([-1], ["k"], [None], [9], [1], ["a"], ["b"])
