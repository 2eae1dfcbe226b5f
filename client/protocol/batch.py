"""Batch payloads and the ack_set bitset that filters them.

A batch entry's (uncompressed) payload is a run of messages, each framed as::

    [u32 big-endian metadata size][SingleMessageMetadata][payload_size bytes]

``MessageMetadata.num_messages_in_batch`` tells how many there are.

A partially acknowledged batch is redelivered with an ``ack_set``: int64 words
of a bitset (word ``i`` holds indexes ``64*i .. 64*i+63``, least significant bit
first) in which a set bit means "not yet acknowledged". An empty ``ack_set``
means nothing in the batch was acknowledged.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from google.protobuf.message import DecodeError

from .PulsarApi_pb2 import KeyValue, SingleMessageMetadata
from .wire import varint

__all__ = [
    "BatchFormatError",
    "ack_set_words",
    "encode_single",
    "parse_single",
    "read_batch",
    "single_header",
    "single_header_with",
    "unacked_mask",
]

_SIZE = struct.Struct(">I")
_MASK64 = (1 << 64) - 1
_SIGN64 = 1 << 63
# The common metadata (payload_size, then sequence_id) has a few prefixes per payload size;
# caching them saves building the same bytes for every message.
_PREFIXES: dict[tuple[int, int], bytes] = {}
_MAX_PREFIXES = 4096
# The longest metadata the plain layouts below cover: payload size, then a sequence id below 2**63.
_PLAIN_MAX = 12


def _plain_layout(length: int, size_bytes: int) -> tuple[int, int] | None:
    """(mask, expected) that a big-endian int of ``length`` metadata bytes matches exactly when they
    are payload_size as a ``size_bytes`` varint, optionally followed by sequence_id running to the end."""
    checks = [(0xFF, 0x18)] + [(0x80, 0x80)] * (size_bytes - 1) + [(0x80, 0)]
    rest = length - 1 - size_bytes
    if rest == 1 or rest < 0:
        return None
    if rest:
        checks += [(0xFF, 0x40)] + [(0x80, 0x80)] * (rest - 2) + [(0x80, 0)]
    mask = expected = 0
    for byte_mask, byte_value in checks:
        mask, expected = mask << 8 | byte_mask, expected << 8 | byte_value
    return mask, expected


# By metadata length: the layout with a one-byte payload size (below 128), and with a two-byte one.
_PLAIN_ONE = [_plain_layout(length, 1) for length in range(_PLAIN_MAX + 1)]
_PLAIN_TWO = [_plain_layout(length, 2) for length in range(_PLAIN_MAX + 1)]

T = TypeVar("T")


class BatchFormatError(ValueError):
    """A batch payload does not match its framing or its declared message count."""


def set_message_fields(
    meta: Any,
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


def single_header(payload_size: int, sequence_id: int | None = None) -> bytes:
    """The bytes in front of one unkeyed message's payload in a batch: size prefix and a
    SingleMessageMetadata of payload size and sequence id (see :func:`single_header_with`)."""
    if sequence_id is None:
        size = varint(payload_size)
        return _SIZE.pack(1 + len(size)) + b"\x18" + size
    sequence = varint(sequence_id)
    key = (payload_size, len(sequence))
    prefix = _PREFIXES.get(key)
    if prefix is None:
        size = varint(payload_size)
        prefix = _SIZE.pack(2 + len(size) + len(sequence)) + b"\x18" + size + b"\x40"
        if len(_PREFIXES) < _MAX_PREFIXES:
            _PREFIXES[key] = prefix
    return prefix + sequence


def single_header_with(
    payload_size: int,
    sequence_id: int | None = None,
    properties: Mapping[str, str] | None = None,
    partition_key: str | None = None,
    ordering_key: bytes | None = None,
    event_time: int | None = None,
    partition_key_b64_encoded: bool = False,
    null_value: bool = False,
    null_partition_key: bool = False,
) -> bytes:
    """The bytes in front of one message's payload in a batch: size prefix and SingleMessageMetadata.

    Encoded by hand, field by field in field-number order, so the bytes equal those of
    ``SingleMessageMetadata.SerializeToString()``; fields left at None/False are not written,
    as the official clients do.
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
    meta = _encode_single_metadata(
        payload_size, sequence_id, properties, partition_key, ordering_key, event_time,
        partition_key_b64_encoded, null_value, null_partition_key,
    )
    return _SIZE.pack(len(meta)) + meta


def _encode_single_metadata(
    payload_size: int,
    sequence_id: int | None,
    properties: Mapping[str, str] | None,
    partition_key: str | None,
    ordering_key: bytes | None,
    event_time: int | None,
    partition_key_b64_encoded: bool,
    null_value: bool,
    null_partition_key: bool,
) -> bytes:
    parts = []
    if properties:
        for key, value in properties.items():
            pair = _text(0x0A, key) + _text(0x12, value)
            parts.append(b"\x0a" + varint(len(pair)) + pair)
    if partition_key is not None:
        parts.append(_text(0x12, partition_key))
    parts.append(b"\x18" + varint(payload_size))
    if event_time is not None:
        parts.append(b"\x28" + varint(event_time))
    if partition_key_b64_encoded:
        parts.append(b"\x30\x01")
    if ordering_key is not None:
        parts.append(b"\x3a" + varint(len(ordering_key)) + bytes(ordering_key))
    if sequence_id is not None:
        parts.append(b"\x40" + varint(sequence_id))
    if null_value:
        parts.append(b"\x48\x01")
    if null_partition_key:
        parts.append(b"\x50\x01")
    return b"".join(parts)


def _text(tag: int, text: str) -> bytes:
    data = text.encode("utf-8")
    return bytes((tag,)) + varint(len(data)) + data


def encode_single(
    payload: bytes | bytearray | memoryview,
    *,
    properties: Mapping[str, str] | None = None,
    partition_key: str | None = None,
    ordering_key: bytes | None = None,
    event_time: int | None = None,
    sequence_id: int | None = None,
    partition_key_b64_encoded: bool = False,
    null_value: bool = False,
    null_partition_key: bool = False,
) -> bytes:
    """Frame one message of a batch: size prefix, SingleMessageMetadata, payload.

    Concatenating the results for each message gives the batch payload.
    """
    header = single_header_with(
        len(payload), sequence_id, properties, partition_key, ordering_key, event_time,
        partition_key_b64_encoded, null_value, null_partition_key,
    )
    return header + bytes(payload)


def parse_single(single: bytes | SingleMessageMetadata) -> SingleMessageMetadata:
    """The SingleMessageMetadata of a message as :func:`read_batch` handed it over (bytes are parsed)."""
    if isinstance(single, SingleMessageMetadata):
        return single
    return SingleMessageMetadata.FromString(single)


def read_batch(
    data: bytes | bytearray | memoryview,
    count: int,
    build: Callable[[Any, int, bytes, bytes | SingleMessageMetadata], T],
    context: Any = None,
    unacked: int | None = None,
    out: list[T] | None = None,
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
    pos = 0
    for index in range(count):
        if pos + 4 > end:
            raise BatchFormatError(f"batch truncated: message {index} of {count} starts at byte {pos} of {end}")
        (meta_size,) = unpack_size(buf, pos)
        meta_end = pos + 4 + meta_size
        if meta_end > end:
            raise BatchFormatError(f"batch message {index}: metadata size {meta_size} runs past the end ({end} bytes)")
        single: bytes | SingleMessageMetadata = buf[pos + 4 : meta_end]
        size = -1
        compacted = False
        # What producers write for an unkeyed message (payload_size, then sequence_id) is read off
        # the bytes; exact, since such bytes parse to that payload size and nothing else.
        if meta_size <= _PLAIN_MAX:
            bits = to_int(single)  # type: ignore[arg-type]
            layout = plain_one[meta_size]
            if layout is not None and bits & layout[0] == layout[1]:
                size = single[1]  # type: ignore[index]
            else:
                layout = plain_two[meta_size]
                if layout is not None and bits & layout[0] == layout[1]:
                    size = single[1] & 0x7F | single[2] << 7  # type: ignore[index]
        if size < 0:
            single = _parse(single, index)  # type: ignore[arg-type]
            size = single.payload_size
            compacted = single.compacted_out
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


def unacked_mask(ack_set: Sequence[int], count: int) -> int:
    """Return a bitmask with bit ``i`` set if message ``i`` of ``count`` is still unacknowledged.

    Follows the official clients: an empty ``ack_set`` means all are
    unacknowledged, and an index beyond the last word counts as acknowledged.
    Test a message with ``mask >> i & 1``.
    """
    everything = (1 << count) - 1
    if not ack_set:
        return everything
    mask = 0
    for i, word in enumerate(ack_set):
        mask |= (word & _MASK64) << (64 * i)
    return mask & everything


def ack_set_words(mask: int, count: int) -> list[int]:
    """Encode an unacknowledged-bitmask for ``count`` messages as signed int64 words.

    Always ``ceil(count / 64)`` words, so a fully acknowledged batch encodes as
    words equal to 0 rather than as an empty list (which means "nothing acked").
    Bits at or above ``count`` are dropped.
    """
    mask &= (1 << count) - 1
    words = []
    for i in range((count + 63) // 64):
        word = (mask >> (64 * i)) & _MASK64
        words.append(word - (1 << 64) if word & _SIGN64 else word)
    return words

