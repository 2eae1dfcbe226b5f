"""Basic authentication on both brokers: our broker with ``--basic-auth-conf`` and Apache Pulsar with
``AuthenticationProviderBasic`` and ``basicAuthConf``, reading the same htpasswd file ($apr1$ MD5
and crypt DES hashes). Our client and the official one get the same answers from both."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pulsar
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import AuthenticationBasic, Client, InitialPosition
from airflow_pulsar.client.exceptions import AuthenticationError
from jvm.apache_pulsar import QUICK_JIT, PulsarStandalone
from tests.support.security import write_users_file

USERS = {"admin": "admin-pass", "alice": "wonder land"}  # admin's hash is $apr1$ MD5, alice's crypt DES


def _basic_header(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture(scope="module")
def basic_broker(broker_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    work = tmp_path_factory.mktemp(f"basic-{broker_kind}")
    users = write_users_file(work / "users.htpasswd", USERS)
    if broker_kind == "embedded":
        process = BrokerProcess(work / "data", "--basic-auth-conf", str(users)).start()
        yield process
        process.stop()
        return
    config = {
        "authenticationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic",
        "basicAuthConf": f"file://{users}",
        "superUserRoles": "admin",
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationBasic",
        "brokerClientAuthenticationParameters": '{"userId": "admin", "password": "admin-pass"}',
    }
    theirs = PulsarStandalone(work / "pulsar", config=config, jvm_options=QUICK_JIT)
    theirs.admin_headers = _basic_header("admin", USERS["admin"])  # the launcher's own admin calls
    theirs.start()
    yield theirs
    theirs.stop()


@pytest.mark.parametrize("user", ["admin", "alice"])
def test_right_password_both_clients(basic_broker: Any, topic_name: str, user: str) -> None:
    official = pulsar.Client(
        basic_broker.service_url,
        authentication=pulsar.AuthenticationBasic(user, USERS[user]),
        operation_timeout_seconds=15,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        official.create_producer(topic_name).send(b"official")
    finally:
        official.close()
    with Client(basic_broker.service_url, authentication=AuthenticationBasic(user, USERS[user])) as client:
        consumer = client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest)
        client.create_producer(topic_name).send(b"ours")
        assert [consumer.receive(10_000).data() for _ in range(2)] == [b"official", b"ours"]


@pytest.mark.parametrize(("user", "password"), [("alice", "guess"), ("mallory", "x")])
def test_wrong_password_is_refused(basic_broker: Any, topic_name: str, user: str, password: str) -> None:
    with Client(
        basic_broker.service_url, authentication=AuthenticationBasic(user, password), operation_timeout_seconds=10
    ) as client:
        with pytest.raises(AuthenticationError):
            client.create_producer(topic_name)


def test_admin_rest_takes_basic_headers(basic_broker: Any) -> None:
    path = basic_broker.web_url + "/admin/v2/persistent/public/default"
    assert httpx.get(path, headers=_basic_header("alice", USERS["alice"]), timeout=15).status_code == 200
    assert httpx.get(path, headers=_basic_header("alice", "guess"), timeout=15).status_code == 401
    assert httpx.get(path, timeout=15).status_code == 401
