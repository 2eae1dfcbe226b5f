"""Batch payloads and the ack_set bitset that filters them.

A batch entry's (uncompressed) payload is a run of messages, each framed as::

    [u32 big-endian metadata size][SingleMessageMetadata][payload_size bytes]

``MessageMetadata.num_messages_in_batch`` tells how many there are.

A partially acknowledged batch is redelivered with an ``ack_set``: int64 words
of a bitset (word ``i`` holds indexes ``64*i .. 64*i+63``, least significant bit
first) in which a set bit means "not yet acknowledged". An empty ``ack_set``
means nothing in the batch was acknowledged. :func:`unacked_mask` and :func:`ack_set_words`
convert between the words and one int bitset, for the client and the broker alike.

The framing of a batch payload is coded by hand in :mod:`.wire` (the client's one hand-coded codec).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .PulsarApi_pb2 import KeyValue, MessageMetadata, SingleMessageMetadata
from .wire import U64_MASK, signed64


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
