"""TLS end to end: the broker with --tls-cert-file serves pulsar+ssl:// and https://; our client and
admin client verify the certificate and, by default, the host name."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_pulsar.client import AuthenticationToken, Client, InitialPosition
from airflow_pulsar.client.admin import AdminConnectionError, PulsarAdmin
from airflow_pulsar.client.exceptions import ConnectError
from airflow_pulsar.client.tls import TlsStream
from security_helpers import Pki, SecuredBroker, make_pki, secured_broker

MESSAGES = 5000


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecuredBroker]:
    """TLS and tokens together, as a production broker would run."""
    with secured_broker(tmp_path_factory.mktemp("tls"), tokens=True, pki=pki) as broker:
        yield broker


@pytest.fixture(scope="module")
def wrong_host(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecuredBroker]:
    """A broker whose (CA-signed) certificate names another host."""
    with secured_broker(tmp_path_factory.mktemp("wrong-host"), pki=pki, wrong_host=True) as broker:
        yield broker


def test_ready_line_gives_tls_urls(secured: SecuredBroker) -> None:
    assert secured.service_url.startswith("pulsar+ssl://127.0.0.1:")
    assert secured.web_url.startswith("https://127.0.0.1:")
    assert secured.process.admin("GET", "/admin/v2/clusters", verify=secured.ssl_context()).status_code == 401


def test_produce_and_consume_concurrently_over_one_tls_connection(secured: SecuredBroker, topic_name: str) -> None:
    # Producer and consumer share the client's one connection: its reader thread decrypts messages
    # and receipts while this thread and the consumer's acks encrypt sends, all at once.
    client = Client(
        secured.service_url,
        authentication=AuthenticationToken(secured.token()),
        tls_trust_certs_file_path=str(secured.pki.ca),  # type: ignore[union-attr]
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


def test_untrusted_certificate_is_refused(secured: SecuredBroker, topic_name: str) -> None:
    # No trust file: the system CAs do not know the test CA.
    with Client(secured.service_url, operation_timeout_seconds=1) as client:
        with pytest.raises(ConnectError, match="certificate verify failed: unable to get local issuer"):
            client.create_producer(topic_name)


def test_host_name_is_verified_by_default(wrong_host: SecuredBroker, pki: Pki, topic_name: str) -> None:
    trusted = {"tls_trust_certs_file_path": str(pki.ca), "operation_timeout_seconds": 1}
    with Client(wrong_host.service_url, **trusted) as client:
        with pytest.raises(ConnectError, match="certificate is not valid for '127.0.0.1'"):
            client.create_producer(topic_name)
    # The CA is still checked without host names; insecure mode checks nothing.
    for settings in ({**trusted, "tls_validate_hostname": False}, {"tls_allow_insecure_connection": True}):
        with Client(wrong_host.service_url, **settings) as client:
            client.create_producer(topic_name).send(b"x")


def test_admin_client_over_https(secured: SecuredBroker, wrong_host: SecuredBroker, pki: Pki, topic_name: str) -> None:
    authentication = AuthenticationToken(secured.token())
    with PulsarAdmin(secured.web_url, authentication=authentication, tls_trust_certs_file_path=str(pki.ca)) as admin:
        admin.create_topic(topic_name)
        assert admin.topic_stats(topic_name)["msgInCounter"] == 0
    with PulsarAdmin(wrong_host.web_url, tls_trust_certs_file_path=str(pki.ca)) as admin:
        with pytest.raises(AdminConnectionError, match="certificate verify failed"):
            admin.list_topics("public/default")
    unchecked_host = {"tls_trust_certs_file_path": str(pki.ca), "tls_validate_hostname": False}
    with PulsarAdmin(wrong_host.web_url, **unchecked_host) as admin:
        assert isinstance(admin.list_topics("public/default"), list)
    with PulsarAdmin(wrong_host.web_url, tls_validate_hostname=False) as admin:  # the chain is still checked
        with pytest.raises(AdminConnectionError, match="certificate verify failed"):
            admin.list_topics("public/default")
    with PulsarAdmin(wrong_host.web_url, tls_allow_insecure_connection=True) as admin:
        assert isinstance(admin.list_topics("public/default"), list)


def test_plain_client_on_the_tls_port_fails_clearly(secured: SecuredBroker, topic_name: str) -> None:
    plain_url = secured.service_url.replace("pulsar+ssl://", "pulsar://")
    with Client(plain_url, operation_timeout_seconds=1, connection_timeout_ms=2000) as client:
        with pytest.raises(ConnectError, match="closed the connection during the handshake"):
            client.create_producer(topic_name)


def test_broker_will_not_start_with_an_unusable_certificate(tmp_path: Path, pki: Pki) -> None:
    from airflow_pulsar.client.standalone.process import BrokerProcess

    with pytest.raises(RuntimeError, match="cannot load the TLS certificate .*server.pem with key .*wrong-host-key"):
        BrokerProcess(
            tmp_path / "data", "--tls-cert-file", str(pki.cert), "--tls-key-file", str(pki.wrong_host_key)
        ).start()
    with pytest.raises(RuntimeError, match="--tls-key-file needs --tls-cert-file"):
        BrokerProcess(tmp_path / "data", "--tls-key-file", str(pki.key)).start()
