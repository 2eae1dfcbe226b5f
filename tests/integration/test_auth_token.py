"""Token authentication end to end: the broker with --token-secret-file, our client and admin client,
and ``airflow-pulsar tokens``."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import AuthenticationToken, Client, InitialPosition
from airflow_pulsar.client.admin import AdminAuthenticationError, PulsarAdmin
from airflow_pulsar.client.exceptions import AuthenticationError
from tests.support.security import SecuredBroker

OTHER_KEY = b"a key that is not the broker's!!"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``airflow-pulsar tokens ARGS``, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "airflow_pulsar.cli", "tokens", *args], capture_output=True, text=True, timeout=60)


def _refused_tokens(token_broker: SecuredBroker) -> dict[str, tuple[str | None, str]]:
    """case -> (token or None for no authentication, the cause the refusal must name on either port)."""
    return {
        "missing": (None, "the client sent 'none'|no Authorization header"),
        "wrong key": (token_broker.token(secret=OTHER_KEY), "signature does not match"),
        "expired": (token_broker.token(expires_in=-5), "token expired at"),
        "not a token": ("not-a-jwt", "not a signed JWT"),
    }


@pytest.mark.parametrize("supplier", [False, True], ids=["token", "supplier"])
def test_round_trip_with_a_valid_token(token_broker: SecuredBroker, topic_name: str, supplier: bool) -> None:
    token = token_broker.token("app")
    authentication = AuthenticationToken((lambda: token) if supplier else token)
    with Client(token_broker.service_url, authentication=authentication, operation_timeout_seconds=10) as client:
        consumer = client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest)
        client.create_producer(topic_name).send(b"authenticated")
        message = consumer.receive(5000)
        assert message.data() == b"authenticated"
        consumer.acknowledge(message)


@pytest.mark.parametrize("case", ["missing", "wrong key", "expired", "not a token"])
def test_refused_tokens_fail_fast_naming_the_cause(token_broker: SecuredBroker, topic_name: str, case: str) -> None:
    token, cause = _refused_tokens(token_broker)[case]
    authentication = AuthenticationToken(token) if token else None
    start = time.monotonic()
    with Client(token_broker.service_url, authentication=authentication, operation_timeout_seconds=20) as client:
        with pytest.raises(AuthenticationError, match=cause):
            client.create_producer(topic_name)
    assert time.monotonic() - start < 3, "an authentication error must not be retried until the operation timeout"


def test_a_connection_outliving_its_token_must_refresh_it(token_broker: SecuredBroker, topic_name: str) -> None:
    # The broker challenges when the token expires (tokens carry whole seconds: 1 to 2 s here).
    issued: list[str] = []

    def fresh_token() -> str:
        issued.append(token_broker.token(expires_in=2))
        return issued[-1]

    with Client(token_broker.service_url, authentication=AuthenticationToken(fresh_token)) as client:
        producer = client.create_producer(f"{topic_name}-refreshed")
        connection = client.service_connection()
        time.sleep(2.5)
        producer.send(b"after a refresh")
        assert len(issued) >= 2 and not connection.closed
    # A fixed token cannot be refreshed: the connection is closed, and the producer fails clearly.
    token = token_broker.token(expires_in=2)
    with Client(token_broker.service_url, authentication=AuthenticationToken(token), operation_timeout_seconds=5) as client:
        producer = client.create_producer(f"{topic_name}-expiring")
        connection = client.service_connection()
        deadline = time.monotonic() + 5
        while not connection.closed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert connection.closed
        with pytest.raises(AuthenticationError, match="token expired"):
            producer.send(b"too late")


def test_a_consumer_whose_token_expired_fails_instead_of_retrying(token_broker: SecuredBroker, topic_name: str) -> None:
    token = token_broker.token(expires_in=2)
    with Client(token_broker.service_url, authentication=AuthenticationToken(token), operation_timeout_seconds=5) as client:
        consumer = client.subscribe(topic_name, "expiring")
        started = time.monotonic()
        # The broker closes the connection when the token expires; the resubscribe is refused for good.
        with pytest.raises(AuthenticationError, match="token expired"):
            consumer.receive(15_000)
        assert time.monotonic() - started < 10
        with pytest.raises(AuthenticationError):
            consumer.receive(100)


def test_admin_api_requires_a_bearer_token(token_broker: SecuredBroker, topic_name: str) -> None:
    with PulsarAdmin(token_broker.web_url, authentication=AuthenticationToken(token_broker.token())) as admin:
        admin.create_topic(topic_name)
        assert any(name.endswith("/" + topic_name) for name in admin.list_topics("public/default"))
    for case, (token, cause) in _refused_tokens(token_broker).items():
        authentication = AuthenticationToken(token) if token else None
        with PulsarAdmin(token_broker.web_url, authentication=authentication) as admin:
            with pytest.raises(AdminAuthenticationError, match=cause) as raised:
                admin.list_topics("public/default")
        assert raised.value.status == 401, case
    # The raw answer: Pulsar's {"reason": ...} and a Bearer challenge.
    response = httpx.get(token_broker.web_url + "/admin/v2/clusters")
    assert response.status_code == 401
    assert "no Authorization header" in response.json()["reason"]
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    response = httpx.get(token_broker.web_url + "/admin/v2/clusters", headers={"Authorization": "Basic dXNlcjpwdw=="})
    assert response.status_code == 401 and "must be 'Bearer <token>'" in response.json()["reason"]


def test_tokens_cli_makes_tokens_the_broker_accepts(token_broker: SecuredBroker, tmp_path: Path, topic_name: str) -> None:
    secret_file = token_broker.process.data_dir.parent / "secret.key"

    created = cli("create", "--secret-file", str(secret_file), "--subject", "cli-user", "--expiry", "1h")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    with Client(token_broker.service_url, authentication=AuthenticationToken(token), operation_timeout_seconds=10) as client:
        client.create_producer(topic_name).send(b"x")
    validated = cli("validate", "--secret-file", str(secret_file), token)
    assert validated.returncode == 0 and "subject cli-user" in validated.stdout
    # A key made by the CLI serves a broker as well.
    new_key = tmp_path / "new.key"
    assert cli("create-secret-key", "--output", str(new_key)).returncode == 0
    assert new_key.stat().st_size == 32 and new_key.stat().st_mode & 0o777 == 0o600
    refused = cli("validate", "--secret-file", str(new_key), token)
    assert refused.returncode == 1 and "signature does not match" in refused.stderr


def test_broker_will_not_start_with_an_unusable_key(tmp_path: Path) -> None:
    short = tmp_path / "short.key"
    short.write_bytes(b"12345")
    with pytest.raises(RuntimeError, match=r"--token-secret-file: the secret key in .*short.key has 5 bytes"):
        BrokerProcess(tmp_path / "data", "--token-secret-file", str(short)).start()


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_tokens_cli_key_pairs_serve_a_broker_with_the_public_key(algorithm: str, tmp_path: Path, topic_name: str) -> None:
    def key_pair(name: str) -> tuple[Path, Path]:
        private, public = tmp_path / f"{name}.private", tmp_path / f"{name}.public"
        made = cli("create-key-pair", "-a", algorithm, "--output-private-key", str(private), "--output-public-key", str(public))
        assert made.returncode == 0, made.stderr
        return private, public

    (private, public), (other_private, _) = key_pair("broker"), key_pair("other")
    assert private.stat().st_mode & 0o777 == 0o600
    again = cli("create-key-pair", "-a", algorithm, "--output-private-key", str(private), "--output-public-key", str(tmp_path / "x"))
    assert again.returncode == 1 and "exists already" in again.stderr
    token = cli("create", "--private-key", str(private), "-a", algorithm, "--subject", "app").stdout.strip()
    forged = cli("create", "--private-key", str(other_private), "-a", algorithm, "--subject", "app").stdout.strip()
    validated = cli("validate", "--public-key", str(public), "-a", algorithm, token)
    assert validated.returncode == 0 and "subject app" in validated.stdout
    family = "RSA" if algorithm.startswith("RS") else "EC"
    wrong_family = cli("validate", "--public-key", str(public), "-a", "ES512" if family == "RSA" else "RS256", token)
    assert wrong_family.returncode == 1 and f"is not an {'EC' if family == 'RSA' else 'RSA'} key" in wrong_family.stderr

    broker = BrokerProcess(tmp_path / "data", "--token-public-key", str(public), "--token-public-alg", algorithm).start()
    try:
        with Client(broker.service_url, authentication=AuthenticationToken(token), operation_timeout_seconds=10) as client:
            client.create_producer(topic_name).send(b"signed with " + algorithm.encode())
        with Client(broker.service_url, authentication=AuthenticationToken(forged), operation_timeout_seconds=10) as client:
            with pytest.raises(AuthenticationError, match="signature does not match the public key"):
                client.create_producer(topic_name)
    finally:
        broker.stop()
