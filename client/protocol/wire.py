"""Protobuf wire-format primitives for the few messages coded by hand on hot paths.

A message built through the generated classes costs an object per field and per message; the
per-message metadata in a batch, the metadata of an unkeyed entry and the commands sent once
per entry (SEND, SEND_RECEIPT, MESSAGE) are small and fixed enough to be written as bytes.
Everything else goes through ``PulsarApi_pb2``. Fields are written in field-number order, as
protobuf serializes them, so hand-coded bytes equal the generated classes' bytes.
"""

from __future__ import annotations

__all__ = ["U64_MASK", "varint"]

U64_MASK = (1 << 64) - 1
_ONE_BYTE = [bytes((value,)) for value in range(0x80)]


def varint(value: int) -> bytes:
    """The base-128 varint of ``value`` (0 <= value < 2**64).

    A negative int32 or int64 field is written as its 64-bit two's complement, as protobuf
    does: pass ``value & U64_MASK``.
    """
    if value < 0x80:
        if value < 0:
            raise ValueError(f"a varint holds 0 .. 2**64 - 1, not {value}")
        return _ONE_BYTE[value]
    if value >> 64:
        raise ValueError(f"a varint holds 0 .. 2**64 - 1, not {value}")
    if value < 0x4000:
        return bytes((value & 0x7F | 0x80, value >> 7))
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
