"""Where the broker's secrets come from: files and environment variables, never its arguments.

Every user of a machine can read a process's arguments (``ps``, ``/proc/PID/cmdline``), so a
secret key or a users file given in place on the command line is refused with a message naming
the two ways that keep it private; ``env:NAME`` reads it from the environment, which only the
process's own user can read.
"""

from __future__ import annotations

import argparse
import base64
from pathlib import Path

import pytest

from airflow_pulsar.broker.authentication import Credentials
from airflow_pulsar.broker.authentication_basic import BasicConfigError, BasicProvider
from airflow_pulsar.broker.config import BrokerConfig, ConfigError, add_arguments, from_arguments
from airflow_pulsar.broker.password_hashes import apr1_md5_crypt
from airflow_pulsar.broker.token_keys import create_key_pair, read_public_key, read_secret_key
from airflow_pulsar.broker.tokens import TokenError

KEY = bytes(range(32))
USERS = f"alice:{apr1_md5_crypt(b'secret', b'salt1234')}\n"


def parse(*argv: str) -> BrokerConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return from_arguments(parser.parse_args(["--data-dir", "/tmp/unused", *argv]))


@pytest.mark.parametrize(
    "argv",
    [
        ("--token-secret-file", "data:;base64," + base64.b64encode(KEY).decode()),
        ("--basic-auth-conf", "data:;base64," + base64.b64encode(USERS.encode()).decode()),
        ("--basic-auth-conf", base64.b64encode(USERS.encode()).decode()),
    ],
    ids=["secret-key-data-url", "users-data-url", "users-base64"],
)
def test_secrets_in_the_arguments_are_refused(argv: tuple[str, str]) -> None:
    option = argv[0]
    with pytest.raises(ConfigError) as refused:
        parse(*argv)
    message = str(refused.value)
    assert message.startswith(f"{option}: ") and "every user of this machine can read it" in message
    assert f"give a file ({option} " in message and f"({option} env:NAME)" in message
    assert argv[1] not in message, "the refusal must not repeat the secret"


def test_files_variables_and_public_keys_are_taken(tmp_path: Path) -> None:
    key_file = tmp_path / "secret.key"
    key_file.write_bytes(KEY)
    assert parse("--token-secret-file", str(key_file)).token_secret_file == str(key_file)
    assert parse("--token-secret-file", "env:PULSAR_SECRET").token_secret_file == "env:PULSAR_SECRET"
    assert parse("--basic-auth-conf", "env:PULSAR_USERS").basic_auth_conf == "env:PULSAR_USERS"
    # A public key is no secret: Pulsar's data: form stays.
    _, public = create_key_pair("RS256")
    inline = "data:;base64," + base64.b64encode(public).decode()
    assert parse("--token-public-key", inline).token_public_key == inline


def test_secret_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULSAR_SECRET", base64.b64encode(KEY).decode())
    assert read_secret_key("env:PULSAR_SECRET") == KEY
    monkeypatch.setenv("PULSAR_SECRET", "data:;base64," + base64.b64encode(KEY).decode())
    assert read_secret_key("env:PULSAR_SECRET") == KEY
    monkeypatch.setenv("PULSAR_SECRET", "not base64!")
    with pytest.raises(TokenError, match="environment variable PULSAR_SECRET holds no secret key"):
        read_secret_key("env:PULSAR_SECRET")
    monkeypatch.delenv("PULSAR_SECRET")
    with pytest.raises(TokenError, match="environment variable PULSAR_SECRET, named for the secret key, is not set"):
        read_secret_key("env:PULSAR_SECRET")


def test_public_key_from_the_environment_in_pem(monkeypatch: pytest.MonkeyPatch) -> None:
    from cryptography.hazmat.primitives import serialization

    _, der = create_key_pair("ES256")
    pem = serialization.load_der_public_key(der).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    monkeypatch.setenv("PULSAR_PUBLIC_KEY", pem.decode())
    key = read_public_key("env:PULSAR_PUBLIC_KEY", "ES256")
    assert key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) == der


def test_users_file_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in (USERS, base64.b64encode(USERS.encode()).decode(), "data:," + USERS.replace("\n", "%0A")):
        monkeypatch.setenv("PULSAR_USERS", value)
        provider = BasicProvider.from_conf("env:PULSAR_USERS")
        assert provider.authenticate(Credentials(b"alice:secret")).name == "alice"
    monkeypatch.setenv("PULSAR_USERS", "")
    with pytest.raises(BasicConfigError, match="PULSAR_USERS, named for the basic auth users, is not set"):
        BasicProvider.from_conf("env:PULSAR_USERS")
