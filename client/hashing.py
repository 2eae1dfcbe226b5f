"""Key hashes Pulsar uses for routing keyed messages and for Key_Shared stickiness.

Both return non-negative 31-bit values (``& 0x7fffffff``) so ``hash % n`` matches Java.
"""

from __future__ import annotations

_MASK32 = 0xFFFFFFFF


def java_string_hash(key: str) -> int:
    """Java ``String.hashCode() & 0x7fffffff`` over the key's UTF-16 code units."""
    h = 0
    data = key.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK32
    return h & 0x7FFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def murmur3_32(data: bytes | str, seed: int = 0) -> int:
    """MurmurHash3 x86_32 of ``data`` (UTF-8 for strings) with Pulsar's ``& 0x7fffffff``."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _MASK32
    length = len(data)
    tail_start = length & ~3
    for i in range(0, tail_start, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = _rotl((k * c1) & _MASK32, 15)
        h ^= (k * c2) & _MASK32
        h = (_rotl(h, 13) * 5 + 0xE6546B64) & _MASK32
    k = 0
    tail = length & 3
    if tail == 3:
        k ^= data[tail_start + 2] << 16
    if tail >= 2:
        k ^= data[tail_start + 1] << 8
    if tail >= 1:
        k ^= data[tail_start]
        k = _rotl((k * c1) & _MASK32, 15)
        h ^= (k * c2) & _MASK32
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h & 0x7FFFFFFF
