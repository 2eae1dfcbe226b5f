"""The fields of a serialized protobuf message as byte ranges, for patterns that match its bytes
(see ``plain_metadata`` and ``receipts``): where each field's tag, value and end lie, and
regular expressions for varints."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ANY_VARINT", "FieldSpan", "field_spans", "varint_of_width", "varint_value"]

# A varint of at most 9 bytes: any 63-bit value.
ANY_VARINT = rb"[\x80-\xff]{0,8}[\x00-\x7f]"
_FIXED_SIZES = {1: 8, 5: 4}  # the wire types fixed64 and fixed32


class FieldSpan(NamedTuple):
    """One field: the first byte of its tag (a field number under 16 is all of it), where its
    value starts (a length-delimited one's after its length) and where the field ends."""

    tag: int
    start: int
    value: int
    end: int


def field_spans(data: bytes, start: int = 0, end: int | None = None) -> list[FieldSpan] | None:
    """The fields of ``data[start:end]`` in order; None if it does not read as fields to its end
    (a group, a length past the end, a varint cut short)."""
    stop = len(data) if end is None else end
    spans: list[FieldSpan] = []
    at = start
    while at < stop:
        tag = data[at]
        value = _varint_end(data, at, stop)
        if value < 0:
            return None
        wire_type = tag & 7
        if wire_type == 0:
            field_end = _varint_end(data, value, stop)
        elif wire_type == 2:
            length_end = _varint_end(data, value, stop)
            if length_end < 0:
                return None
            field_end = length_end + varint_value(data[value:length_end])
            value = length_end
        elif wire_type in _FIXED_SIZES:
            field_end = value + _FIXED_SIZES[wire_type]
        else:
            return None
        if field_end < 0 or field_end > stop:
            return None
        spans.append(FieldSpan(tag, at, value, field_end))
        at = field_end
    return spans


def varint_of_width(width: int) -> bytes:
    """The regular expression of any varint of exactly ``width`` bytes."""
    return rb"[\x80-\xff]" * (width - 1) + rb"[\x00-\x7f]"


def varint_value(data: bytes) -> int:
    """The value of the varint that is all of ``data``."""
    value = shift = 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        shift += 7
    return value


def _varint_end(data: bytes, at: int, stop: int) -> int:
    """Where the varint at ``at`` ends (of at most 10 bytes, within ``stop``); -1 if it runs past."""
    for end in range(at, min(at + 10, stop)):
        if data[end] < 0x80:
            return end + 1
    return -1
