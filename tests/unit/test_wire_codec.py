"""The hand-coded protobuf codec (``protocol/wire.py``, and the batch framing in ``protocol/batch.py``), cross-checked
against the generated classes on random inputs."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from airflow_pulsar.client.protocol import PulsarApi_pb2, batch, commands, wire
from airflow_pulsar.client.protocol.batch import (
    BatchFormatError,
    encode_single,
    parse_single,
    read_batch,
    single_header,
    single_header_with,
)
from airflow_pulsar.client.protocol.frames import decode_frame, encode_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    BaseCommand,
    BrokerEntryMetadata,
    KeyValue,
    MessageIdData,
    MessageMetadata,
    SingleMessageMetadata,
)
from airflow_pulsar.client.protocol.wire import (
    U64_MASK,
    PlainMetadata,
    SendEncoder,
    encode_ack,
    encode_message,
    encode_plain_metadata,
    encode_send,
    encode_send_receipt,
    signed64,
    tag,
    varint,
)

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
@example(0, 0, 1, None, False)
@example(2**64 - 1, 2**63, 2**31 - 1, 2**64 - 1, True)
def test_encode_send_matches_make(producer_id, sequence_id, num_messages, highest, is_chunk):
    expected = commands.make(
        T.SEND, producer_id=producer_id, sequence_id=sequence_id, num_messages=num_messages,
        highest_sequence_id=highest, is_chunk=True if is_chunk else None,
    )
    assert encode_send(producer_id, sequence_id, num_messages, highest, is_chunk) == expected.SerializeToString()


@given(U64, U64, st.integers(min_value=1, max_value=2**31 - 1), st.one_of(st.none(), U64), st.booleans(), U64, U64)
@example(2**64 - 1, 2**64 - 1, 2**31 - 1, 2**64 - 1, True, 2**64 - 1, 2**64 - 1)  # the longest SEND
def test_a_send_in_a_transaction_matches_make(producer_id, sequence_id, num_messages, highest, is_chunk, most, least):
    expected = commands.make(
        T.SEND, producer_id=producer_id, sequence_id=sequence_id, num_messages=num_messages,
        txnid_least_bits=least, txnid_most_bits=most, highest_sequence_id=highest, is_chunk=True if is_chunk else None,
    )
    encoded = SendEncoder(producer_id).encode(sequence_id, num_messages, highest, is_chunk, (most, least))
    assert encoded == expected.SerializeToString()


@given(U64, U64, st.one_of(I64, U64), st.one_of(I64, U64), U64)
@example(1, 5, -1, -1, 5)  # a duplicate's receipt
@example(1, 5, -(2**63), 2**63 - 1, 7)
@example(2**64 - 1, 2**64 - 1, 2**64 - 1, 2**63, 0)
def test_encode_send_receipt_matches_make(producer_id, sequence_id, ledger_id, entry_id, highest):
    expected = commands.make(
        T.SEND_RECEIPT, producer_id=producer_id, sequence_id=sequence_id, highest_sequence_id=highest,
        message_id=MessageIdData(ledgerId=ledger_id % 2**64, entryId=entry_id % 2**64),
    )
    assert encode_send_receipt(producer_id, sequence_id, ledger_id, entry_id, highest) == expected.SerializeToString()


@given(
    U64, st.one_of(I64, U64), st.one_of(I64, U64), st.integers(min_value=-1, max_value=2**31 - 1),
    st.one_of(st.none(), st.integers(min_value=0, max_value=2**32 - 1)),
)
@example(0, -1, -1, -1, None)
@example(2**64 - 1, -(2**63), 2**63 - 1, 2**31 - 1, 2**32 - 1)
def test_encode_message_matches_make(consumer_id, ledger_id, entry_id, partition, redelivery_count):
    expected = commands.make(
        T.MESSAGE, consumer_id=consumer_id, redelivery_count=redelivery_count,
        message_id=MessageIdData(ledgerId=ledger_id % 2**64, entryId=entry_id % 2**64, partition=partition),
    )
    assert encode_message(consumer_id, ledger_id, entry_id, partition, redelivery_count) == expected.SerializeToString()


@given(
    U64, st.sampled_from([0, 1]), st.lists(st.tuples(I64, I64), max_size=4),
    st.lists(st.tuples(I64, I64, st.lists(I64, max_size=3), st.integers(min_value=0, max_value=2**31 - 1)), max_size=3),
)
@example(1, 0, [], [])
@example(2**64 - 1, 1, [(-1, -1)], [(2**63 - 1, 0, [-1, 0, 2**63 - 1], 2**31 - 1)])
@example(1, 0, [(5, 1), (5, 200), (7, -1), (5, 2**20), (5, 2**40), (7, 3)], [])  # one ledger's ids of every width
def test_encode_ack_matches_make(consumer_id, ack_type, entries, batches):
    by_ledger: dict[int, list[int]] = {}
    for ledger, entry in entries:
        by_ledger.setdefault(ledger, []).append(entry)
    ids = [MessageIdData(ledgerId=ledger % 2**64, entryId=entry % 2**64) for ledger, group in by_ledger.items() for entry in group]
    for ledger, entry, words, size in batches:
        ids.append(MessageIdData(ledgerId=ledger % 2**64, entryId=entry % 2**64, ack_set=words, batch_size=size))
    expected = commands.make(T.ACK, consumer_id=consumer_id, ack_type=ack_type, message_id=ids)
    assert encode_ack(consumer_id, ack_type, by_ledger, batches) == expected.SerializeToString()


@given(
    TEXT, U64, U64, st.sampled_from([0, 1, 2, 3, 4]), st.integers(min_value=0, max_value=2**32 - 1),
    st.one_of(st.none(), st.integers(min_value=0, max_value=2**31 - 1)), st.one_of(st.none(), U64),
)
@example("", 0, 0, 0, 0, None, None)
@example("p\u00e9", 2**64 - 1, 2**63, 4, 2**32 - 1, 2**31 - 1, 2**64 - 1)
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


@given(TEXT, st.lists(st.tuples(U64, st.integers(min_value=0, max_value=2**42)), min_size=1, max_size=6))
@example("p", [(0, 5), (1, 5), (2, 6), (3, 5)])  # the cached publish time is replaced when the time changes
def test_plain_metadata_encoder_matches_protobuf(name, entries):
    encoder = PlainMetadata(name)  # one per producer: reused for every entry
    for sequence_id, publish_time in entries:
        expected = MessageMetadata(producer_name=name, sequence_id=sequence_id, publish_time=publish_time)
        assert encoder.encode(sequence_id, publish_time) == expected.SerializeToString()


@given(U64, st.lists(st.tuples(U64, st.integers(min_value=1, max_value=2**31 - 1)), min_size=1, max_size=4))
def test_send_encoder_matches_make_for_each_send_of_its_producer(producer_id, sends):
    encoder = SendEncoder(producer_id)
    for sequence_id, num_messages in sends:
        expected = commands.make(T.SEND, producer_id=producer_id, sequence_id=sequence_id, num_messages=num_messages)
        assert encoder.encode(sequence_id, num_messages) == expected.SerializeToString()
    assert encoder.encode(7) == commands.make(T.SEND, producer_id=producer_id, sequence_id=7, num_messages=1).SerializeToString()


def _schema_fields():
    """(message class, field descriptor) of every field in the schema, nested messages included."""
    pending = [getattr(PulsarApi_pb2, name) for name in PulsarApi_pb2.DESCRIPTOR.message_types_by_name]
    while pending:
        cls = pending.pop()
        pending += [getattr(cls, nested.name) for nested in cls.DESCRIPTOR.nested_types]
        for field in cls.DESCRIPTOR.fields:
            yield cls, field


def _with_only(cls, field) -> bytes:
    """A ``cls`` with only ``field`` set, serialized (its required fields may be missing)."""
    instance = cls()
    target = getattr(instance, field.name)
    if field.message_type is not None:
        target.add() if hasattr(target, "add") else target.SetInParent()
    else:
        kinds = {field.TYPE_STRING: "x", field.TYPE_BYTES: b"x", field.TYPE_BOOL: True}
        value = field.enum_type.values[0].number if field.enum_type is not None else kinds.get(field.type, 1)
        target.append(value) if hasattr(target, "append") else setattr(instance, field.name, value)
    return instance.SerializePartialToString()


def test_tags_match_protobuf():
    checked = 0
    for cls, field in _schema_fields():
        assert _with_only(cls, field).startswith(tag(cls, field.name)), f"{cls.__name__}.{field.name}"
        checked += 1
    assert checked > 300  # the whole schema, not a part of it


@given(U64)
@example(0)
@example(2**63 - 1)
@example(2**63)
@example(2**64 - 1)
def test_signed64_matches_protobuf_int64(value):
    """The uint64 varint of an id, read by protobuf as an int64 field (an ack_set word), is signed64 of it."""
    data = MessageIdData()
    data.MergeFromString(tag(MessageIdData, "ack_set") + varint(value))
    assert list(data.ack_set) == [signed64(value)]


@given(I64, U64)
@example(-1, 2**64 - 1)
@example(-(2**63), 2**63)
@example(2**63 - 1, 2**63 - 1)
def test_signed64_inverts_the_mask(signed_value, unsigned_value):
    assert signed64(signed_value & U64_MASK) == signed_value
    assert signed64(unsigned_value) & U64_MASK == unsigned_value
    # protobuf writes an int64 as the varint of its two's complement, i.e. of the masked value
    expected = tag(MessageIdData, "ledgerId") + b"\x00" + tag(MessageIdData, "entryId") + b"\x00"
    expected += tag(MessageIdData, "ack_set") + varint(signed_value & U64_MASK)
    assert MessageIdData(ledgerId=0, entryId=0, ack_set=[signed_value]).SerializeToString() == expected


@given(
    st.binary(max_size=300),
    st.one_of(st.none(), U64),
    st.one_of(st.none(), st.dictionaries(TEXT, TEXT, max_size=2)),
    st.one_of(st.none(), TEXT),
    st.one_of(st.none(), st.binary(max_size=8)),
    st.booleans(),
)
def test_encode_single_matches_protobuf(payload, sequence_id, properties, key, ordering, null_value):
    frame = encode_single(
        payload, sequence_id=sequence_id, properties=properties, partition_key=key, ordering_key=ordering, null_value=null_value
    )
    assert frame == _framed(_reference(len(payload), sequence_id, properties, key, ordering, null_value=null_value), payload)


# Payload sizes around the varint boundaries the plain layouts distinguish (one, two, three bytes).
_SIZES = st.one_of(st.sampled_from([0, 1, 127, 128, 16383, 16384]), st.integers(min_value=0, max_value=20_000))


@given(st.lists(st.tuples(_SIZES, st.one_of(st.none(), U64), st.one_of(st.none(), TEXT)), max_size=8))
@example([(127, 2**63 - 1, None), (128, 2**63, None), (16383, 2**64 - 1, None), (16384, 0, None), (0, None, "k")])
def test_read_batch_round_trips_encoders(messages):
    payloads = [bytes((index,)) * size for index, (size, _, _) in enumerate(messages)]
    batch = b"".join(
        single_header_with(size, sequence_id, partition_key=key) + payload
        for (size, sequence_id, key), payload in zip(messages, payloads, strict=True)
    )
    decoded = read_batch(batch, len(messages), lambda _, index, payload, single: (payload, parse_single(single)))
    assert [payload for payload, _ in decoded] == payloads
    for (size, sequence_id, key), (_, meta) in zip(messages, decoded, strict=True):
        assert meta.payload_size == size
        assert (meta.sequence_id if meta.HasField("sequence_id") else None) == sequence_id
        assert (meta.partition_key if meta.HasField("partition_key") else None) == key


@given(U64, U64, st.one_of(I64, U64), st.one_of(I64, U64), st.integers(min_value=-1, max_value=2**31 - 1))
@example(1, 0, -1, -1, -1)
@example(2**64 - 1, 2**64 - 1, -(2**63), 2**63 - 1, 0)
def test_encoded_commands_decode_to_their_ids(client_id, sequence_id, ledger_id, entry_id, partition):
    """What the hand-coded commands carry comes back from the generated decoder; a negative id as its uint64."""
    receipt = decode_frame(encode_command(encode_send_receipt(client_id, sequence_id, ledger_id, entry_id, sequence_id))[4:])
    body = receipt.command.send_receipt
    assert receipt.command.type == T.SEND_RECEIPT
    assert (body.producer_id, body.sequence_id, body.highest_sequence_id) == (client_id, sequence_id, sequence_id)
    assert (body.message_id.ledgerId, body.message_id.entryId) == (ledger_id & U64_MASK, entry_id & U64_MASK)
    message = decode_frame(encode_command(encode_message(client_id, ledger_id, entry_id, partition))[4:]).command
    assert message.type == T.MESSAGE and message.message.consumer_id == client_id
    position = message.message.message_id
    assert (position.ledgerId, position.entryId, position.partition) == (ledger_id & U64_MASK, entry_id & U64_MASK, partition)
    send = decode_frame(encode_command(encode_send(client_id, sequence_id, 3))[4:]).command.send
    assert (send.producer_id, send.sequence_id, send.num_messages) == (client_id, sequence_id, 3)


@pytest.mark.parametrize(
    ("module", "fast_paths"),
    [(wire, wire.__all__), (batch, ["single_header", "single_header_with", "encode_single", "read_batch", "parse_single"])],
    ids=["wire", "batch"],
)
def test_every_fast_path_is_listed_with_tests_that_exist(module, fast_paths):
    """Each hand-coded module's docstring names its public fast paths and tests of this file that prove them."""
    doc = module.__doc__
    assert all(f"`{name}`" in doc for name in fast_paths)
    named = re.findall(r"``(test_\w+)``", doc)
    assert named and all(callable(globals().get(name)) for name in named)
