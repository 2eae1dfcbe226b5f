"""CRC32C (Castagnoli), the checksum Pulsar puts in front of message metadata and payload.

``crc32c(data, value=0)`` returns the CRC32C of ``data``, continuing from ``value``:
``crc32c(b, crc32c(a)) == crc32c(a + b)``, so a frame's checksum can be computed over its parts
without joining them first. It is the C extension's function itself: every frame sent or
received is checked, and a Python wrapper would cost a call each time.
"""

from __future__ import annotations

from crc32c import crc32c

__all__ = ["crc32c"]
