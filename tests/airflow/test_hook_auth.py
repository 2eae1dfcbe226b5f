"""PulsarHook against a broker with token authentication and TLS: the connection's password is the
token, its extras carry the CA file; a refused token gives a clear error that never shows it."""

from __future__ import annotations

import asyncio

import pytest

from airflow_pulsar.client import InitialPosition
from airflow_pulsar.client.admin import AdminAuthenticationError
from airflow_pulsar.client.exceptions import AuthenticationError
from airflow_pulsar.hooks.pulsar import PulsarHook
from tests.support.security import SecuredBroker


def _define(pulsar_conn, tls_token_broker: SecuredBroker, token: str) -> None:
    pulsar_conn(
        host=tls_token_broker.service_url,
        password=token,
        extra={"admin_url": tls_token_broker.web_url, "tls_trust_certs_file_path": str(tls_token_broker.pki.ca)},  # type: ignore
    )


def test_token_and_tls_through_the_hook(tls_token_broker: SecuredBroker, pulsar_conn, topic_name: str) -> None:
    _define(pulsar_conn, tls_token_broker, tls_token_broker.token("airflow"))
    with PulsarHook() as hook:
        assert hook.config.use_tls
        consumer = hook.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest)
        hook.create_producer(topic_name).send(b"through the hook")
        assert consumer.receive(5000).data() == b"through the hook"
        assert hook.get_admin().topic_stats(topic_name)["msgInCounter"] == 1

        async def backlog() -> int:
            async with hook.get_async_admin() as admin:
                return (await admin.topic_stats(topic_name))["subscriptions"]["sub"]["msgBacklog"]

        assert asyncio.run(backlog()) == 1
        ok, message = hook.test_connection()
        assert ok, message


def test_a_refused_token_fails_clearly_and_stays_hidden(tls_token_broker: SecuredBroker, pulsar_conn, topic_name: str) -> None:
    token = tls_token_broker.token("airflow", expires_in=-5)
    _define(pulsar_conn, tls_token_broker, token)
    with PulsarHook() as hook:
        ok, message = hook.test_connection()
        assert not ok and "AuthenticationError" in message and "token expired" in message
        assert token not in message
        with pytest.raises(AuthenticationError, match="token expired"):
            hook.create_producer(topic_name)
        with pytest.raises(AdminAuthenticationError, match="token expired") as raised:
            hook.get_admin().list_topics("public/default")
        assert token not in str(raised.value)
