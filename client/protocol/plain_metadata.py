"""Entries of one plain message told off their metadata's bytes, the metadata left unparsed.

A producer's unbatched messages carry MessageMetadata that differ from one to the next only in
the values of a few varint fields: the sequence id and the publish time, and the uncompressed
size and event time where the payloads' sizes or times vary. Once the metadata of one entry was
parsed and found to be that of a plain message (no batch count, compression, encryption keys or
chunk count), its *shape* is kept: its bytes with any varints in those fields. Metadata of the
same shape parse to the same fields with other values, so they are plain too; a compiled regular
expression tells that in one C call, and the consumer parses such metadata only when the
application reads a field of it (see ``Delivery.metadata``).

Fields are matched in the order the shape's metadata had them, as producers write them (field
number order); metadata in another order, or with fields other than those, is parsed as before.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable

from .field_bytes import ANY_VARINT, field_spans

__all__ = ["MAX_LEARNED", "MAX_SHAPES", "PlainShapes", "shape_pattern"]

# The shapes a consumer keeps (the newest first): one per producer of the partition, say.
MAX_SHAPES = 4
# Shapes learned at most per consumer: metadata whose other fields (keys, properties) change from
# one message to the next make a new shape each time, and then parsing is cheaper than learning.
MAX_LEARNED = 64
# Tag bytes of the varint fields whose value may change between metadata of one shape:
# sequence_id (2), publish_time (3), uncompressed_size (9), event_time (12).
_VARIABLE = frozenset((0x10, 0x18, 0x48, 0x60))
_REQUIRED = (0x10, 0x18)  # every producer writes these two
_U32 = struct.Struct(">I")

Match = Callable[..., "re.Match[bytes] | None"]  # a compiled shape's fullmatch(entry, start, end)


class PlainShapes:
    """The shapes of plain metadata one consumer has seen; see the module's description."""

    __slots__ = ("_matchers", "_learned")

    def __init__(self) -> None:
        self._matchers: list[Match] = []
        self._learned = 0

    def payload_at(self, entry: bytes) -> int:
        """Where the payload of ``entry`` (``[metadata size][metadata][payload]``) starts, if its
        metadata has the shape of plain metadata seen before; else 0."""
        matchers = self._matchers
        if not matchers or len(entry) < 4:
            return 0
        at = 4 + _U32.unpack_from(entry, 0)[0]
        if at <= len(entry):
            for match in matchers:
                if match(entry, 4, at) is not None:
                    return at
        return 0

    def learn(self, metadata: bytes) -> None:
        """Keep the shape of ``metadata``, serialized metadata just parsed and found plain (not
        one that :meth:`matches`), unless its fields do not lend themselves to a shape."""
        if self._learned >= MAX_LEARNED:
            self._matchers = []  # metadata that keep changing shape: parsed as they come, no pattern tried first
            return
        pattern = shape_pattern(metadata)
        if pattern is None:
            return
        self._learned += 1
        match: Match = re.compile(pattern, re.DOTALL).fullmatch
        self._matchers = [match, *self._matchers][:MAX_SHAPES]


def shape_pattern(metadata: bytes) -> bytes | None:
    """The regular expression of ``metadata``'s shape: its bytes, with any varint in place of the
    values of the fields that may change; None if it does not read as fields, or lacks the
    sequence id or the publish time."""
    spans = field_spans(metadata)
    if spans is None or not all(any(span.tag == tag for span in spans) for tag in _REQUIRED):
        return None
    return b"".join(
        re.escape(bytes((span.tag,))) + ANY_VARINT if span.tag in _VARIABLE else re.escape(metadata[span.start : span.end])
        for span in spans
    )
