"""Importing the client loads what every use of it needs, and leaves what only some paths use
(Avro, encryption, the asyncio API, the admin client, the checksum's package) to the first use.
Each check runs in a fresh interpreter, so nothing pytest or another test imported can hide a load."""

from __future__ import annotations

import subprocess
import sys

import pytest

import airflow_pulsar.client

# Loaded on first use, not by ``import airflow_pulsar.client``.
DEFERRED = ("packaging", "importlib.metadata", "fastavro", "cryptography", "crc32c", "asyncio", "httpx", "airflow_pulsar.broker")


def _loaded_after(code: str) -> list[str]:
    """The modules of ``DEFERRED`` that ``code`` loads (not those the interpreter's start loaded)."""
    probe = (
        f"import sys\nstarted = set(sys.modules)\n{code}\n"
        f"print(sorted(m for m in set(sys.modules) - started if any(m == d or m.startswith(d + '.') for d in {DEFERRED!r})))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [name.strip("' ") for name in result.stdout.strip().strip("[]").split(",") if name.strip()]


def test_importing_the_client_defers_what_only_some_paths_use() -> None:
    assert _loaded_after("import airflow_pulsar.client") == []


@pytest.mark.parametrize(
    ("use", "loads"),
    [
        ("from airflow_pulsar.client.protocol import checksum\nassert checksum.crc32c(b'123456789') == 0xE3069283", "crc32c"),
        ("from airflow_pulsar.client.schema import AvroSchema as A\nA(None, {'type': 'record', 'name': 'R', 'fields': []})", "fastavro"),
        # The key files do not exist: the encryptor logs that, having loaded the ciphers to use them.
        ("from airflow_pulsar.client.crypto import MessageEncryptor as E, CryptoKeyReader as R\nE(['k'], R('-', '-'))", "cryptography"),
        ("import airflow_pulsar.client.asyncio", "asyncio"),
        ("import airflow_pulsar.client.admin", "httpx"),
    ],
)
def test_a_deferred_package_loads_at_its_first_use(use: str, loads: str) -> None:
    assert loads in _loaded_after(use)


def test_every_public_name_and_module_attribute_is_there() -> None:
    for name in airflow_pulsar.client.__all__:
        assert getattr(airflow_pulsar.client, name) is not None, name
    assert airflow_pulsar.client.schema.AvroSchema is not None
    assert airflow_pulsar.client.exceptions.PulsarException is not None
