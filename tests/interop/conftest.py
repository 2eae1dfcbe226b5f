"""Fixtures for the interop suite: official ``pulsar-client`` clients for the broker under test.

Every client is made with short timeouts so that a broker bug fails a test in seconds instead of
hanging it, and is closed after the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from tests.support.official_client import OPERATION_TIMEOUT, OfficialFactory
from tests.support.security import BASIC_USERS, Pki, SecuredBroker, secured_broker, secured_pulsar


@pytest.fixture
def official_factory(broker: Any) -> Iterator[OfficialFactory]:
    """Make official clients for the module's broker (or the one given); all closed after the test."""
    made: list[pulsar.Client] = []

    def make(target: Any = None) -> pulsar.Client:
        client = pulsar.Client(
            (target or broker).service_url,
            operation_timeout_seconds=OPERATION_TIMEOUT,
            connection_timeout_ms=5000,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
        )
        made.append(client)
        return client

    yield make
    for client in made:
        try:
            client.close()
        except pulsar.PulsarException:
            pass  # already closed, or its broker is gone


@pytest.fixture
def official(official_factory: OfficialFactory) -> pulsar.Client:
    """One official client connected to the module's broker."""
    return official_factory()


@pytest.fixture(scope="module", autouse=True)
def broker_log_is_clean(broker: Any) -> Iterator[None]:
    """After each module, fail if our broker logged an unhandled exception meanwhile (Apache
    Pulsar logs handled exceptions as a matter of course, so its log is not read)."""
    if broker.name != "embedded":
        yield
        return
    start = broker.log_path.stat().st_size if broker.log_path.exists() else 0
    yield
    with open(broker.log_path, errors="replace") as log:
        log.seek(start)
        text = log.read()
    assert "Traceback" not in text, f"the broker logged an exception:\n{text[-5000:]}"


@pytest.fixture(scope="module")
def secured_apache_pulsar(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecuredBroker]:
    """Apache Pulsar with tokens, basic authentication for ``BASIC_USERS`` and TLS beside its plain
    ports, for the module (started only by the tests that run on it)."""
    with secured_pulsar(tmp_path_factory.mktemp("secured-pulsar"), pki=pki, basic_users=BASIC_USERS) as pulsar:
        yield pulsar


@pytest.fixture(scope="module")
def basic_http_url(broker_kind: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An ``http://`` URL of the module's kind of broker, taking basic authentication for ``BASIC_USERS``."""
    if broker_kind == "pulsar":
        yield request.getfixturevalue("secured_apache_pulsar").process.web_url
        return
    with secured_broker(tmp_path_factory.mktemp("basic-broker"), basic_users=BASIC_USERS) as broker:
        yield broker.web_url


@pytest.fixture(scope="module")
def tls_token_any(broker_kind: str, request: pytest.FixtureRequest) -> SecuredBroker:
    """The module's kind of broker with TLS and tokens: ``tls_token_broker``, or Apache Pulsar so."""
    return request.getfixturevalue("secured_apache_pulsar" if broker_kind == "pulsar" else "tls_token_broker")
