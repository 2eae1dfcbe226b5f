"""Batch payloads and the ack_set bitset that filters them.

A batch entry's (uncompressed) payload is a run of messages, each framed as::

    [u32 big-endian metadata size][SingleMessageMetadata][payload_size bytes]

``MessageMetadata.num_messages_in_batch`` tells how many there are.

A partially acknowledged batch is redelivered with an ``ack_set``: int64 words
of a bitset (word ``i`` holds indexes ``64*i .. 64*i+63``, least significant bit
first) in which a set bit means "not yet acknowledged". An empty ``ack_set``
means nothing in the batch was acknowledged. :func:`unacked_mask` and :func:`ack_set_words`
convert between the words and one int bitset, for the client and the broker alike.

The framing is coded by hand, as :mod:`.wire` codes the commands: the bytes equal the generated
classes', as ``tests/unit/test_wire_codec.py`` proves for each fast path:

- :func:`single_header`, :func:`single_header_with`, :func:`encode_single` (SingleMessageMetadata
  with its size prefix): ``test_single_header_matches_protobuf``, ``test_encode_single_matches_protobuf``.
- :func:`read_batch` with :func:`parse_single` (a batch payload split, plain SingleMessageMetadata
  read off its bytes): ``test_read_batch_matches_protobuf``,
  ``test_any_metadata_bytes_decode_as_protobuf_does``, ``test_read_batch_round_trips_encoders``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from google.protobuf.message import DecodeError

from .PulsarApi_pb2 import KeyValue, MessageMetadata, SingleMessageMetadata
from .wire import U64_MASK, signed64, tag, varint

_TRUE = varint(1)

# SingleMessageMetadata, and the KeyValue of its properties.
_SINGLE_PROPERTIES = tag(SingleMessageMetadata, "properties")
_SINGLE_PARTITION_KEY = tag(SingleMessageMetadata, "partition_key")
_SINGLE_PAYLOAD_SIZE = tag(SingleMessageMetadata, "payload_size")
_SINGLE_EVENT_TIME = tag(SingleMessageMetadata, "event_time")
_SINGLE_KEY_B64 = tag(SingleMessageMetadata, "partition_key_b64_encoded") + _TRUE
_SINGLE_ORDERING_KEY = tag(SingleMessageMetadata, "ordering_key")
_SINGLE_SEQUENCE_ID = tag(SingleMessageMetadata, "sequence_id")
_SINGLE_NULL_VALUE = tag(SingleMessageMetadata, "null_value") + _TRUE
_SINGLE_NULL_KEY = tag(SingleMessageMetadata, "null_partition_key") + _TRUE
_PROPERTY_KEY = tag(KeyValue, "key")
_PROPERTY_VALUE = tag(KeyValue, "value")
_SIZE = struct.Struct(">I")
# The common metadata (payload_size, then sequence_id) has a few prefixes per payload size;
# caching them saves building the same bytes for every message.
_PREFIXES: dict[tuple[int, int], bytes] = {}
_MAX_PREFIXES = 4096


def single_header(payload_size: int, sequence_id: int | None = None) -> bytes:
    """The bytes in front of one unkeyed message's payload in a batch: size prefix and a
    SingleMessageMetadata of payload size and sequence id (see :func:`single_header_with`)."""
    if sequence_id is None:
        size = varint(payload_size)
        return _SIZE.pack(len(_SINGLE_PAYLOAD_SIZE) + len(size)) + _SINGLE_PAYLOAD_SIZE + size
    sequence = varint(sequence_id)
    key = (payload_size, len(sequence))
    prefix = _PREFIXES.get(key)
    if prefix is None:
        size = varint(payload_size)
        meta_size = len(_SINGLE_PAYLOAD_SIZE) + len(size) + len(_SINGLE_SEQUENCE_ID) + len(sequence)
        prefix = _SIZE.pack(meta_size) + _SINGLE_PAYLOAD_SIZE + size + _SINGLE_SEQUENCE_ID
        if len(_PREFIXES) < _MAX_PREFIXES:
            _PREFIXES[key] = prefix
    return prefix + sequence


def single_header_with(
    payload_size: int, sequence_id: int | None = None, properties: Mapping[str, str] | None = None,
    partition_key: str | None = None, ordering_key: bytes | None = None, event_time: int | None = None,
    partition_key_b64_encoded: bool = False, null_value: bool = False, null_partition_key: bool = False,
) -> bytes:
    """The bytes in front of one message's payload in a batch: size prefix and SingleMessageMetadata.

    The bytes equal ``SingleMessageMetadata.SerializeToString()``'s; fields left at None/False
    are not written, as the official clients do.
    """
    if not (
        properties
        or partition_key is not None
        or ordering_key is not None
        or event_time is not None
        or partition_key_b64_encoded
        or null_value
        or null_partition_key
    ):
        return single_header(payload_size, sequence_id)
    parts = []
    if properties:
        for key, value in properties.items():
            pair = _text(_PROPERTY_KEY, key) + _text(_PROPERTY_VALUE, value)
            parts.append(_SINGLE_PROPERTIES + varint(len(pair)) + pair)
    if partition_key is not None:
        parts.append(_text(_SINGLE_PARTITION_KEY, partition_key))
    parts.append(_SINGLE_PAYLOAD_SIZE + varint(payload_size))
    if event_time is not None:
        parts.append(_SINGLE_EVENT_TIME + varint(event_time))
    if partition_key_b64_encoded:
        parts.append(_SINGLE_KEY_B64)
    if ordering_key is not None:
        parts.append(_SINGLE_ORDERING_KEY + varint(len(ordering_key)) + bytes(ordering_key))
    if sequence_id is not None:
        parts.append(_SINGLE_SEQUENCE_ID + varint(sequence_id))
    if null_value:
        parts.append(_SINGLE_NULL_VALUE)
    if null_partition_key:
        parts.append(_SINGLE_NULL_KEY)
    meta = b"".join(parts)
    return _SIZE.pack(len(meta)) + meta


def _text(key: bytes, text: str) -> bytes:
    data = text.encode("utf-8")
    return key + varint(len(data)) + data


def encode_single(
    payload: bytes | bytearray | memoryview, *, properties: Mapping[str, str] | None = None, partition_key: str | None = None,
    ordering_key: bytes | None = None, event_time: int | None = None, sequence_id: int | None = None,
    partition_key_b64_encoded: bool = False, null_value: bool = False, null_partition_key: bool = False,
) -> bytes:
    """Frame one message of a batch: size prefix, SingleMessageMetadata, payload.

    Concatenating the results for each message gives the batch payload.
    """
    header = single_header_with(
        len(payload), sequence_id, properties, partition_key, ordering_key, event_time,
        partition_key_b64_encoded, null_value, null_partition_key,
    )
    return header + bytes(payload)


class BatchFormatError(ValueError):
    """A batch payload does not match its framing or its declared message count."""


def _plain_layout(length: int, size_bytes: int) -> tuple[int, int] | None:
    """(mask, expected) that a big-endian int of ``length`` metadata bytes matches exactly when they
    are payload_size as a ``size_bytes`` varint, optionally followed by sequence_id running to the end."""
    checks = [(0xFF, byte) for byte in _SINGLE_PAYLOAD_SIZE] + [(0x80, 0x80)] * (size_bytes - 1) + [(0x80, 0)]
    rest = length - len(checks)
    if rest < 0 or 0 < rest <= len(_SINGLE_SEQUENCE_ID):
        return None
    if rest:
        value_bytes = rest - len(_SINGLE_SEQUENCE_ID)
        checks += [(0xFF, byte) for byte in _SINGLE_SEQUENCE_ID] + [(0x80, 0x80)] * (value_bytes - 1) + [(0x80, 0)]
    mask = expected = 0
    for byte_mask, byte_value in checks:
        mask, expected = mask << 8 | byte_mask, expected << 8 | byte_value
    return mask, expected


# The longest metadata the plain layouts cover: a one-byte payload size, then a sequence id below
# 2**63 (nine varint bytes).
_PLAIN_MAX = len(_SINGLE_PAYLOAD_SIZE) + 1 + len(_SINGLE_SEQUENCE_ID) + 9
# By metadata length: the layout with a one-byte payload size (below 128), and with a two-byte one.
_PLAIN_ONE = [_plain_layout(length, 1) for length in range(_PLAIN_MAX + 1)]
_PLAIN_TWO = [_plain_layout(length, 2) for length in range(_PLAIN_MAX + 1)]
# Where the payload size's varint starts in plain metadata.
_PLAIN_SIZE_AT = len(_SINGLE_PAYLOAD_SIZE)

T = TypeVar("T")


def parse_single(single: bytes | SingleMessageMetadata) -> SingleMessageMetadata:
    """The SingleMessageMetadata of a message as :func:`read_batch` handed it over (bytes are parsed)."""
    if isinstance(single, SingleMessageMetadata):
        return single
    return SingleMessageMetadata.FromString(single)


def read_batch(
    data: bytes | bytearray | memoryview, count: int, build: Callable[[Any, int, bytes, bytes | SingleMessageMetadata], T],
    context: Any = None, unacked: int | None = None, out: list[T] | None = None,
) -> list[T]:
    """Split a batch payload of ``count`` messages; ``build`` turns each wanted one into an item.

    ``build(context, index, payload, single)`` is called for every message whose bit is set in
    ``unacked`` (None: every message) and that compaction did not empty (``compacted_out``).
    ``single`` is the message's SingleMessageMetadata, as its raw bytes when it holds no more
    than the payload size and a sequence id (what producers write for an unkeyed message; see
    :func:`parse_single`), else parsed. Items are appended to ``out`` (a new list if None), so
    after an error the caller still has those before the fault.

    Raises:
        BatchFormatError: truncated data, a size running past the end, metadata that does not
            parse or has no payload size, or bytes left over after ``count`` messages.
    """
    if count < 0:
        raise BatchFormatError(f"negative message count {count}")
    # One copy up front makes every slice below a plain bytes object, which is what users get.
    buf = data if isinstance(data, bytes) else bytes(data)
    end = len(buf)
    items: list[T] = [] if out is None else out
    append = items.append
    unpack_size = _SIZE.unpack_from
    to_int = int.from_bytes
    plain_one, plain_two = _PLAIN_ONE, _PLAIN_TWO
    size_at = _PLAIN_SIZE_AT
    size_next = size_at + 1
    pos = 0
    for index in range(count):
        if pos + 4 > end:
            raise BatchFormatError(f"batch truncated: message {index} of {count} starts at byte {pos} of {end}")
        (meta_size,) = unpack_size(buf, pos)
        meta_end = pos + 4 + meta_size
        if meta_end > end:
            raise BatchFormatError(f"batch message {index}: metadata size {meta_size} runs past the end ({end} bytes)")
        meta = buf[pos + 4 : meta_end]
        single: bytes | SingleMessageMetadata = meta
        size = -1
        compacted = False
        # What producers write for an unkeyed message (payload_size, then sequence_id) is read off
        # the bytes; exact, since such bytes parse to that payload size and nothing else.
        if meta_size <= _PLAIN_MAX:
            bits = to_int(meta, "big")
            layout = plain_one[meta_size]
            if layout is not None and bits & layout[0] == layout[1]:
                size = meta[size_at]
            else:
                layout = plain_two[meta_size]
                if layout is not None and bits & layout[0] == layout[1]:
                    size = meta[size_at] & 0x7F | meta[size_next] << 7
        if size < 0:
            parsed = _parse(meta, index)
            size = parsed.payload_size
            compacted = parsed.compacted_out
            single = parsed
        pos = meta_end + size
        if pos > end:
            raise BatchFormatError(f"batch message {index}: payload size {size} runs past the end ({end} bytes)")
        if not compacted and (unacked is None or unacked >> index & 1):
            append(build(context, index, buf[meta_end:pos], single))
    if pos != end:
        raise BatchFormatError(f"batch has {end - pos} bytes left over after {count} messages")
    return items


def _parse(meta: bytes, index: int) -> SingleMessageMetadata:
    try:
        single = SingleMessageMetadata.FromString(meta)
    except DecodeError as exc:
        raise BatchFormatError(f"batch message {index}: bad SingleMessageMetadata: {exc}") from exc
    if not single.HasField("payload_size"):
        raise BatchFormatError(f"batch message {index}: SingleMessageMetadata has no payload_size")
    if single.payload_size < 0:
        raise BatchFormatError(f"batch message {index}: payload size {single.payload_size} runs past the end")
    return single


def set_message_fields(
    meta: MessageMetadata | SingleMessageMetadata,
    properties: Mapping[str, str] | None,
    partition_key: str | None,
    ordering_key: bytes | None,
    event_time: int | None,
) -> None:
    """Set the per-message fields that MessageMetadata and SingleMessageMetadata share."""
    if properties:
        meta.properties.extend(KeyValue(key=k, value=v) for k, v in properties.items())
    if partition_key is not None:
        meta.partition_key = partition_key
    if ordering_key is not None:
        meta.ordering_key = ordering_key
    if event_time is not None:
        meta.event_time = event_time


def unacked_mask(ack_set: Sequence[int], size: int | None = None) -> int:
    """The bitset that ``ack_set``'s int64 words hold: bit ``i`` set if index ``i`` is not yet acknowledged.

    With ``size`` (the batch's message count) bits at or above it are dropped, and an index beyond
    the last word counts as acknowledged, as the official clients read a MESSAGE's ack_set. Without
    it every bit of the words is kept: the broker's cursor, often told no batch size, combines them
    with what it holds. No words give 0; that a MESSAGE without an ack_set leaves its whole batch
    unacknowledged is for its reader to decide. Test an index with ``mask >> i & 1``.
    """
    mask = 0
    for i, word in enumerate(ack_set):
        mask |= (word & U64_MASK) << (64 * i)
    return mask if size is None else mask & ((1 << size) - 1)


def ack_set_words(mask: int, size: int, *, clip: bool = True) -> list[int]:
    """Encode an unacknowledged-bitmask for ``size`` messages as signed int64 words.

    Always ``ceil(size / 64)`` words, so a fully acknowledged batch encodes as words equal to 0
    rather than as an empty list (which means "nothing acked"). Bits at or above ``size`` are
    dropped; with ``clip`` False only those past the last word are (the broker sends back the
    bits its cursor holds, as it holds them).
    """
    if clip:
        mask &= (1 << size) - 1
    return [signed64(mask >> (64 * i) & U64_MASK) for i in range((size + 63) // 64)]
