"""Every authentication method against one broker that enables them all at once (Pulsar's
``authenticationProviders`` list): basic (htpasswd users), TLS client certificates, and OAuth2
access tokens checked with the issuer's public key. Our client and the official one (the oracle)
authenticate with the same credentials and the same params strings; the admin REST API with each.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import (
    Authentication,
    AuthenticationBasic,
    AuthenticationOauth2,
    AuthenticationTLS,
    Client,
    InitialPosition,
)
from airflow_pulsar.client.admin import AdminAuthenticationError, PulsarAdmin
from airflow_pulsar.client.exceptions import AuthenticationError, ConnectError
from tests.support.oauth2_issuer import Oauth2Issuer, RunningIssuer
from tests.support.security import CLIENT_CN, Pki, SecuredBroker, secured_broker, write_users_file

USERS = {"alice": "wonder land", "bob": "builder"}  # alice's hash is $apr1$ MD5, bob's crypt DES
CLIENT_ID, CLIENT_SECRET = "etl-client", "s3cret-of-etl"
AUDIENCE = "urn:pulsar:test"


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oauth2Issuer]:
    with RunningIssuer(tmp_path_factory.mktemp("issuer"), {CLIENT_ID: CLIENT_SECRET}) as running:
        yield running


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki, issuer: Oauth2Issuer) -> Iterator[SecuredBroker]:
    """TLS on both ports; basic, tls and token (the issuer's RS256 key, audience checked) providers."""
    with secured_broker(
        tmp_path_factory.mktemp("auth-methods-broker"),
        pki=pki,
        token_public_key=issuer.public_key_file,
        basic_users=USERS,
        client_certificates=True,
        extra_args=("--token-audience-claim", "aud", "--token-audience", AUDIENCE),
    ) as running:
        yield running


@pytest.fixture(scope="module")
def key_file(issuer: Oauth2Issuer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return issuer.key_file(tmp_path_factory.mktemp("keys"), CLIENT_ID)


def _methods(pki: Pki, issuer: Oauth2Issuer, key_file: Path) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """method -> (our authentication, the official client's), the same credentials for both."""
    oauth2 = issuer.params(key_file, AUDIENCE)
    tls_params = f"tlsCertFile:{pki.client_cert},tlsKeyFile:{pki.client_key}"
    basic_json = json.dumps({"username": "bob", "password": USERS["bob"]})
    return {
        "basic-apr1": (
            lambda: AuthenticationBasic("alice", USERS["alice"]),
            lambda: pulsar.AuthenticationBasic("alice", USERS["alice"]),
        ),
        "basic-des-params": (
            lambda: AuthenticationBasic(auth_params_string=basic_json),
            lambda: pulsar.AuthenticationBasic(auth_params_string=basic_json),
        ),
        "tls": (
            lambda: AuthenticationTLS(str(pki.client_cert), str(pki.client_key)),
            lambda: pulsar.AuthenticationTLS(str(pki.client_cert), str(pki.client_key)),
        ),
        "oauth2": (lambda: AuthenticationOauth2(oauth2), lambda: pulsar.AuthenticationOauth2(oauth2)),
        "plugin-tls": (lambda: Authentication("tls", tls_params), lambda: pulsar.Authentication("tls", tls_params)),
        "plugin-basic-java": (
            lambda: Authentication("org.apache.pulsar.client.impl.auth.AuthenticationBasic", basic_json),
            lambda: pulsar.Authentication("org.apache.pulsar.client.impl.auth.AuthenticationBasic", basic_json),
        ),
        "plugin-oauth2": (
            lambda: Authentication("oauth2token", oauth2),
            lambda: pulsar.Authentication("oauth2token", oauth2),
        ),
    }


METHODS = ["basic-apr1", "basic-des-params", "tls", "oauth2", "plugin-tls", "plugin-basic-java", "plugin-oauth2"]


def _ours(broker: SecuredBroker, authentication: object, **options: object) -> Client:
    return Client(
        broker.service_url,
        authentication=authentication,  # type: ignore[arg-type]
        tls_trust_certs_file_path=str(broker.pki.ca),  # type: ignore[union-attr]
        operation_timeout_seconds=options.pop("timeout", 10),  # type: ignore[arg-type]
        **options,  # type: ignore[arg-type]
    )


def _official(broker: SecuredBroker, authentication: object, timeout: int = 10) -> pulsar.Client:
    return pulsar.Client(
        broker.service_url,
        authentication=authentication,
        tls_trust_certs_file_path=str(broker.pki.ca),  # type: ignore[union-attr]
        operation_timeout_seconds=timeout,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


@pytest.mark.parametrize("method", METHODS)
def test_both_clients_authenticate_with_each_method(
    broker: SecuredBroker, pki: Pki, issuer: Oauth2Issuer, key_file: Path, topic_name: str, method: str
) -> None:
    ours, theirs = _methods(pki, issuer, key_file)[method]
    official = _official(broker, theirs())
    try:
        producer = official.create_producer(topic_name)
        producer.send(b"from the official client")
    finally:
        official.close()
    with _ours(broker, ours()) as client:
        consumer = client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest)
        client.create_producer(topic_name).send(b"from ours")
        assert [consumer.receive(5000).data() for _ in range(2)] == [b"from the official client", b"from ours"]


def test_the_role_is_the_certificate_cn_and_the_oauth2_client_id(
    broker: SecuredBroker, pki: Pki, issuer: Oauth2Issuer, key_file: Path, topic_name: str
) -> None:
    # The broker logs the role each connection authenticated as.
    before = broker.process.log_path.stat().st_size
    tls, oauth2 = AuthenticationTLS(str(pki.client_cert), str(pki.client_key)), AuthenticationOauth2(issuer.params(key_file, AUDIENCE))
    for authentication in (tls, oauth2):
        with _ours(broker, authentication) as client:
            client.create_producer(topic_name)
    log = broker.process.log_path.read_text()[before:]
    assert f"as role {CLIENT_CN!r}" in log and f"as role {CLIENT_ID!r}" in log


def _refusals(pki: Pki, issuer: Oauth2Issuer, tmp_path: Path) -> dict[str, tuple[object, str]]:
    """case -> (our authentication, the cause our refusal must name)."""
    wrong_secret = issuer.key_file(tmp_path, CLIENT_ID, secret="not-the-secret")
    return {
        "basic wrong password": (AuthenticationBasic("alice", "guess"), "Unknown user or invalid password"),
        "basic unknown user": (AuthenticationBasic("mallory", "x"), "Unknown user or invalid password"),
        "basic wrong method name": (AuthenticationBasic("alice", USERS["alice"], method="oms3.0"), "the client sent 'oms3.0'"),
        "oauth2 wrong secret": (
            AuthenticationOauth2(issuer.params(wrong_secret, AUDIENCE)),
            r"refused the request: HTTP 401 invalid_client: unknown client or wrong secret",
        ),
        "oauth2 wrong audience": (
            AuthenticationOauth2(issuer.params(issuer.key_file(tmp_path, CLIENT_ID), "urn:pulsar:elsewhere")),
            r"do not include this broker's, 'urn:pulsar:test'",
        ),
        "oauth2 issuer unreachable": (
            AuthenticationOauth2(json.dumps({"issuer_url": "http://127.0.0.1:9", "private_key": str(wrong_secret)})),
            r"cannot reach http://127.0.0.1:9/.well-known/openid-configuration",
        ),
    }


REFUSALS = [
    "basic wrong password",
    "basic unknown user",
    "basic wrong method name",
    "oauth2 wrong secret",
    "oauth2 wrong audience",
    "oauth2 issuer unreachable",
]


@pytest.mark.parametrize("case", REFUSALS)
def test_wrong_credentials_fail_fast_naming_the_cause(
    broker: SecuredBroker, pki: Pki, issuer: Oauth2Issuer, tmp_path: Path, topic_name: str, case: str
) -> None:
    authentication, cause = _refusals(pki, issuer, tmp_path)[case]
    start = time.monotonic()
    with _ours(broker, authentication, timeout=20) as client:
        with pytest.raises(AuthenticationError, match=cause):
            client.create_producer(topic_name)
    assert time.monotonic() - start < 5


def test_an_untrusted_client_certificate_fails_the_handshake(broker: SecuredBroker, pki: Pki, topic_name: str) -> None:
    # As on a Pulsar broker, the TLS handshake itself refuses it: there is no CONNECT to answer.
    untrusted = AuthenticationTLS(str(pki.untrusted_client_cert), str(pki.untrusted_client_key))
    with _ours(broker, untrusted, timeout=5) as client:
        with pytest.raises((AuthenticationError, ConnectError), match="TLS client certificate"):
            client.create_producer(topic_name)


def test_tls_method_without_a_certificate_is_refused(broker: SecuredBroker, pki: Pki, topic_name: str) -> None:
    # The TLS plugin names files that are not there: refused before any connection.
    with pytest.raises(AuthenticationError, match="no such TLS client certificate file"):
        _ours(broker, AuthenticationTLS(str(pki.ca.parent / "missing.pem"), str(pki.client_key)))

    class TlsMethodOnly(AuthenticationTLS):
        """Says 'tls' in CONNECT but presents no certificate."""

        def tls_certificate_files(self) -> tuple[str, str] | None:
            return None

    with _ours(broker, TlsMethodOnly(str(pki.client_cert), str(pki.client_key))) as client:
        with pytest.raises(AuthenticationError, match="presented no TLS client certificate"):
            client.create_producer(topic_name)


@pytest.mark.parametrize("case", ["basic wrong password", "oauth2 wrong audience"])
def test_official_client_is_refused_too(
    broker: SecuredBroker, pki: Pki, issuer: Oauth2Issuer, tmp_path: Path, topic_name: str, case: str
) -> None:
    theirs = {
        "basic wrong password": pulsar.AuthenticationBasic("alice", "guess"),
        "oauth2 wrong audience": pulsar.AuthenticationOauth2(
            issuer.params(issuer.key_file(tmp_path, CLIENT_ID), "urn:pulsar:elsewhere")
        ),
    }[case]
    cause = _refusals(pki, issuer, tmp_path)[case][1]
    before = broker.process.log_path.stat().st_size
    official = _official(broker, theirs, timeout=3)
    try:
        # The official client retries a refused CONNECT until its operation timeout.
        with pytest.raises((pulsar.AuthenticationError, pulsar.Timeout)):
            official.create_producer(topic_name)
    finally:
        official.close()
    assert cause.replace("\\", "") in broker.process.log_path.read_text()[before:]


def test_admin_rest_with_each_method(broker: SecuredBroker, pki: Pki, issuer: Oauth2Issuer, key_file: Path, tmp_path: Path) -> None:
    ca = str(pki.ca)
    for authentication in (
        AuthenticationBasic("alice", USERS["alice"]),
        AuthenticationTLS(str(pki.client_cert), str(pki.client_key)),
        AuthenticationOauth2(issuer.params(key_file, AUDIENCE)),
    ):
        with PulsarAdmin(broker.web_url, authentication=authentication, tls_trust_certs_file_path=ca) as admin:
            assert isinstance(admin.list_topics("public/default"), list)
    with PulsarAdmin(broker.web_url, authentication=AuthenticationBasic("alice", "guess"), tls_trust_certs_file_path=ca) as admin:
        with pytest.raises(AdminAuthenticationError, match="Unknown user or invalid password") as raised:
            admin.list_topics("public/default")
        assert raised.value.status == 401
    # The raw answers: Pulsar's {"reason": ...}, and a challenge for each header scheme.
    refused = httpx.get(broker.web_url + "/admin/v2/clusters", verify=broker.ssl_context())
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"] == 'Bearer realm="pulsar", Basic realm="pulsar"'
    assert "or a TLS client certificate" in refused.json()["reason"]
    basic = base64.b64encode(f"bob:{USERS['bob']}".encode()).decode()
    accepted = httpx.get(
        broker.web_url + "/admin/v2/persistent/public/default",
        headers={"Authorization": f"Basic {basic}"},
        verify=broker.ssl_context(),
    )
    assert accepted.status_code == 200


def test_oauth2_token_is_refreshed_before_it_expires(
    broker: SecuredBroker, issuer: Oauth2Issuer, key_file: Path, topic_name: str
) -> None:
    issuer.expires_in = 4
    try:
        authentication = AuthenticationOauth2(issuer.params(key_file, AUDIENCE))
        first = authentication.auth_data()
        assert authentication.auth_data() == first  # cached
        issued = len(issuer.issued)
        first_expiry = issuer.issued[-1].expires_at
        time.sleep(0.9 * 4 + 0.05)
        refreshed_at = time.time()
        assert authentication.auth_data() != first and len(issuer.issued) == issued + 1
        assert refreshed_at < first_expiry, "the fresh token must be asked for before the old one expires"
        # A long-lived connection: the broker challenges when the token expires (within 5 s: it was
        # issued just now), the client answers with a fresh one from the issuer, and the connection stays.
        with _ours(broker, authentication) as client:
            producer = client.create_producer(topic_name)
            connection = client.service_connection()
            before_challenge = len(issuer.issued)
            time.sleep(5.5)
            producer.send(b"after a refresh")
            assert not connection.closed
        assert len(issuer.issued) > before_challenge
    finally:
        issuer.expires_in = 3600


def test_official_client_answers_the_refresh_challenge_with_oauth2(
    broker: SecuredBroker, issuer: Oauth2Issuer, key_file: Path, topic_name: str
) -> None:
    issuer.expires_in = 2
    try:
        issued = len(issuer.issued)
        official = _official(broker, pulsar.AuthenticationOauth2(issuer.params(key_file, AUDIENCE)))
        try:
            producer = official.create_producer(topic_name)
            time.sleep(4.5)
            producer.send(b"after the token expired twice")
        finally:
            official.close()
        assert len(issuer.issued) >= issued + 2
    finally:
        issuer.expires_in = 3600


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tls-require-trusted-client-cert"], "--tls-require-trusted-client-cert needs --tls-trust-certs-file"),
        (["--token-audience-claim", "aud"], "--token-audience-claim needs --token-audience"),
        (["--basic-auth-conf", "USERS_SHA"], r"line 1 of .*users.htpasswd \(user 'carol'\): a \$6\$ hash: Pulsar's basic"),
        (["--token-public-key", "GARBAGE"], "--token-public-key: the public key in .* is neither DER nor PEM"),
        (["--token-public-key", "ISSUER", "--token-public-alg", "ES256"], "is not an EC key, as ES256 needs"),
    ],
)
def test_broker_will_not_start_with_unusable_settings(
    tmp_path: Path, issuer: Oauth2Issuer, args: list[str], message: str
) -> None:
    users = tmp_path / "users.htpasswd"
    users.write_text("carol:$6$salt$abcdefghijklmnop\n")
    garbage = tmp_path / "garbage.der"
    garbage.write_bytes(b"not a key")
    files = {"USERS_SHA": str(users), "GARBAGE": str(garbage), "ISSUER": str(issuer.public_key_file)}
    with pytest.raises(RuntimeError, match=message):
        BrokerProcess(tmp_path / "data", *[files.get(arg, arg) for arg in args]).start()


def test_a_broker_requiring_client_certificates_refuses_handshakes_without_one(
    tmp_path: Path, pki: Pki, topic_name: str
) -> None:
    users = write_users_file(tmp_path / "users", {"alice": USERS["alice"]})
    with secured_broker(
        tmp_path, pki=pki, client_certificates=True, extra_args=("--tls-require-trusted-client-cert", "--basic-auth-conf", str(users))
    ) as strict:
        with _ours(strict, AuthenticationTLS(str(pki.client_cert), str(pki.client_key))) as client:
            client.create_producer(topic_name).send(b"with a certificate")
        with _ours(strict, AuthenticationBasic("alice", USERS["alice"]), timeout=5) as client:
            with pytest.raises(Exception, match="CERTIFICATE_REQUIRED|certificate required|handshake"):
                client.create_producer(topic_name)
