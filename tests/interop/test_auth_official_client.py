"""The official pulsar-client against our broker with token authentication (--token-secret-file)."""

from __future__ import annotations

import time

import pulsar
import pytest

from airflow_pulsar.client import AuthenticationToken, Client, MessageId
from tests.support.official_client import RECEIVE_TIMEOUT_MS, receive_n
from tests.support.security import SecuredBroker


def _official(token_broker: SecuredBroker, authentication: pulsar.Authentication | None, timeout: int = 10) -> pulsar.Client:
    return pulsar.Client(
        token_broker.service_url,
        authentication=authentication,
        operation_timeout_seconds=timeout,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


@pytest.mark.parametrize("supplier", [False, True], ids=["token", "supplier"])
def test_official_client_round_trip_with_a_token(token_broker: SecuredBroker, topic_name: str, supplier: bool) -> None:
    token = token_broker.token("official")
    client = _official(token_broker, pulsar.AuthenticationToken((lambda: token) if supplier else token))
    try:
        consumer = client.subscribe(topic_name, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic_name, batching_enabled=True, batching_max_publish_delay_ms=5)
        for index in range(20):
            producer.send_async(b"m%d" % index, None)
        producer.flush()
        messages = receive_n(consumer, 20)
        assert [m.data() for m in messages] == [b"m%d" % index for index in range(20)]
        consumer.acknowledge_cumulative(messages[-1])
    finally:
        client.close()
    # And our client reads what the official one wrote, through the same authenticated broker.
    with Client(token_broker.service_url, authentication=AuthenticationToken(token_broker.token())) as ours:
        reader = ours.create_reader(topic_name, MessageId.earliest)
        assert reader.read_next(RECEIVE_TIMEOUT_MS).data() == b"m0"


def test_official_client_answers_the_refresh_challenge(token_broker: SecuredBroker, topic_name: str) -> None:
    # The token expires after 1-2 s; the broker then challenges and the official client answers
    # with a fresh token from the supplier, on the same connection.
    issued: list[str] = []

    def fresh_token() -> str:
        issued.append(token_broker.token("official", expires_in=2))
        return issued[-1]

    log_start = token_broker.process.log_path.stat().st_size
    client = _official(token_broker, pulsar.AuthenticationToken(fresh_token))
    try:
        producer = client.create_producer(topic_name)
        time.sleep(2.5)
        producer.send(b"after a refresh")
    finally:
        client.close()
    assert len(issued) >= 2
    with open(token_broker.process.log_path) as log:
        log.seek(log_start)
        assert "refusing connection" not in log.read()


@pytest.mark.parametrize(
    ("case", "cause"),
    [
        ("missing", "the client sent 'none'"),
        ("wrong key", "signature does not match"),
        ("expired", "token expired at"),
    ],
)
def test_official_client_is_refused(token_broker: SecuredBroker, topic_name: str, case: str, cause: str) -> None:
    token = {
        "missing": None,
        "wrong key": token_broker.token(secret=b"a key that is not the broker's!!"),
        "expired": token_broker.token(expires_in=-5),
    }[case]
    log_start = token_broker.process.log_path.stat().st_size
    client = _official(token_broker, pulsar.AuthenticationToken(token) if token else None, timeout=1)
    try:
        # The official client retries a refused CONNECT until its operation timeout, as it does
        # against a Pulsar broker (which answers the same ERROR AuthenticationError and closes).
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(topic_name)
    finally:
        client.close()
    with open(token_broker.process.log_path) as log:
        log.seek(log_start)
        text = log.read()
    assert "refusing connection from 127.0.0.1" in text and cause in text
    # Nothing got through: the topic was never created.
    topics = token_broker.process.admin(
        "GET", "/admin/v2/persistent/public/default", headers={"Authorization": f"Bearer {token_broker.token()}"}
    ).json()
    assert not any(name.endswith("/" + topic_name) for name in topics)
