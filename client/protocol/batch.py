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
from typing import Any
from collections.abc import Iterator, Mapping, Sequence

from google.protobuf.message import DecodeError

from .PulsarApi_pb2 import KeyValue, SingleMessageMetadata

__all__ = [
    "BatchFormatError",
    "ack_set_words",
    "encode_single",
    "iter_batch",
    "unacked_mask",
]

_SIZE = struct.Struct(">I")
_MASK64 = (1 << 64) - 1
_SIGN64 = 1 << 63


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

    Concatenating the results for each message gives the batch payload. Fields
    left at None/False are not written, as the official clients do.
    """
    meta = SingleMessageMetadata()
    meta.payload_size = len(payload)
    set_message_fields(meta, properties, partition_key, ordering_key, event_time)
    if sequence_id is not None:
        meta.sequence_id = sequence_id
    if partition_key_b64_encoded:
        meta.partition_key_b64_encoded = True
    if null_value:
        meta.null_value = True
    if null_partition_key:
        meta.null_partition_key = True
    encoded = meta.SerializeToString()
    return b"".join((_SIZE.pack(len(encoded)), encoded, payload))


def iter_batch(
    data: bytes | bytearray | memoryview, count: int
) -> Iterator[tuple[int, SingleMessageMetadata, bytes]]:
    """Yield ``(index, metadata, payload)`` for each of the ``count`` messages in ``data``.

    Framing is checked as the messages are read, so a malformed batch raises
    after yielding the messages before the fault.

    Raises:
        BatchFormatError: truncated data, a size running past the end, metadata
            that does not parse, or bytes left over after ``count`` messages.
    """
    if count < 0:
        raise BatchFormatError(f"negative message count {count}")
    # One copy up front makes every slice below a plain bytes object, which
    # is what callers hand to users anyway.
    buf = data if isinstance(data, bytes) else bytes(data)
    end = len(buf)
    parse = SingleMessageMetadata.FromString
    unpack_size = _SIZE.unpack_from
    pos = 0
    for index in range(count):
        if pos + 4 > end:
            raise BatchFormatError(
                f"batch truncated: message {index} of {count} starts at byte {pos} of {end}"
            )
        (meta_size,) = unpack_size(buf, pos)
        meta_start = pos + 4
        meta_end = meta_start + meta_size
        if meta_end > end:
            raise BatchFormatError(
                f"batch message {index}: metadata size {meta_size} runs past the end ({end} bytes)"
            )
        try:
            meta = parse(buf[meta_start:meta_end])
        except DecodeError as exc:
            raise BatchFormatError(f"batch message {index}: bad SingleMessageMetadata: {exc}") from exc
        if not meta.HasField("payload_size"):
            raise BatchFormatError(f"batch message {index}: SingleMessageMetadata has no payload_size")
        pos = meta_end + meta.payload_size
        if meta.payload_size < 0 or pos > end:
            raise BatchFormatError(
                f"batch message {index}: payload size {meta.payload_size} runs past the end ({end} bytes)"
            )
        yield index, meta, buf[meta_end:pos]
    if pos != end:
        raise BatchFormatError(f"batch has {end - pos} bytes left over after {count} messages")


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
