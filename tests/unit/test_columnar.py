"""The client's columnar batch reader: the messages of received entries as columns. The common
layout read many messages at a time (numpy) gives what the exact way (the client's read_batch and
protobuf) gives, on every layout made here, on entries of several kinds in one take, and on
corrupted bytes; without numpy, the client reads every entry the exact way."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

import pytest

from airflow_pulsar.client.entries import MessageLists, MessageSpans, ReceivedEntry, RunColumns, read_columns, text
from airflow_pulsar.client.protocol import columnar as module
from airflow_pulsar.client.protocol.batch import encode_single
from airflow_pulsar.client.protocol.common_layout import CommonBatches
from airflow_pulsar.client.protocol.PulsarApi_pb2 import KeyValue, MessageMetadata, SingleMessageMetadata

PROPERTIES = [None, {"i": "1"}, {"i": "1", "é": "ü€", "": ""}, {"long": "v" * 200}, {"nul": "a\x00b"}]
KEYS = [None, "", "k7", "ключ", "k" * 130, "a\x00b"]
EVENT_TIMES = [None, 0, 1_700_000_000_123, (1 << 64) - 1]
SEQUENCE_IDS = [None, 0, 5, (1 << 63) - 1]
PAYLOADS = [b"", b"x", b"{}" * 100, bytes(range(256)) * 80]


def batch_entry(payload: bytes, count: int, wanted: int | None = None, entry_id: int = 4) -> ReceivedEntry:
    return ReceivedEntry(-1, 3, entry_id, 0, MessageMetadata(num_messages_in_batch=count), payload, count, wanted)


def column_lists(messages: MessageLists | MessageSpans) -> list[list[Any]]:
    """The columns as lists, texts read as the consumer reads them."""
    if isinstance(messages, MessageSpans):
        strings = messages.strings
        indexes, keys, values, event_times, counts, pair_keys, pair_values = (
            messages.indexes.tolist(), strings(messages.keys), strings(messages.values), messages.event_times.tolist(),
            messages.property_counts.tolist(), strings(messages.property_keys), strings(messages.property_values),
        )
    else:
        indexes, keys, values, event_times, counts, pair_keys, pair_values = messages
    texts = [[text(value) for value in column] for column in (keys, pair_keys, pair_values)]
    return [indexes, texts[0], values, event_times, counts, texts[1], texts[2]]


def as_lists(runs: Iterable[RunColumns]) -> dict[str, list[Any]]:
    lists: dict[str, list[Any]] = {name: [] for name in MessageLists._fields}
    rows = [0]
    for run in runs:
        for name, column in zip(MessageLists._fields, column_lists(run.messages), strict=True):
            lists[name] += column
        for count in run.counts:
            rows.append(rows[-1] + count)
    return {**lists, "rows": rows}


def exactly(entries: list[ReceivedEntry]) -> dict[str, list[Any]]:
    return as_lists([module._read_exactly(entries)])


def outcome(read, entries: list[ReceivedEntry]) -> dict[str, list[Any]] | str:
    try:
        return read(entries)
    except Exception as exc:  # both ways must fail alike where the exact way fails
        return type(exc).__name__


def same_outcome(*entries: ReceivedEntry) -> dict[str, list[Any]] | str:
    """What both ways read of ``entries``, or the exception both raise."""
    got = outcome(lambda entries: as_lists(read_columns(entries)), list(entries))
    assert got == outcome(exactly, list(entries))
    return got


def same_as_exact(*entries: ReceivedEntry) -> dict[str, list[Any]]:
    """What both ways read of ``entries``, which they read without an error."""
    got = same_outcome(*entries)
    assert isinstance(got, dict), got
    return got


def read_in_common(*entries: ReceivedEntry) -> bool:
    """Whether the common layout's reading takes every one of ``entries``."""
    return bool(CommonBatches(entries).good.all())


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


def test_without_numpy_the_client_reads_every_entry_the_exact_way() -> None:
    # numpy and pyarrow are optional for the client: blocked, the reader still gives every message.
    script = """
import sys
sys.modules["numpy"] = sys.modules["pyarrow"] = None
from airflow_pulsar.client.entries import MessageLists, ReceivedEntry, RunColumns, read_columns
from airflow_pulsar.client.protocol.batch import encode_single
from airflow_pulsar.client.protocol.PulsarApi_pb2 import MessageMetadata
payload = encode_single(b"v0", partition_key="k", properties={"p": "q"}) + encode_single(b"v1", event_time=7)
entry = ReceivedEntry(-1, 3, 4, 0, MessageMetadata(num_messages_in_batch=2), payload, 2, None)
assert list(read_columns([entry])) == [RunColumns([2], MessageLists([0, 1], ["k", ""], [b"v0", b"v1"], [0, 7], [1, 0], ["p"], ["q"]))]
print("read")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "read"), done.stderr
    payload = encode_single(b"v0", partition_key="k", properties={"p": "q"}) + encode_single(b"v1", event_time=7)
    with_numpy = list(read_columns([batch_entry(payload, 2)]))
    assert [type(run.messages) for run in with_numpy] == [MessageSpans]
    assert as_lists(with_numpy) == {
        "indexes": [0, 1], "keys": ["k", ""], "values": [b"v0", b"v1"], "event_times": [0, 7], "property_counts": [1, 0],
        "property_keys": ["p"], "property_values": ["q"], "rows": [0, 2],
    }
