"""Key hashes: Murmur3_32 and JavaStringHash as Pulsar's Java and C++ clients compute them."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_pulsar.client.hashing import java_string_hash, murmur3_32

# ---------------------------------------------------------------------------- independent models


def java_hash_code(text: str) -> int:
    """Java's String.hashCode() as a signed int: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units."""
    units = []
    for char in text:
        point = ord(char)
        if point >= 0x10000:  # a supplementary character is a surrogate pair in Java
            point -= 0x10000
            units += [0xD800 + (point >> 10), 0xDC00 + (point & 0x3FF)]
        else:
            units.append(point)
    h = sum(unit * pow(31, len(units) - 1 - i, 2**32) for i, unit in enumerate(units)) % 2**32
    return h - 2**32 if h >= 2**31 else h


def reference_murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3_x86_32 written from Austin Appleby's reference, unmasked."""

    def fmix(h: int) -> int:
        h ^= h >> 16
        h = (h * 0x85EBCA6B) % 2**32
        h ^= h >> 13
        h = (h * 0xC2B2AE35) % 2**32
        return h ^ (h >> 16)

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) % 2**32

    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed
    nblocks = len(data) // 4
    for (k,) in struct.iter_unpack("<I", data[: nblocks * 4]):
        k = (rotl((k * c1) % 2**32, 15) * c2) % 2**32
        h = (rotl(h ^ k, 13) * 5 + 0xE6546B64) % 2**32
    tail = data[nblocks * 4 :]
    if tail:
        k = int.from_bytes(tail, "little")
        h ^= (rotl((k * c1) % 2**32, 15) * c2) % 2**32
    return fmix(h ^ len(data))


# ---------------------------------------------------------------------------------------- Murmur3


@pytest.mark.parametrize(("key", "expected"), [("k1", 2110152746), ("key1", 462881061), ("key01", 39696932)])
def test_murmur3_pulsar_vectors(key, expected):
    assert murmur3_32(key) == expected
    assert murmur3_32(key.encode()) == expected


# SMHasher's published MurmurHash3_x86_32 verification values (data, seed, unmasked hash).
SMHASHER_VECTORS = [
    (b"", 0, 0x00000000),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"\x21\x43\x65\x87", 0, 0xF55B516B),
    (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    (b"\x21\x43\x65", 0, 0x7E4A8634),
    (b"\x21\x43", 0, 0xA0F7B07A),
    (b"\x21", 0, 0x72661CF4),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"\x00\x00\x00", 0, 0x85F0B427),
    (b"\x00\x00", 0, 0x30F4C306),
    (b"\x00", 0, 0x514E28B7),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
]


@pytest.mark.parametrize(("data", "seed", "expected"), SMHASHER_VECTORS)
def test_murmur3_reference_vectors_masked_to_31_bits(data, seed, expected):
    assert reference_murmur3_x86_32(data, seed) == expected
    assert murmur3_32(data, seed) == expected & 0x7FFFFFFF


def test_murmur3_hashes_strings_as_utf8():
    for key in ("ключ", "日本語", "😀", "é"):
        assert murmur3_32(key) == murmur3_32(key.encode("utf-8"))
        assert murmur3_32(key) == reference_murmur3_x86_32(key.encode("utf-8")) & 0x7FFFFFFF
    # Not UTF-16 or Latin-1.
    assert murmur3_32("é") != murmur3_32("é".encode("latin-1"))


@given(st.binary(max_size=300), st.integers(0, 2**32 - 1))
def test_murmur3_matches_the_reference(data, seed):
    assert murmur3_32(data, seed) == reference_murmur3_x86_32(data, seed) & 0x7FFFFFFF


@given(st.text(max_size=100))
def test_murmur3_is_31_bit(key):
    assert 0 <= murmur3_32(key) < 2**31


# ---------------------------------------------------------------------------------- JavaStringHash


# Values printed by String.hashCode() on OpenJDK 17.
JAVA_VECTORS = [
    ("", 0),
    ("k1", 3366),
    ("key1", 3288498),
    ("hello world", 1794106052),
    ("😀", 1772899),  # U+1F600 is the pair D83D DE00: 0xD83D * 31 + 0xDE00
    ("a😀b𝄞c", 1173292571),
    ("Ünïcödé", 1055431381),
    ("日本語", 25921943),
    ("order-12345", 478832884),
    ("polygenelubricants", -(2**31)),
    ("persistent://public/default/my-topic", -678218817),
    ("The quick brown fox jumps over the lazy dog", -609428141),
]


@pytest.mark.parametrize(("key", "java_hash"), JAVA_VECTORS)
def test_java_string_hash_matches_java(key, java_hash):
    assert java_hash_code(key) == java_hash
    assert java_string_hash(key) == java_hash & 0x7FFFFFFF


def test_non_bmp_character_hashes_its_surrogate_pair():
    assert java_string_hash("😀") == 0xD83D * 31 + 0xDE00 == 1772899
    # Not the code point, and not UTF-8 bytes.
    assert java_string_hash("😀") != 0x1F600
    # A string holding the pair as two code points hashes the same as the character.
    assert java_string_hash("\ud83d\ude00") == java_string_hash("😀")


def test_lone_surrogates_are_hashed_like_java():
    # Java strings may hold unpaired surrogates; Python strings can too.
    assert java_string_hash("\ud800") == 55296
    assert java_string_hash("ab\udc00") == 152575


def test_negative_java_hashes_are_masked_not_negated():
    # Java's hashCode of this string is Integer.MIN_VALUE; Pulsar's & 0x7fffffff gives 0.
    assert java_string_hash("polygenelubricants") == 0
    assert java_string_hash("persistent://public/default/my-topic") == (-678218817) & 0x7FFFFFFF == 1469264831


@given(st.text(max_size=200))
def test_java_string_hash_matches_the_model(key):
    assert java_string_hash(key) == java_hash_code(key) & 0x7FFFFFFF


@given(st.text(max_size=200))
def test_java_string_hash_is_31_bit(key):
    assert 0 <= java_string_hash(key) < 2**31


@given(st.text(max_size=50), st.integers(1, 64))
def test_partition_choice_is_in_range(key, partitions):
    # hash % n is how routers pick a partition; a non-negative hash keeps it in range as in Java.
    for hash_value in (java_string_hash(key), murmur3_32(key)):
        assert 0 <= hash_value % partitions < partitions
