"""HTTP service URLs with credentials: basic authentication over ``http://``, and a token over
``https://`` (the lookup over TLS, then the binary connection to the ``pulsar+ssl://`` broker it
names). The official client and ours do the same against one secured broker and must agree
(over ``https://`` the official client crashes, so ours runs alone there). On both brokers: Apache
Pulsar runs with token and basic authentication and TLS, for the module; a token over ``http://``
is in ``test_differential.py::test_http_service_url_with_a_token``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pulsar
import pytest

import airflow_pulsar.client as ours
from tests.support.official_client import RECEIVE_TIMEOUT_MS
from tests.support.security import BASIC_USERS, Pki, SecuredBroker

pytestmark = [pytest.mark.interop]

[(USER, PASSWORD)] = BASIC_USERS.items()


def _send_and_receive(api: ModuleType, url: str, topic: str, authentication: Any, **options: Any) -> Any:
    client = api.Client(url, authentication=authentication, operation_timeout_seconds=3, **options)
    try:
        consumer = client.subscribe(topic, "sub")
        client.create_producer(topic, batching_enabled=False).send(b"over http")
        return consumer.receive(RECEIVE_TIMEOUT_MS).data()
    except api.PulsarException as exc:
        return type(exc).__name__
    finally:
        client.close()


def test_basic_authentication_over_http(basic_http_url: str, topic_name: str) -> None:
    assert basic_http_url.startswith("http://")
    outcomes = [
        _send_and_receive(api, basic_http_url, f"{topic_name}-{index}", api.AuthenticationBasic(USER, PASSWORD))
        for index, api in enumerate((pulsar, ours))
    ]
    assert outcomes == [b"over http", b"over http"]


def test_a_wrong_password_over_http(basic_http_url: str, topic_name: str) -> None:
    """Refused at once by both; the official client reports every failed HTTP lookup as
    ConnectError, ours says AuthenticationError, as both clients do for the binary protocol's
    refusal (docs/client.md)."""
    outcomes = [
        _send_and_receive(api, basic_http_url, f"{topic_name}-{index}", api.AuthenticationBasic(USER, "wrong"))
        for index, api in enumerate((pulsar, ours))
    ]
    assert outcomes == ["ConnectError", "AuthenticationError"]


def test_a_token_over_https(tls_token_any: SecuredBroker, pki: Pki, topic_name: str) -> None:
    """Ours alone: the official client 3.13 crashes the process (a segmentation fault in
    subscribe) when it looks a topic up over ``https://`` with a trust store, so it cannot be the
    oracle here; what ours does is what the ``http://`` tests hold both clients to."""
    assert tls_token_any.web_url.startswith("https://")
    token = ours.AuthenticationToken(tls_token_any.token())
    outcome = _send_and_receive(ours, tls_token_any.web_url, topic_name, token, tls_trust_certs_file_path=str(pki.ca))
    assert outcome == b"over http"
