"""The messages of received entries as columns: the common layout read many messages at a time
gives what the exact way (the client's read_batch and protobuf) gives, on every layout made here,
on entries of several kinds in one take, and on corrupted bytes."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from airflow_pulsar.client.consumer import ReceivedEntry
from airflow_pulsar.client.protocol.batch import encode_single
from airflow_pulsar.client.protocol.PulsarApi_pb2 import KeyValue, MessageMetadata, SingleMessageMetadata
from airflow_pulsar.spark.job import entry_messages as module
from airflow_pulsar.spark.job.entry_messages import EntryColumns, MessageColumns, entry_columns

PROPERTIES = [None, {"i": "1"}, {"i": "1", "é": "ü€", "": ""}, {"long": "v" * 200}, {"nul": "a\x00b"}]
KEYS = [None, "", "k7", "ключ", "k" * 130, "a\x00b"]
EVENT_TIMES = [None, 0, 1_700_000_000_123, (1 << 64) - 1]
SEQUENCE_IDS = [None, 0, 5, (1 << 63) - 1]
PAYLOADS = [b"", b"x", b"{}" * 100, bytes(range(256)) * 80]


def batch_entry(payload: bytes, count: int, wanted: int | None = None, entry_id: int = 4) -> ReceivedEntry:
    return ReceivedEntry(-1, 3, entry_id, 0, MessageMetadata(num_messages_in_batch=count), payload, count, wanted)


def as_lists(columns: EntryColumns) -> dict[str, list[Any]]:
    messages = columns.messages
    lists = {name: getattr(messages, name) for name in MessageColumns._fields}
    lists = {name: column.tolist() if hasattr(column, "tolist") else column.to_pylist() for name, column in lists.items()}
    return {**lists, "rows": columns.rows.tolist()}


def exactly(entries: list[ReceivedEntry]) -> dict[str, list[Any]]:
    parts: list[MessageColumns] = []
    counts: list[int] = []
    module._read_exactly(entries, parts, counts)
    return as_lists(EntryColumns(MessageColumns.concat(parts), module.np.cumsum([0, *counts])))


def outcome(read, entries: list[ReceivedEntry]) -> dict[str, list[Any]] | str:
    try:
        return read(entries)
    except Exception as exc:  # both ways must fail alike where the exact way fails
        return type(exc).__name__


def same_outcome(*entries: ReceivedEntry) -> dict[str, list[Any]] | str:
    """What both ways read of ``entries``, or the exception both raise."""
    got = outcome(lambda entries: as_lists(entry_columns(entries)), list(entries))
    assert got == outcome(exactly, list(entries))
    return got


def same_as_exact(*entries: ReceivedEntry) -> dict[str, list[Any]]:
    """What both ways read of ``entries``, which they read without an error."""
    got = same_outcome(*entries)
    assert isinstance(got, dict), got
    return got


def read_in_common(*entries: ReceivedEntry) -> bool:
    """Whether the common layout's reading takes every one of ``entries``."""
    return bool(module._CommonBatches(entries).good.all())


@pytest.mark.parametrize(("properties", "key"), list(itertools.product(PROPERTIES, KEYS)))
def test_the_layouts_producers_write_are_read_as_protobuf_reads_them(properties, key) -> None:
    messages = [
        encode_single(payload, properties=properties, partition_key=key, event_time=event_time, sequence_id=sequence_id)
        for payload, event_time, sequence_id in zip(itertools.cycle(PAYLOADS), EVENT_TIMES, SEQUENCE_IDS)
    ]
    entry = batch_entry(b"".join(messages), len(messages))
    got = same_as_exact(entry)
    assert got["indexes"] == [0, 1, 2, 3] and got["rows"] == [0, 4]
    texts = [key or "", *(properties or {}).keys(), *(properties or {}).values()]
    if all(len(text.encode()) < 100 for text in texts):  # one-byte lengths: the common way takes it
        assert read_in_common(entry)


def test_a_take_of_many_kinds_of_entries_is_read_in_order() -> None:
    rng = random.Random(7)

    def batch(entry_id: int, count: int, **extra: Any) -> ReceivedEntry:
        messages = [
            encode_single(
                rng.choice(PAYLOADS[:3]) + b"%d" % i,
                **{"properties": {f"p{j}": str(i) for j in range(i % 3)}, "partition_key": f"k{i}" if i % 2 else None,
                   "event_time": i or None, "sequence_id": i, **extra},
            )
            for i in range(count)
        ]
        return batch_entry(b"".join(messages), count, entry_id=entry_id)

    common = [batch(entry_id, rng.randint(1, 40)) for entry_id in range(6)]
    assert read_in_common(*common)
    one_message = ReceivedEntry(-1, 3, 10, 0, MessageMetadata(partition_key="solo"), b"single", 0, None)
    filtered = batch_entry(encode_single(b"a") * 3, 3, wanted=0b110, entry_id=11)
    null_value = batch(12, 3, null_value=True)
    binary = batch_entry(encode_single(bytes(300) + b"\x00\x00\x01", sequence_id=1) * 2, 2, entry_id=13)
    long_metadata = batch(14, 2, properties={"long": "v" * 90, "more": "w" * 90, "most": "x" * 90})
    emptied = batch_entry(encode_single(b"z") * 2, 2, wanted=0, entry_id=15)
    take = [*common[:3], one_message, filtered, common[3], null_value, binary, long_metadata, common[4], emptied, common[5]]
    got = same_as_exact(*take)
    # The filters leave out one message and two, every other entry gives each of its messages.
    assert got["rows"][-1] == sum(entry.batch_size or 1 for entry in take) - 1 - 2
    assert got["rows"][11] == got["rows"][10]
    assert got["keys"][got["rows"][3]] == "solo" and got["values"][got["rows"][6]] is None
    assert read_in_common(binary, long_metadata)  # zero bytes in values and a metadata over 255 bytes


@pytest.mark.parametrize(
    "extra",
    [
        {"null_value": True}, {"ordering_key": b"o"}, {"partition_key_b64_encoded": True, "partition_key": "aw=="},
        {"null_partition_key": True},
    ],
)
def test_other_fields_are_read_the_exact_way(extra) -> None:
    entry = batch_entry(encode_single(b"v", sequence_id=1) + encode_single(b"w", properties={"p": "q"}, **extra), 2)
    assert not read_in_common(entry)
    assert len(same_as_exact(entry)["indexes"]) == 2


def test_fields_out_of_order_compaction_and_filters_are_read_the_exact_way() -> None:
    single = SingleMessageMetadata(payload_size=1, partition_key="k", properties=[KeyValue(key="a", value="b")])
    reordered = single.SerializeToString()
    reordered = reordered[-2:] + reordered[:-2]  # payload_size first: still the same metadata
    assert SingleMessageMetadata.FromString(reordered) == single
    framed = len(reordered).to_bytes(4, "big") + reordered + b"v"
    assert same_as_exact(batch_entry(framed * 2, 2))["keys"] == ["k", "k"]
    compacted = SingleMessageMetadata(payload_size=1, compacted_out=True).SerializeToString()
    entry = batch_entry(len(compacted).to_bytes(4, "big") + compacted + b"v" + encode_single(b"w"), 2)
    assert same_as_exact(entry)["indexes"] == [1]
    plain = encode_single(b"a", partition_key="k") * 3
    assert same_as_exact(batch_entry(plain, 3, wanted=0b101))["indexes"] == [0, 2]


def test_text_that_is_not_utf8_reads_as_the_consumer_reads_it() -> None:
    # proto2 does not check UTF-8: a producer may send any bytes as a key or a property.
    single = SingleMessageMetadata(
        payload_size=1, partition_key="K", properties=[KeyValue(key="P", value="V")]
    ).SerializeToString()
    single = single.replace(b"K", b"\xff").replace(b"P", b"\xfe").replace(b"V", b"\xc3")
    good = batch_entry(encode_single(b"a", partition_key="fine"), 1, entry_id=1)
    bad = batch_entry(len(single).to_bytes(4, "big") + single + b"v", 1, entry_id=2)
    assert read_in_common(good, bad), "the common layout's reading is the one under test"
    read = same_as_exact(good, bad)
    assert read["keys"] == ["fine", "\ufffd"]
    assert (read["property_keys"], read["property_values"]) == (["\ufffd"], ["\ufffd"])
    assert read["values"] == [b"a", b"v"]


def test_corrupted_batches_read_as_the_exact_way_reads_them() -> None:
    rng = random.Random(20)
    good = b"".join(
        encode_single(b"p%d" % i, properties={"i": str(i)}, partition_key=f"k{i}", event_time=i, sequence_id=i) for i in range(5)
    )
    intact = batch_entry(good, 5, entry_id=1)
    for _ in range(3000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        cut = rng.choice([len(data), rng.randrange(len(data))])
        corrupted = batch_entry(bytes(data[:cut]), rng.choice([4, 5, 6]), entry_id=2)
        same_outcome(corrupted)
        same_outcome(intact, corrupted, intact)


def test_an_entry_of_one_message_reads_the_entry_metadata() -> None:
    metadata = MessageMetadata(partition_key="k", event_time=9, properties=[KeyValue(key="a", value="b")], null_value=True)
    entry = ReceivedEntry(-1, 3, 4, 0, metadata, b"", 0, None)
    assert same_as_exact(entry) == {
        "indexes": [-1], "keys": ["k"], "values": [None], "event_times": [9], "property_counts": [1],
        "property_keys": ["a"], "property_values": ["b"], "rows": [0, 1],
    }
