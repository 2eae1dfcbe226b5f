"""TLS end to end: the broker with --tls-cert-file serves pulsar+ssl:// and https://; our client and
admin client verify the certificate and, by default, the host name."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from airflow_pulsar.client import AuthenticationToken, Client, InitialPosition
from airflow_pulsar.client.admin import AdminConnectionError, PulsarAdmin
from airflow_pulsar.client.exceptions import ConnectError
from airflow_pulsar.client.tls import TlsStream
from tests.support.security import Pki, SecuredBroker

MESSAGES = 5000


def test_ready_line_gives_tls_urls(tls_token_broker: SecuredBroker) -> None:
    assert tls_token_broker.service_url.startswith("pulsar+ssl://127.0.0.1:")
    assert tls_token_broker.web_url.startswith("https://127.0.0.1:")
    assert tls_token_broker.process.admin("GET", "/admin/v2/clusters", verify=tls_token_broker.ssl_context()).status_code == 401


def test_produce_and_consume_concurrently_over_one_tls_connection(tls_token_broker: SecuredBroker, topic_name: str) -> None:
    # Producer and consumer share the client's one connection: its reader thread decrypts messages
    # and receipts while this thread and the consumer's acks encrypt sends, all at once.
    client = Client(
        tls_token_broker.service_url,
        authentication=AuthenticationToken(tls_token_broker.token()),
        tls_trust_certs_file_path=str(tls_token_broker.pki.ca),  # type: ignore[union-attr]
        operation_timeout_seconds=10,
    )
    with client:
        consumer = client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest)
        producer = client.create_producer(topic_name, block_if_queue_full=True, batching_max_messages=50)
        received: list[bytes] = []

        def consume() -> None:
            while len(received) < MESSAGES:
                message = consumer.receive(10_000)
                received.append(message.data())
                consumer.acknowledge(message)

        reader = threading.Thread(target=consume)
        reader.start()
        for index in range(MESSAGES):
            producer.send_async(b"%06d" % index, None)
        producer.flush()
        reader.join(30)
        assert received == [b"%06d" % index for index in range(MESSAGES)]
        connection = next(iter(client._pool.values()))
        assert isinstance(connection._sock, TlsStream)


def test_untrusted_certificate_is_refused(tls_token_broker: SecuredBroker, topic_name: str) -> None:
    # No trust file: the system CAs do not know the test CA.
    with Client(tls_token_broker.service_url, operation_timeout_seconds=1) as client:
        with pytest.raises(ConnectError, match="certificate verify failed: unable to get local issuer"):
            client.create_producer(topic_name)


def test_host_name_is_verified_by_default(wrong_host_broker: SecuredBroker, pki: Pki, topic_name: str) -> None:
    trusted = {"tls_trust_certs_file_path": str(pki.ca), "operation_timeout_seconds": 1}
    with Client(wrong_host_broker.service_url, **trusted) as client:
        with pytest.raises(ConnectError, match="certificate is not valid for '127.0.0.1'"):
            client.create_producer(topic_name)
    # The CA is still checked without host names; insecure mode checks nothing.
    for settings in ({**trusted, "tls_validate_hostname": False}, {"tls_allow_insecure_connection": True}):
        with Client(wrong_host_broker.service_url, **settings) as client:
            client.create_producer(topic_name).send(b"x")


def test_admin_client_over_https(tls_token_broker: SecuredBroker, wrong_host_broker: SecuredBroker, pki: Pki, topic_name: str) -> None:
    authentication = AuthenticationToken(tls_token_broker.token())
    with PulsarAdmin(tls_token_broker.web_url, authentication=authentication, tls_trust_certs_file_path=str(pki.ca)) as admin:
        admin.create_topic(topic_name)
        assert admin.topic_stats(topic_name)["msgInCounter"] == 0
    with PulsarAdmin(wrong_host_broker.web_url, tls_trust_certs_file_path=str(pki.ca)) as admin:
        with pytest.raises(AdminConnectionError, match="certificate verify failed"):
            admin.list_topics("public/default")
    unchecked_host = {"tls_trust_certs_file_path": str(pki.ca), "tls_validate_hostname": False}
    with PulsarAdmin(wrong_host_broker.web_url, **unchecked_host) as admin:
        assert isinstance(admin.list_topics("public/default"), list)
    with PulsarAdmin(wrong_host_broker.web_url, tls_validate_hostname=False) as admin:  # the chain is still checked
        with pytest.raises(AdminConnectionError, match="certificate verify failed"):
            admin.list_topics("public/default")
    with PulsarAdmin(wrong_host_broker.web_url, tls_allow_insecure_connection=True) as admin:
        assert isinstance(admin.list_topics("public/default"), list)


def test_plain_client_on_the_tls_port_fails_clearly(tls_token_broker: SecuredBroker, topic_name: str) -> None:
    plain_url = tls_token_broker.service_url.replace("pulsar+ssl://", "pulsar://")
    with Client(plain_url, operation_timeout_seconds=1, connection_timeout_ms=2000) as client:
        with pytest.raises(ConnectError, match="closed the connection during the handshake"):
            client.create_producer(topic_name)


def test_broker_will_not_start_with_an_unusable_certificate(tmp_path: Path, pki: Pki) -> None:
    from airflow_pulsar.broker.process import BrokerProcess

    with pytest.raises(RuntimeError, match="cannot load the TLS certificate .*server.pem with key .*wrong-host-key"):
        BrokerProcess(
            tmp_path / "data", "--tls-cert-file", str(pki.cert), "--tls-key-file", str(pki.wrong_host_key)
        ).start()
    with pytest.raises(RuntimeError, match="--tls-key-file needs --tls-cert-file"):
        BrokerProcess(tmp_path / "data", "--tls-key-file", str(pki.key)).start()
