"""The connection form's authentication methods through PulsarHook, against one TLS broker that takes
basic (htpasswd), TLS client certificates and OAuth2 access tokens: the hook builds each method's
authentication from the connection's login, password and extras, and the binary protocol and the
admin REST API both accept it; a connection that lacks what its method needs is refused by name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from airflow.sdk import Connection

from airflow_pulsar.client import InitialPosition
from airflow_pulsar.get_provider_info import PULSAR_CONN_FIELDS
from airflow_pulsar.hooks.pulsar import PulsarConnectionConfig, PulsarHook
from tests.support.oauth2_issuer import Oauth2Issuer, RunningIssuer
from tests.support.security import Pki, SecuredBroker, every_method_broker

USER, PASSWORD = "etl", "basic secret"
CLIENT_ID, CLIENT_SECRET = "airflow-etl", "oauth2 secret"


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oauth2Issuer]:
    with RunningIssuer(tmp_path_factory.mktemp("issuer"), {CLIENT_ID: CLIENT_SECRET}) as running:
        yield running


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, pki: Pki, issuer: Oauth2Issuer) -> Iterator[SecuredBroker]:
    with every_method_broker(tmp_path_factory.mktemp("hook-auth-broker"), pki, issuer.public_key_file, {USER: PASSWORD}) as running:
        yield running


def _methods(pki: Pki, issuer: Oauth2Issuer, key_file: Path) -> dict[str, dict[str, object]]:
    """method -> the connection fields (login, password, extras) a user fills in for it."""
    return {
        "basic": {"login": USER, "password": PASSWORD, "extra": {"auth_method": "basic"}},
        "tls": {
            "extra": {
                "auth_method": "tls",
                "tls_certificate_file_path": str(pki.client_cert),
                "tls_private_key_file_path": str(pki.client_key),
            }
        },
        "oauth2-login": {
            "login": CLIENT_ID,
            "password": CLIENT_SECRET,
            "extra": {"auth_method": "oauth2", "oauth2_issuer_url": issuer.url},
        },
        "oauth2-key-file": {
            "extra": {"auth_method": "OAuth2", "oauth2_issuer_url": issuer.url, "oauth2_private_key": str(key_file)}
        },
    }


@pytest.fixture
def define(secured: SecuredBroker, pulsar_conn: Callable[..., None]) -> Callable[[dict[str, object]], None]:
    def connection(fields: dict[str, object]) -> None:
        extra = {"admin_url": secured.web_url, "tls_trust_certs_file_path": str(secured.pki.ca), **fields.pop("extra", {})}  # type: ignore[union-attr, dict-item]
        pulsar_conn(host=secured.service_url, extra=extra, **fields)

    return connection


@pytest.mark.parametrize("method", ["basic", "tls", "oauth2-login", "oauth2-key-file"])
def test_each_method_reaches_the_broker_and_its_admin_api(
    secured: SecuredBroker, pki: Pki, issuer: Oauth2Issuer, define, topic_name: str, tmp_path: Path, method: str
) -> None:
    key_file = issuer.key_file(tmp_path, CLIENT_ID)
    define(_methods(pki, issuer, key_file)[method])
    with PulsarHook() as hook:
        consumer = hook.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest)
        hook.create_producer(topic_name).send(method.encode())
        assert consumer.receive(5000).data() == method.encode()
        assert hook.get_admin().topic_stats(topic_name)["msgInCounter"] == 1
        ok, message = hook.test_connection()
        assert ok, message


def test_a_wrong_password_is_refused_and_hidden(secured: SecuredBroker, define, topic_name: str) -> None:
    define({"login": USER, "password": "not the password", "extra": {"auth_method": "basic"}})
    with PulsarHook() as hook:
        ok, message = hook.test_connection()
    assert not ok and "AuthenticationError" in message and "not the password" not in message


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"extra": {"auth_method": "kerberos"}}, "auth_method must be one of token, basic, tls, oauth2, got 'kerberos'"),
        ({"login": "u", "extra": {"auth_method": "basic"}}, "auth_method 'basic' needs password"),
        ({"extra": {"auth_method": "tls", "tls_certificate_file_path": "/c.pem"}}, "needs tls_private_key_file_path"),
        ({"extra": {"auth_method": "oauth2"}}, "needs oauth2_issuer_url, oauth2_private_key (or login and password"),
        ({"extra": {"auth_method": "token"}}, "auth_method 'token' needs password"),
    ],
)
def test_a_connection_missing_what_its_method_needs_is_refused(fields: dict, error: str) -> None:
    extra = fields.pop("extra")
    conn = Connection(conn_id="pulsar_test", conn_type="pulsar", host="broker", extra=json.dumps(extra), **fields)
    with pytest.raises(ValueError, match=error.replace("(", r"\(")):
        PulsarConnectionConfig.from_connection(conn)


def test_the_form_offers_the_methods_and_the_certificate_fields() -> None:
    assert PULSAR_CONN_FIELDS["auth_method"]["schema"]["enum"] == [None, "token", "basic", "tls", "oauth2"]
    expected = {"tls_certificate_file_path", "tls_private_key_file_path", "oauth2_issuer_url", "oauth2_private_key"}
    assert expected <= set(PULSAR_CONN_FIELDS)
    behaviour = PulsarHook.get_ui_field_behaviour()
    assert "login" not in behaviour["hidden_fields"] and "login" in behaviour["relabeling"]
    # A password with no method named stays a token, as before the methods were offered.
    config = PulsarConnectionConfig.from_connection(
        Connection(conn_id="c", conn_type="pulsar", host="broker", password="a-token-value")
    )
    assert config.credentials.method == "token" and config.token == "a-token-value"
    assert "a-token-value" not in repr(config)
