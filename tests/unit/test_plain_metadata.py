"""Plain entries told off their metadata's bytes: which metadata share a learned shape, and that
a consumer's messages read the same whether their metadata was parsed at once or on first read."""

from __future__ import annotations

import pytest

from airflow_pulsar.client.consumer.ack_grouping import AckGroupingTracker
from airflow_pulsar.client.consumer.chunks import ChunkedMessageCollector
from airflow_pulsar.client.consumer.unpacker import EntryUnpacker, StartFilter
from airflow_pulsar.client.protocol.frames import encode_entry, message_frame
from airflow_pulsar.client.protocol.plain_metadata import MAX_LEARNED, PlainShapes, shape_pattern
from airflow_pulsar.client.protocol.PulsarApi_pb2 import CommandMessage, KeyValue, MessageIdData, MessageMetadata
from airflow_pulsar.client.timer import Timer

TIMER = Timer("test-plain-metadata")


def metadata(**fields: object) -> bytes:
    values: dict[str, object] = {"producer_name": "standalone-0-3", "sequence_id": 5, "publish_time": 1_700_000_000_000}
    values.update(fields)
    return MessageMetadata(**values).SerializeToString()  # type: ignore[arg-type]


def shapes_of(learned: bytes) -> PlainShapes:
    shapes = PlainShapes()
    shapes.learn(learned)
    return shapes


@pytest.mark.parametrize(
    "fields",
    [
        {"sequence_id": 123_456_789, "publish_time": 1_800_000_000_123},
        {"sequence_id": 0, "publish_time": 1},
        {"uncompressed_size": 70_000},
        {"event_time": 1_799_999_999_999},
    ],
    ids=["sequence-and-time", "one-byte-varints", "uncompressed-size", "event-time"],
)
def test_metadata_differing_in_the_variable_fields_share_the_shape(fields: dict[str, object]) -> None:
    learned = metadata(uncompressed_size=100, event_time=5)
    entry = encode_entry(metadata(**{"uncompressed_size": 100, "event_time": 5, **fields}), b"payload")
    assert entry[shapes_of(learned).payload_at(entry) :] == b"payload"


@pytest.mark.parametrize(
    "other",
    [
        metadata(producer_name="standalone-0-4"),
        metadata(num_messages_in_batch=1),
        metadata(compression=1, uncompressed_size=100),
        metadata(num_chunks_from_msg=2),
        metadata(partition_key="k"),
        metadata(properties=[KeyValue(key="a", value="b")]),
        metadata()[:-1],  # the publish time's varint cut short
    ],
    ids=["other-producer", "batch", "compressed", "chunk", "keyed", "properties", "truncated"],
)
def test_metadata_of_another_shape_is_left_to_the_parser(other: bytes) -> None:
    assert shapes_of(metadata()).payload_at(encode_entry(other, b"payload")) == 0


def test_metadata_without_a_sequence_id_or_publish_time_has_no_shape() -> None:
    assert shape_pattern(b"\x0a\x01p\x18\x01") is None  # a producer name and a publish time only
    assert shape_pattern(b"\x0a\x05ab") is None  # a name longer than its bytes
    assert shape_pattern(metadata()) is not None


def test_metadata_that_keep_changing_shape_are_left_to_the_parser() -> None:
    """Past MAX_LEARNED shapes (keys that differ from one message to the next, say) no pattern is tried any more."""
    shapes = PlainShapes()
    for key in range(MAX_LEARNED):
        shapes.learn(metadata(partition_key=f"key-{key}"))
    last = encode_entry(metadata(partition_key=f"key-{MAX_LEARNED - 1}"), b"payload")
    assert shapes.payload_at(last) > 0
    shapes.learn(metadata(partition_key="one more"))
    assert shapes.payload_at(last) == 0


def test_nothing_learned_matches_nothing() -> None:
    assert PlainShapes().payload_at(encode_entry(metadata(), b"payload")) == 0


def test_messages_read_alike_whether_their_metadata_was_parsed_at_once_or_on_first_read() -> None:
    unpacker = EntryUnpacker("t", 0, AckGroupingTracker(lambda pending: True, TIMER, group_time=3600), ChunkedMessageCollector(10, True),
                             StartFilter(None, False))
    frames = [
        message_frame(CommandMessage(consumer_id=1, message_id=MessageIdData(ledgerId=3, entryId=entry)),
                      encode_entry(metadata(sequence_id=entry, publish_time=1_700_000_000_000 + entry, event_time=entry), b"m%d" % entry))
        for entry in range(3)
    ]
    messages, permits = unpacker.unpack_run(None, 1, frames)
    assert permits == 3
    assert [type(m.delivery._metadata) for m in messages] == [MessageMetadata, bytes, bytes]  # the first one taught the shape
    assert [(m.data(), m.publish_timestamp(), m.event_timestamp(), m.producer_name(), m.delivery.metadata.sequence_id)
            for m in messages] == [(b"m%d" % n, 1_700_000_000_000 + n, n, "standalone-0-3", n) for n in range(3)]
