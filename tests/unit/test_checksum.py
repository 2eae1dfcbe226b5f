"""CRC32C as Pulsar's frames use it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_pulsar.client.protocol.checksum import crc32c


def test_standard_check_value():
    # The CRC-32C check value from the Castagnoli catalogue.
    assert crc32c(b"123456789") == 0xE3069283


def test_empty_input_keeps_the_running_value():
    assert crc32c(b"") == 0
    assert crc32c(b"", 0x1234) == 0x1234


def test_accepts_bytearray_and_memoryview():
    data = b"pulsar frame body"
    expected = crc32c(data)
    assert crc32c(bytearray(data)) == expected
    assert crc32c(memoryview(b"xx" + data)[2:]) == expected


@given(st.binary(max_size=2048), st.integers(min_value=0, max_value=2048))
def test_incremental_equals_one_shot(data, cut):
    cut = min(cut, len(data))
    assert crc32c(data[cut:], crc32c(data[:cut])) == crc32c(data)
