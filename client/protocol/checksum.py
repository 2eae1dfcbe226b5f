"""CRC32C (Castagnoli), the checksum Pulsar puts in front of message metadata and payload."""

from __future__ import annotations

from crc32c import crc32c as _crc32c

__all__ = ["crc32c"]


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """Return the CRC32C of ``data``, continuing from ``value``.

    ``crc32c(b, crc32c(a)) == crc32c(a + b)``, so a frame's checksum can be
    computed over its parts without joining them first.
    """
    return _crc32c(data, value)
