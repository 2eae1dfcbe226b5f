"""The hand-written protobuf codecs, cross-checked against the generated classes on random inputs."""

from __future__ import annotations

import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.batch import (
    BatchFormatError,
    parse_single,
    read_batch,
    single_header,
    single_header_with,
)
from airflow_pulsar.client.protocol.frames import encode_plain_metadata
from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    BaseCommand,
    BrokerEntryMetadata,
    KeyValue,
    MessageIdData,
    MessageMetadata,
    SingleMessageMetadata,
)
from airflow_pulsar.client.protocol.wire import varint

T = BaseCommand.Type
U64 = st.integers(min_value=0, max_value=2**64 - 1)
I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TEXT = st.text(max_size=8)


def _reference(payload_size, sequence_id=None, properties=None, partition_key=None, ordering_key=None,
               event_time=None, b64=False, null_value=False, null_partition_key=False, compacted_out=False):
    meta = SingleMessageMetadata(payload_size=payload_size)
    if properties:
        meta.properties.extend(KeyValue(key=k, value=v) for k, v in properties.items())
    for name, value in (("partition_key", partition_key), ("ordering_key", ordering_key),
                        ("event_time", event_time), ("sequence_id", sequence_id)):
        if value is not None:
            setattr(meta, name, value)
    for name, flag in (("partition_key_b64_encoded", b64), ("null_value", null_value),
                       ("null_partition_key", null_partition_key), ("compacted_out", compacted_out)):
        if flag:
            setattr(meta, name, True)
    return meta.SerializeToString()


def _framed(meta: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(meta)) + meta + payload


def _decoded(data: bytes, count: int, unacked: int | None = None) -> list[tuple[int, bytes, SingleMessageMetadata]]:
    return read_batch(data, count, lambda _, index, payload, single: (index, payload, parse_single(single)), None, unacked)


@given(U64)
def test_varint_matches_protobuf(value):
    encoded = varint(value)
    assert b"\x08" + encoded == BrokerEntryMetadata(broker_timestamp=value).SerializeToString()


def test_varint_refuses_what_protobuf_cannot_hold():
    for bad in (-1, 2**64):
        with pytest.raises(ValueError):
            varint(bad)


@given(
    st.integers(min_value=0, max_value=2**31 - 1),
    st.one_of(st.none(), U64),
    st.one_of(st.none(), st.dictionaries(TEXT, TEXT, max_size=3)),
    st.one_of(st.none(), TEXT),
    st.one_of(st.none(), st.binary(max_size=8)),
    st.one_of(st.none(), U64),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_single_header_matches_protobuf(size, sequence_id, properties, key, ordering, event_time, b64, null, null_key):
    header = single_header_with(size, sequence_id, properties, key, ordering, event_time, b64, null, null_key)
    meta = _reference(size, sequence_id, properties, key, ordering, event_time, b64, null, null_key)
    assert header == _framed(meta, b"")
    if not (properties or key is not None or ordering is not None or event_time is not None or b64 or null or null_key):
        assert single_header(size, sequence_id) == header


single_message = st.fixed_dictionaries(
    {"payload": st.binary(max_size=300), "sequence_id": st.one_of(st.none(), U64)},
    optional={
        "properties": st.dictionaries(TEXT, TEXT, max_size=2),
        "partition_key": TEXT,
        "event_time": U64,
        "null_value": st.booleans(),
        "compacted_out": st.booleans(),
    },
)


@given(st.lists(single_message, max_size=12), st.data())
def test_read_batch_matches_protobuf(messages, data):
    batch = b"".join(
        _framed(_reference(len(m["payload"]), **{k: v for k, v in m.items() if k != "payload"}), m["payload"])
        for m in messages
    )
    unacked = data.draw(st.one_of(st.none(), st.integers(min_value=0, max_value=2 ** len(messages) - 1)))
    expected = [
        (
            index,
            m["payload"],
            SingleMessageMetadata.FromString(_reference(len(m["payload"]), **{k: v for k, v in m.items() if k != "payload"})),
        )
        for index, m in enumerate(messages)
        if not m.get("compacted_out") and (unacked is None or unacked >> index & 1)
    ]
    assert _decoded(batch, len(messages), unacked) == expected


# Field-shaped pieces: a tag of a varint field (or a stray byte) and a varint, complete or cut.
_piece = st.tuples(
    st.sampled_from([0x18, 0x20, 0x28, 0x40, 0x48, 0x0A, 0x12, 0x7F, 0x80]),
    st.lists(st.integers(min_value=0x80, max_value=0xFF), max_size=3),
    st.integers(min_value=0, max_value=0xFF),
).map(lambda piece: bytes((piece[0], *piece[1], piece[2])))


@settings(max_examples=400)
@given(st.one_of(st.binary(min_size=1, max_size=14), st.lists(_piece, min_size=1, max_size=4).map(b"".join)), st.booleans())
@example(b"\x18\x05\x40\x01\x18\x00", False)  # a later payload_size wins
@example(b"\x18\x05\x40\x81\x20\x01", False)  # compacted_out after a cut varint
@example(b"\x18\x85\x01\x40\x01\x20\x01", False)
def test_any_metadata_bytes_decode_as_protobuf_does(meta, steer):
    """Bytes read off without protobuf (the plain layouts) must agree with protobuf on every input."""
    if steer:  # into the plain layouts' shape: payload_size first, a one-byte size
        meta = b"\x18" + bytes((meta[0] & 0x7F,)) + meta[1:]
    try:
        reference = SingleMessageMetadata.FromString(meta)
    except Exception:
        reference = None
    if reference is None or not reference.HasField("payload_size") or not 0 <= reference.payload_size <= 300:
        with pytest.raises(BatchFormatError):
            _decoded(_framed(meta, b"p" * 3), 1)
        return
    payload = b"p" * reference.payload_size
    assert _decoded(_framed(meta, payload), 1) == ([] if reference.compacted_out else [(0, payload, reference)])
    with pytest.raises(BatchFormatError):
        _decoded(_framed(meta, payload + b"!"), 1)


def test_plain_metadata_stays_raw_until_asked():
    frame = single_header(1024, 70_000) + b"x" * 1024
    ((_, payload, single),) = read_batch(frame, 1, lambda _, index, payload, single: (index, payload, single))
    assert type(single) is bytes and len(payload) == 1024
    assert parse_single(single).sequence_id == 70_000


@given(U64, U64, st.integers(min_value=1, max_value=2**31 - 1), st.one_of(st.none(), U64), st.booleans())
def test_encode_send_matches_make(producer_id, sequence_id, num_messages, highest, is_chunk):
    expected = commands.make(
        T.SEND, producer_id=producer_id, sequence_id=sequence_id, num_messages=num_messages,
        highest_sequence_id=highest, is_chunk=True if is_chunk else None,
    )
    assert commands.encode_send(producer_id, sequence_id, num_messages, highest, is_chunk) == expected.SerializeToString()


@given(U64, U64, I64, I64, U64)
def test_encode_send_receipt_matches_make(producer_id, sequence_id, ledger_id, entry_id, highest):
    expected = commands.make(
        T.SEND_RECEIPT, producer_id=producer_id, sequence_id=sequence_id, highest_sequence_id=highest,
        message_id=MessageIdData(ledgerId=ledger_id % 2**64, entryId=entry_id % 2**64),
    )
    assert commands.encode_send_receipt(producer_id, sequence_id, ledger_id, entry_id, highest) == expected.SerializeToString()


@given(U64, U64, U64, st.integers(min_value=-1, max_value=2**31 - 1), st.one_of(st.none(), st.integers(min_value=0, max_value=2**32 - 1)))
def test_encode_message_matches_make(consumer_id, ledger_id, entry_id, partition, redelivery_count):
    expected = commands.make(
        T.MESSAGE, consumer_id=consumer_id, redelivery_count=redelivery_count,
        message_id=MessageIdData(ledgerId=ledger_id, entryId=entry_id, partition=partition),
    )
    assert commands.encode_message(consumer_id, ledger_id, entry_id, partition, redelivery_count) == expected.SerializeToString()


@given(
    TEXT, U64, U64, st.sampled_from([0, 1, 2, 3, 4]), st.integers(min_value=0, max_value=2**32 - 1),
    st.one_of(st.none(), st.integers(min_value=0, max_value=2**31 - 1)), st.one_of(st.none(), U64),
)
def test_plain_metadata_matches_protobuf(name, sequence_id, publish_time, compression, uncompressed, count, highest):
    expected = MessageMetadata(producer_name=name, sequence_id=sequence_id, publish_time=publish_time)
    if compression:
        expected.compression = compression
        expected.uncompressed_size = uncompressed
    if count is not None:
        expected.num_messages_in_batch = count
    if highest is not None:
        expected.highest_sequence_id = highest
    encoded = encode_plain_metadata(name, sequence_id, publish_time, compression, uncompressed, count, highest)
    assert encoded == expected.SerializeToString()
