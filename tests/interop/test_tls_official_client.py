"""The official pulsar-client against our broker over TLS (pulsar+ssl://), with and without tokens."""

from __future__ import annotations

import pulsar
import pytest

from airflow_pulsar.client import AuthenticationToken, Client, InitialPosition
from tests.support.official_client import receive_n
from tests.support.security import Pki, SecuredBroker


def _official(url: str, timeout: int = 10, **settings: object) -> pulsar.Client:
    return pulsar.Client(
        url, operation_timeout_seconds=timeout, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error), **settings
    )


def test_official_and_our_client_exchange_messages_over_tls(tls_token_broker: SecuredBroker, topic_name: str) -> None:
    ca = str(tls_token_broker.pki.ca)  # type: ignore[union-attr]
    official = _official(
        tls_token_broker.service_url,
        authentication=pulsar.AuthenticationToken(tls_token_broker.token("official")),
        tls_trust_certs_file_path=ca,
        tls_validate_hostname=True,
    )
    ours = Client(
        tls_token_broker.service_url, authentication=AuthenticationToken(tls_token_broker.token("ours")), tls_trust_certs_file_path=ca
    )
    try:
        their_consumer = official.subscribe(topic_name, "official", initial_position=pulsar.InitialPosition.Earliest)
        our_consumer = ours.subscribe(topic_name, "ours", initial_position=InitialPosition.Earliest)
        producer = official.create_producer(topic_name, batching_enabled=True, batching_max_publish_delay_ms=5)
        for index in range(50):
            producer.send_async(b"official-%d" % index, None)
        producer.flush()
        ours.create_producer(topic_name).send(b"ours")
        expected = [b"official-%d" % index for index in range(50)] + [b"ours"]
        assert [m.data() for m in receive_n(their_consumer, 51)] == expected
        assert [our_consumer.receive(5000).data() for _ in range(51)] == expected
    finally:
        official.close()
        ours.close()


def test_official_client_checks_the_certificate(wrong_host_broker: SecuredBroker, pki: Pki, topic_name: str) -> None:
    # Host name validation is off by default in the official client; turned on, it refuses the
    # certificate made for another host, as ours does by default.
    refusing = _official(
        wrong_host_broker.service_url, timeout=1, tls_trust_certs_file_path=str(pki.ca), tls_validate_hostname=True
    )
    try:
        with pytest.raises(pulsar.PulsarException):
            refusing.create_producer(topic_name)
    finally:
        refusing.close()
    for settings in ({"tls_trust_certs_file_path": str(pki.ca)}, {"tls_allow_insecure_connection": True}):
        accepting = _official(wrong_host_broker.service_url, **settings)
        try:
            accepting.create_producer(topic_name).send(b"x")
        finally:
            accepting.close()
