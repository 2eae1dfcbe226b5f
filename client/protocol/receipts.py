"""SEND_RECEIPTs as the reader thread hands them on, most read off their bytes by a learned shape.

A broker answers a producer's SENDs with receipts that differ from one to the next only in the
values of the sequence id, the highest sequence id and the entry id. Once a receipt was parsed
field by field, its *shape* is kept: the bytes of its frame from the command size on, with any
varint *of the same width* in those three fields, so every size in front stays what it was. A
receipt of that shape parses to the same fields with other values: one match of a compiled
regular expression reads it, and only the sequence id, which matching it to its send needs, is
decoded; the rest is parsed if read (a ``send_async`` without a callback never reads the id).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .field_bytes import field_spans, varint_of_width, varint_value
from .PulsarApi_pb2 import CommandSendReceipt, MessageIdData
from .wire import RECEIPT_ENVELOPE, U64_MASK

__all__ = ["MAX_RECEIPT_SHAPES", "ReceiptShapes", "SendReceipt"]

# The shapes a decoder keeps, the newest first: a few producers' receipts interleave on a connection.
MAX_RECEIPT_SHAPES = 8
# Field keys of CommandSendReceipt whose values differ between receipts of one shape, and of MessageIdData's entry id.
_SEQUENCE_ID, _MESSAGE_ID, _HIGHEST_SEQUENCE_ID = 0x10, 0x1A, 0x20
_ENTRY_ID = 0x10
# Where the receipt's body starts in its frame (from the command size on): after the size, the
# BaseCommand's type, the body's key and a one-byte body length.
_BODY_AT = 8


class SendReceipt:
    """A SEND_RECEIPT: the producer and sequence ids at hand, the rest parsed on first read."""

    __slots__ = ("producer_id", "sequence_id", "_body", "_parsed")

    def __init__(self, producer_id: int, sequence_id: int, body: bytes, parsed: CommandSendReceipt | None = None):
        self.producer_id = producer_id
        self.sequence_id = sequence_id
        self._body = body
        self._parsed = parsed

    @classmethod
    def of(cls, receipt: CommandSendReceipt) -> SendReceipt:
        """The SendReceipt of a receipt parsed field by field."""
        return cls(receipt.producer_id, receipt.sequence_id, b"", receipt)

    @property
    def message_id(self) -> MessageIdData:
        """Where the broker stored the message."""
        return self.command().message_id

    @property
    def highest_sequence_id(self) -> int:
        """The highest sequence id of the entry (a batch's last)."""
        return self.command().highest_sequence_id

    def command(self) -> CommandSendReceipt:
        """The receipt as the generated classes read it."""
        parsed = self._parsed
        if parsed is None:  # two threads may both parse it: the same fields either way
            parsed = self._parsed = CommandSendReceipt.FromString(self._body)
        return parsed

    def __repr__(self) -> str:
        return f"SendReceipt(producer_id={self.producer_id}, sequence_id={self.sequence_id})"


class ReceiptShapes:
    """The shapes of the receipts one decoder has parsed; see the module's description."""

    __slots__ = ("_shapes",)

    def __init__(self) -> None:
        # (the compiled shape's fullmatch, the producer id it holds, where its sequence id lies and its width)
        self._shapes: list[tuple[Callable[..., re.Match[bytes] | None], int, int, int]] = []

    def read(self, view: memoryview, start: int, stop: int) -> SendReceipt | None:
        """The receipt in ``view[start:stop]`` (a frame from its command size on), if it has a shape seen before."""
        for match, producer_id, at, width in self._shapes:
            if match(view, start, stop) is not None:
                at += start
                sequence_id = _VARINTS[width](int.from_bytes(view[at : at + width], "little")) & U64_MASK  # a uint64, as protobuf reads it
                return SendReceipt(producer_id, sequence_id, bytes(view[start + _BODY_AT : stop]))
        return None

    def learn(self, frame: bytes, receipt: CommandSendReceipt) -> None:
        """Keep the shape of ``frame`` (from its command size on, no payload), which parsed to ``receipt``."""
        shape = _shape(frame)
        if shape is not None:
            pattern, at, width = shape
            kept = [kept for kept in self._shapes if kept[1] != receipt.producer_id]
            match: Callable[..., re.Match[bytes] | None] = re.compile(pattern, re.DOTALL).fullmatch
            self._shapes = [(match, receipt.producer_id, at, width), *kept][:MAX_RECEIPT_SHAPES]


def _shape(frame: bytes) -> tuple[bytes, int, int] | None:
    """The regular expression of a receipt frame's shape, and where in the frame its sequence id
    lies and its width; None for a frame whose BaseCommand holds more than the receipt, or a
    receipt without one sequence id."""
    if (
        len(frame) < _BODY_AT or int.from_bytes(frame[:4], "big") != len(frame) - 4
        or frame[4:7] != RECEIPT_ENVELOPE or frame[7] != len(frame) - _BODY_AT
    ):
        return None
    body = field_spans(frame, _BODY_AT)
    if body is None or [span.tag for span in body].count(_SEQUENCE_ID) != 1:
        return None
    parts = [re.escape(frame[:_BODY_AT])]
    sequence_at = width = 0
    for span in body:
        if span.tag == _SEQUENCE_ID:
            sequence_at, width = span.value, span.end - span.value
            parts.append(re.escape(bytes((span.tag,))) + varint_of_width(width))
        elif span.tag == _HIGHEST_SEQUENCE_ID:
            parts.append(re.escape(bytes((span.tag,))) + varint_of_width(span.end - span.value))
        elif span.tag == _MESSAGE_ID:
            inner = field_spans(frame, span.value, span.end)
            if inner is None:
                return None
            parts.append(re.escape(frame[span.start : span.value]))
            for field in inner:
                if field.tag == _ENTRY_ID:
                    parts.append(re.escape(bytes((field.tag,))) + varint_of_width(field.end - field.value))
                else:
                    parts.append(re.escape(frame[field.start : field.end]))
        else:
            parts.append(re.escape(frame[span.start : span.end]))
    return b"".join(parts), sequence_at, width


def _varint_bits(width: int) -> Callable[[int], int]:
    """The value of a varint of ``width`` bytes from the little-endian int of its bytes."""
    if width == 1:
        return lambda bits: bits
    if width == 2:
        return lambda bits: bits & 0x7F | bits >> 1 & 0x3F80
    if width == 3:
        return lambda bits: bits & 0x7F | bits >> 1 & 0x3F80 | bits >> 2 & 0x1FC000
    return lambda bits: varint_value(bits.to_bytes(width, "little"))


# By width: sequence ids of up to three bytes (2**21) read without a loop.
_VARINTS = {width: _varint_bits(width) for width in range(1, 11)}
