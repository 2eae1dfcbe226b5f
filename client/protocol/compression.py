"""Payload codecs, byte-compatible with the official Pulsar clients.

A producer compresses the whole entry payload (for a batch: all messages
with their single-message headers) and records the codec and the original
length in ``MessageMetadata.compression`` / ``uncompressed_size``. The
formats are the ones the C++ and Java clients use:

* LZ4: one raw LZ4 block, no length prefix (the length is in the metadata);
* ZLIB: a zlib-wrapped deflate stream;
* ZSTD: one zstd frame, compressed at level 3;
* SNAPPY: raw snappy (not the framed format).
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Callable

import cramjam

__all__ = ["CompressionError", "CompressionType", "compress", "decompress"]

Buffer = bytes | bytearray | memoryview

# The level the official clients use; a different level would still decode,
# but would make our output differ from theirs for no benefit.
_ZSTD_LEVEL = 3


class CompressionType(enum.IntEnum):
    """Codec of an entry payload; values are ``MessageMetadata.compression`` on the wire."""

    NONE = 0
    LZ4 = 1
    ZLIB = 2
    ZSTD = 3
    SNAPPY = 4
    # Spelling of the official Python client, so code written for it works unchanged.
    ZLib = 2


class CompressionError(ValueError):
    """A payload could not be decompressed: corrupt data or wrong uncompressed size."""


def _zlib_decompress(data: Buffer, size: int) -> bytes:
    # A decompressor object, unlike zlib.decompress, accepts a stream without
    # its final block marker, as the C++ client's inflate does. Asking for one
    # byte more than declared is how an overlong payload shows itself.
    return zlib.decompressobj().decompress(data, size + 1)


def _into_exact(decompress_into: Callable[[Buffer, bytearray], int]) -> Callable[[Buffer, int], bytes]:
    # cramjam pads its plain decompress output to the size hint, which would
    # hide a short payload; writing into a buffer reports the real length.
    def run(data: Buffer, size: int) -> bytes:
        out = bytearray(size)
        written = decompress_into(data, out)
        return bytes(out) if written == size else bytes(out[:written])

    return run


_COMPRESSORS: dict[CompressionType, Callable[[Buffer], bytes]] = {
    CompressionType.LZ4: lambda data: bytes(cramjam.lz4.compress_block(data, store_size=False)),
    CompressionType.ZLIB: zlib.compress,
    CompressionType.ZSTD: lambda data: bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL)),
    CompressionType.SNAPPY: lambda data: bytes(cramjam.snappy.compress_raw(data)),
}

_DECOMPRESSORS: dict[CompressionType, Callable[[Buffer, int], bytes]] = {
    CompressionType.LZ4: _into_exact(cramjam.lz4.decompress_block_into),
    CompressionType.ZLIB: _zlib_decompress,
    CompressionType.ZSTD: _into_exact(cramjam.zstd.decompress_into),
    CompressionType.SNAPPY: _into_exact(cramjam.snappy.decompress_raw_into),
}


def _codec(kind: int) -> CompressionType:
    try:
        return CompressionType(kind)
    except ValueError:
        raise CompressionError(f"unknown compression type {kind!r}") from None


def compress(kind: int, data: Buffer) -> Buffer:
    """Compress ``data`` with codec ``kind``; ``NONE`` returns ``data`` itself."""
    if kind == CompressionType.NONE:
        return data
    return _COMPRESSORS[_codec(kind)](data)


def decompress(kind: int, data: Buffer, uncompressed_size: int) -> Buffer:
    """Decompress ``data`` that must expand to exactly ``uncompressed_size`` bytes.

    ``NONE`` returns ``data`` itself without checking the size, since producers
    need not set ``uncompressed_size`` for uncompressed payloads. Callers should
    bound ``uncompressed_size`` (e.g. by the max message size) before calling,
    as this allocates it up front.

    Raises:
        CompressionError: unknown codec, corrupt data, or a length other than
            ``uncompressed_size``.
    """
    if kind == CompressionType.NONE:
        return data
    codec = _codec(kind)
    if uncompressed_size < 0:
        raise CompressionError(f"{codec.name}: negative uncompressed size {uncompressed_size}")
    try:
        result = _DECOMPRESSORS[codec](data, uncompressed_size)
    except (cramjam.DecompressionError, zlib.error) as exc:
        raise CompressionError(
            f"{codec.name}: cannot decompress {len(data)} bytes to {uncompressed_size} bytes: {exc}"
        ) from exc
    if len(result) != uncompressed_size:
        got = "more" if len(result) > uncompressed_size else f"{len(result)} bytes"
        raise CompressionError(
            f"{codec.name}: payload expands to {got}, metadata declares {uncompressed_size} bytes"
        )
    return result
