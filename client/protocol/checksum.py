"""CRC32C (Castagnoli), the checksum Pulsar puts in front of message metadata and payload.

``crc32c(data, value=0)`` returns the CRC32C of ``data``, continuing from ``value``:
``crc32c(b, crc32c(a)) == crc32c(a + b)``, so a frame's checksum can be computed over its parts
without joining them first. It is the C extension's function itself: every frame sent or
received is checked, and a Python wrapper would cost a call each time.

The ``crc32c`` package loads at the first use, not with the client: its ``__init__`` looks up its
own version through ``importlib.metadata``, some 15 ms. Callers read ``checksum.crc32c`` where
they call it, so the first call loads it; from then on it is a plain module global.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crc32c import crc32c

__all__ = ["crc32c"]


def __getattr__(name: str) -> Any:
    if name != "crc32c":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from crc32c import crc32c

    globals()["crc32c"] = crc32c
    return crc32c
