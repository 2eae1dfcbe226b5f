"""Batch payload framing and the ack_set bitset."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_pulsar.client.protocol.batch import BatchFormatError, ack_set_words, encode_single, parse_single, read_batch, unacked_mask
from airflow_pulsar.client.protocol.compression import CompressionType, compress, decompress


def batch_of(*payloads: bytes) -> bytes:
    return b"".join(encode_single(p, sequence_id=i) for i, p in enumerate(payloads))


def iter_batch(data, count):
    """(index, parsed SingleMessageMetadata, payload) of every message, as a list."""
    return read_batch(data, count, lambda _, index, payload, single: (index, parse_single(single), payload))


# Encoding.


def test_encode_single_layout():
    # [u32 BE size][payload_size=2 (field 3), sequence_id=7 (field 8)][payload]
    assert encode_single(b"hi", sequence_id=7) == b"\x00\x00\x00\x04" + b"\x18\x02\x40\x07" + b"hi"


def test_encode_single_writes_only_given_fields():
    frame = encode_single(b"")
    assert frame == b"\x00\x00\x00\x02\x18\x00"
    (_, meta, payload), = iter_batch(frame, 1)
    assert payload == b""
    for field in ("partition_key", "ordering_key", "event_time", "sequence_id", "null_value"):
        assert not meta.HasField(field)


def test_encode_single_all_fields_round_trip():
    frame = encode_single(
        memoryview(b"payload"),
        properties={"a": "1", "b": "2"},
        partition_key="key",
        ordering_key=b"\x00order",
        event_time=1_700_000_000_000,
        sequence_id=42,
        partition_key_b64_encoded=True,
        null_value=True,
        null_partition_key=True,
    )
    ((index, meta, payload),) = list(iter_batch(frame, 1))
    assert index == 0
    assert payload == b"payload"
    assert {kv.key: kv.value for kv in meta.properties} == {"a": "1", "b": "2"}
    assert meta.partition_key == "key"
    assert meta.ordering_key == b"\x00order"
    assert meta.event_time == 1_700_000_000_000
    assert meta.sequence_id == 42
    assert meta.payload_size == 7
    assert meta.partition_key_b64_encoded and meta.null_value and meta.null_partition_key


# Decoding.


def test_iter_batch_yields_every_message_in_order():
    data = batch_of(b"one", b"", b"three")
    assert [(i, m.sequence_id, p) for i, m, p in iter_batch(data, 3)] == [
        (0, 0, b"one"),
        (1, 1, b""),
        (2, 2, b"three"),
    ]


def test_iter_batch_payloads_are_bytes_for_any_buffer():
    data = batch_of(b"a", b"b")
    for buf in (data, bytearray(data), memoryview(data)):
        payloads = [p for _, _, p in iter_batch(buf, 2)]
        assert payloads == [b"a", b"b"]
        assert all(type(p) is bytes for p in payloads)


def test_empty_batch():
    assert list(iter_batch(b"", 0)) == []


def test_compressed_batch_round_trip():
    data = batch_of(*(f"message {i}".encode() for i in range(100)))
    packed = compress(CompressionType.LZ4, data)
    messages = list(iter_batch(decompress(CompressionType.LZ4, packed, len(data)), 100))
    assert [p for _, _, p in messages] == [f"message {i}".encode() for i in range(100)]


@given(
    st.lists(
        st.tuples(
            st.binary(max_size=64),
            st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
            st.one_of(st.none(), st.text(max_size=8)),
            st.one_of(st.none(), st.integers(min_value=0, max_value=2**64 - 1)),
        ),
        max_size=20,
    )
)
def test_encode_decode_property(messages):
    data = b"".join(
        encode_single(p, properties=props, partition_key=key, sequence_id=seq)
        for p, props, key, seq in messages
    )
    decoded = list(iter_batch(data, len(messages)))
    assert len(decoded) == len(messages)
    for (index, meta, payload), (i, (p, props, key, seq)) in zip(decoded, enumerate(messages), strict=True):
        assert index == i
        assert payload == p
        assert {kv.key: kv.value for kv in meta.properties} == props
        assert (meta.partition_key if meta.HasField("partition_key") else None) == key
        assert (meta.sequence_id if meta.HasField("sequence_id") else None) == seq


# Malformed batches.


def consume(data, count):
    return list(iter_batch(data, count))


def test_count_larger_than_content_is_truncation():
    with pytest.raises(BatchFormatError, match="truncated: message 2 of 3"):
        consume(batch_of(b"a", b"b"), 3)


def test_count_smaller_than_content_leaves_bytes_over():
    with pytest.raises(BatchFormatError, match="left over after 1 messages"):
        consume(batch_of(b"a", b"b"), 1)


def test_partial_size_header():
    with pytest.raises(BatchFormatError, match="truncated"):
        consume(batch_of(b"a") + b"\x00\x00", 2)


def test_metadata_size_past_end():
    with pytest.raises(BatchFormatError, match="metadata size 255 runs past the end"):
        consume(b"\x00\x00\x00\xff\x18\x00", 1)


def test_payload_size_past_end():
    frame = encode_single(b"abcdef")
    with pytest.raises(BatchFormatError, match="payload size 6 runs past the end"):
        consume(frame[:-1], 1)


def test_negative_payload_size():
    meta = b"\x18" + b"\xff" * 9 + b"\x01"  # payload_size = -1
    with pytest.raises(BatchFormatError, match="payload size -1"):
        consume(struct.pack(">I", len(meta)) + meta, 1)


def test_metadata_without_payload_size():
    meta = b"\x12\x01k"  # only partition_key
    with pytest.raises(BatchFormatError, match="no payload_size"):
        consume(struct.pack(">I", len(meta)) + meta, 1)


def test_unparseable_metadata():
    with pytest.raises(BatchFormatError, match="bad SingleMessageMetadata"):
        consume(b"\x00\x00\x00\x02\xff\xff", 1)


def test_negative_count():
    with pytest.raises(BatchFormatError, match="negative message count"):
        consume(b"", -1)


def test_batch_format_error_is_a_value_error():
    assert issubclass(BatchFormatError, ValueError)


@given(st.lists(st.binary(max_size=20), min_size=1, max_size=5), st.data())
def test_every_strict_prefix_is_rejected(payloads, data):
    batch = batch_of(*payloads)
    cut = data.draw(st.integers(min_value=0, max_value=len(batch) - 1))
    with pytest.raises(BatchFormatError):
        consume(batch[:cut], len(payloads))


@given(st.binary(max_size=200), st.integers(min_value=0, max_value=10))
def test_garbage_only_ever_raises_batch_format_error(garbage, count):
    try:
        consume(garbage, count)
    except BatchFormatError:
        pass


# ack_set: int64 words <-> one int bitset. A consumer reads a MESSAGE's words for a batch of known size
# (bits at or above it dropped); the broker's cursor keeps the words' bits as a client sent them and
# sends them back unclipped.

int64s = st.integers(-(2**63), 2**63 - 1)


def test_no_words_hold_no_bits():
    # A MESSAGE without an ack_set leaves its whole batch unacknowledged: its reader decides that
    # before reading words (see test_consumer_unpacker).
    assert unacked_mask([]) == 0
    assert unacked_mask([], 5) == 0
    assert unacked_mask([], 0) == 0
    assert ack_set_words(0, 0) == []
    assert ack_set_words(0, 0, clip=False) == []


def test_set_bit_means_unacknowledged():
    # Messages 0 and 2 of 4 still pending.
    assert unacked_mask([0b0101], 4) == 0b0101
    assert unacked_mask([0b0101]) == 0b0101


def test_bit_63_arrives_as_a_negative_word():
    assert unacked_mask([-(2**63)], 64) == 1 << 63
    assert unacked_mask([-1], 64) == 2**64 - 1
    assert unacked_mask([-(2**63)]) == 1 << 63
    assert unacked_mask([-1]) == 2**64 - 1
    assert unacked_mask([-2]) == 2**64 - 2


def test_second_word_covers_indexes_64_and_up():
    mask = unacked_mask([0, 0b10], 100)
    assert mask == 1 << 65
    assert mask >> 65 & 1 and not mask >> 64 & 1
    assert unacked_mask([0, 1]) == 1 << 64


def test_words_of_64_65_and_128_bits():
    assert unacked_mask([-1], 64) == unacked_mask([-1]) == 2**64 - 1
    assert unacked_mask([-1, -1], 64) == 2**64 - 1
    assert unacked_mask([-1, -1], 65) == 2**65 - 1
    assert unacked_mask([-1, -1], 128) == unacked_mask([-1, -1]) == 2**128 - 1
    assert unacked_mask([0, -(2**63)], 128) == 1 << 127
    assert unacked_mask([-1, -1, 3]) == 2**130 - 1
    for clip in (True, False):
        assert ack_set_words(2**64 - 1, 64, clip=clip) == [-1]
        assert ack_set_words(1 << 64, 65, clip=clip) == [0, 1]
        assert ack_set_words(2**65 - 1, 65, clip=clip) == [-1, 1]
        assert ack_set_words(2**128 - 1, 128, clip=clip) == [-1, -1]
        assert ack_set_words(1 << 127, 128, clip=clip) == [0, -(2**63)]
        assert ack_set_words(2**130 - 1, 130, clip=clip) == [-1, -1, 3]


def test_indexes_beyond_the_words_count_as_acknowledged():
    # The official clients read a missing word as all-zero (acknowledged).
    assert unacked_mask([-1], 100) == 2**64 - 1


def test_mask_ignores_bits_at_or_above_count():
    assert unacked_mask([0b1111], 2) == 0b11
    assert unacked_mask([0b1111]) == 0b1111


def test_ack_set_words_signed_and_sized():
    assert ack_set_words(1 << 63, 64) == [-(2**63)]
    assert ack_set_words(0b101, 3) == [0b101]
    # Always ceil(size / 64) words, so a fully acknowledged batch is zeros, not an empty list.
    assert ack_set_words(0, 130) == [0, 0, 0]
    assert ack_set_words(0, 130, clip=False) == [0, 0, 0]
    assert ack_set_words(1 << 65, 70) == [0, 2]
    assert ack_set_words(0b1111, 2) == [0b11]


def test_unclipped_words_keep_the_bits_past_the_size_in_the_last_word():
    assert ack_set_words(0b1111, 2, clip=False) == [0b1111]
    assert ack_set_words(1 << 65, 65, clip=False) == [0, 2]
    assert ack_set_words(1 << 65, 65) == [0, 0]
    # Past the last word nothing is written either way.
    assert ack_set_words(1 << 64 | 1, 64, clip=False) == [1]


@given(st.lists(int64s, max_size=5))
def test_words_round_trip_including_negative_words(words):
    bits = unacked_mask(words)
    assert 0 <= bits < 2 ** (64 * len(words))
    for clip in (True, False):
        assert ack_set_words(bits, 64 * len(words), clip=clip) == words
    if words:
        assert unacked_mask(words, 64 * len(words)) == bits


@given(st.integers(min_value=0, max_value=300), st.data())
def test_ack_set_round_trip(count, data):
    mask = data.draw(st.integers(min_value=0, max_value=(1 << count) - 1))
    words = ack_set_words(mask, count)
    assert len(words) == (count + 63) // 64
    assert all(-(2**63) <= w < 2**63 for w in words)
    assert ack_set_words(mask, count, clip=False) == words
    assert unacked_mask(words, count) == mask
    assert unacked_mask(words) == mask


@given(st.integers(min_value=0, max_value=300), st.integers(min_value=0, max_value=2**320 - 1))
def test_bits_past_the_size_survive_unclipped_up_to_the_last_word(count, bits):
    whole_words = (1 << 64 * ((count + 63) // 64)) - 1
    assert unacked_mask(ack_set_words(bits, count, clip=False)) == bits & whole_words
    assert unacked_mask(ack_set_words(bits, count)) == bits & ((1 << count) - 1)
