"""Batch payloads and the ack_set bitset that filters them.

A batch entry's (uncompressed) payload is a run of messages, each framed as::

    [u32 big-endian metadata size][SingleMessageMetadata][payload_size bytes]

``MessageMetadata.num_messages_in_batch`` tells how many there are.

A partially acknowledged batch is redelivered with an ``ack_set``: int64 words
of a bitset (word ``i`` holds indexes ``64*i .. 64*i+63``, least significant bit
first) in which a set bit means "not yet acknowledged". An empty ``ack_set``
means nothing in the batch was acknowledged.

The framing of a batch payload is coded by hand in :mod:`.wire` (the client's one hand-coded
codec): its encoders and splitting decoder are re-exported here as the batch API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .PulsarApi_pb2 import KeyValue, MessageMetadata, SingleMessageMetadata
from .wire import (
    U64_MASK,
    BatchFormatError,
    encode_single,
    parse_single,
    read_batch,
    signed64,
    single_header,
    single_header_with,
)

__all__ = [
    "BatchFormatError",
    "ack_set_words",
    "encode_single",
    "parse_single",
    "read_batch",
    "set_message_fields",
    "single_header",
    "single_header_with",
    "unacked_mask",
]


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
        mask |= (word & U64_MASK) << (64 * i)
    return mask & everything


def ack_set_words(mask: int, count: int) -> list[int]:
    """Encode an unacknowledged-bitmask for ``count`` messages as signed int64 words.

    Always ``ceil(count / 64)`` words, so a fully acknowledged batch encodes as
    words equal to 0 rather than as an empty list (which means "nothing acked").
    Bits at or above ``count`` are dropped.
    """
    mask &= (1 << count) - 1
    return [signed64(mask >> (64 * i) & U64_MASK) for i in range((count + 63) // 64)]

