"""Payload codecs: round trips, wire formats the official clients use, and error reporting."""

from __future__ import annotations

import os
import zlib

import cramjam
import pulsar
import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_pulsar.client.protocol import PulsarApi_pb2
from airflow_pulsar.client.protocol.compression import (
    CompressionError,
    CompressionType,
    compress,
    decompress,
)

CODECS = [CompressionType.LZ4, CompressionType.ZLIB, CompressionType.ZSTD, CompressionType.SNAPPY]

SAMPLES = [
    b"",
    b"x",
    b"hello pulsar " * 500,
    os.urandom(4096),
    bytes(range(256)) * 64,
]


def test_values_match_the_proto_enum():
    assert {m.name: int(m) for m in CompressionType} == dict(PulsarApi_pb2.CompressionType.items())


def test_values_and_names_match_the_official_client():
    official = pulsar.CompressionType
    for name in ("NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY"):
        assert CompressionType[name] == int(getattr(official, name))
    assert CompressionType.ZLib is CompressionType.ZLIB


@pytest.mark.parametrize("kind", CODECS, ids=lambda k: k.name)
@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}B")
def test_round_trip(kind, data):
    packed = compress(kind, data)
    assert isinstance(packed, bytes)
    assert decompress(kind, packed, len(data)) == data


@pytest.mark.parametrize("kind", CODECS, ids=lambda k: k.name)
def test_accepts_bytearray_and_memoryview(kind):
    data = b"abc" * 1000
    packed = compress(kind, bytearray(data))
    assert decompress(kind, memoryview(packed), len(data)) == data
    assert compress(kind, memoryview(b"--" + data)[2:]) == compress(kind, data)
    assert decompress(kind, bytearray(packed), len(data)) == data


@given(st.sampled_from(CODECS), st.binary(max_size=4096))
def test_round_trip_property(kind, data):
    assert decompress(kind, compress(kind, data), len(data)) == data


def test_none_returns_the_input_object():
    data = memoryview(b"payload")
    assert compress(CompressionType.NONE, data) is data
    assert decompress(CompressionType.NONE, data, 0) is data
    assert decompress(0, data, 999) is data


def test_plain_ints_select_the_codec():
    data = b"plain int kinds " * 10
    assert decompress(1, compress(1, data), len(data)) == data


# Formats: what the C++ and Java clients put on the wire.

DATA = b"the quick brown fox jumps over the lazy dog " * 50


def test_lz4_is_a_raw_block_without_size_prefix():
    packed = compress(CompressionType.LZ4, DATA)
    assert bytes(cramjam.lz4.decompress_block(packed, output_len=len(DATA))) == DATA
    # A block written by another LZ4 implementation decodes too.
    foreign = bytes(
        cramjam.lz4.compress_block(DATA, store_size=False, compression=9, mode="high_compression")
    )
    assert decompress(CompressionType.LZ4, foreign, len(DATA)) == DATA


def test_zlib_is_zlib_wrapped():
    packed = compress(CompressionType.ZLIB, DATA)
    assert packed[0] == 0x78  # zlib header, deflate with 32K window
    assert zlib.decompress(packed) == DATA
    assert decompress(CompressionType.ZLIB, zlib.compress(DATA, 9), len(DATA)) == DATA


def test_zlib_stream_without_final_block_is_accepted():
    # The C++ client inflates with Z_PARTIAL_FLUSH and accepts such streams.
    deflater = zlib.compressobj()
    unfinished = deflater.compress(DATA) + deflater.flush(zlib.Z_SYNC_FLUSH)
    assert decompress(CompressionType.ZLIB, unfinished, len(DATA)) == DATA


def test_zstd_is_one_frame():
    packed = compress(CompressionType.ZSTD, DATA)
    assert packed[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic
    assert bytes(cramjam.zstd.decompress(packed)) == DATA


def test_snappy_is_raw_not_framed():
    packed = compress(CompressionType.SNAPPY, DATA)
    assert not packed.startswith(b"\xff\x06\x00\x00sNaPpY")
    assert bytes(cramjam.snappy.decompress_raw(packed)) == DATA
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(DATA)), len(DATA)) == DATA


# Errors.


@pytest.mark.parametrize("kind", CODECS, ids=lambda k: k.name)
def test_corrupt_data_names_the_codec(kind):
    packed = compress(kind, DATA)
    corrupt = b"\xff\xfe\xfd\xfc" + packed[4:-4]
    with pytest.raises(CompressionError, match=kind.name):
        decompress(kind, corrupt, len(DATA))


@pytest.mark.parametrize("kind", CODECS, ids=lambda k: k.name)
@pytest.mark.parametrize("delta", [-1, 1, -len(DATA), 1000])
def test_wrong_uncompressed_size_is_an_error(kind, delta):
    packed = compress(kind, DATA)
    with pytest.raises(CompressionError, match=kind.name):
        decompress(kind, packed, len(DATA) + delta)


@pytest.mark.parametrize("kind", CODECS, ids=lambda k: k.name)
def test_truncated_data_is_an_error(kind):
    packed = compress(kind, os.urandom(2000))
    with pytest.raises(CompressionError, match=kind.name):
        decompress(kind, packed[: len(packed) // 2], 2000)


@pytest.mark.parametrize("kind", CODECS, ids=lambda k: k.name)
def test_negative_size_is_an_error(kind):
    with pytest.raises(CompressionError, match="negative"):
        decompress(kind, compress(kind, b"a"), -1)


def test_unknown_codec_is_an_error():
    with pytest.raises(CompressionError, match="unknown compression type 9"):
        decompress(9, b"data", 4)
    with pytest.raises(CompressionError, match="unknown compression type 9"):
        compress(9, b"data")


def test_compression_error_is_a_value_error():
    assert issubclass(CompressionError, ValueError)


@given(st.sampled_from(CODECS), st.binary(max_size=512), st.integers(min_value=0, max_value=4096))
def test_garbage_only_ever_raises_compression_error(kind, garbage, size):
    try:
        result = decompress(kind, garbage, size)
    except CompressionError:
        return
    assert len(result) == size
