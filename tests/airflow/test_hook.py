"""PulsarHook: connections from AIRFLOW_CONN_* variables, the real broker, provider registration, masking."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from urllib.parse import quote

import airflow
import jsonschema
import pytest
from airflow.sdk import Connection

from airflow_pulsar.client import ConsumerType, InitialPosition, MessageId
from airflow_pulsar.get_provider_info import get_provider_info
from airflow_pulsar.hooks.pulsar import PulsarConnectionConfig, PulsarHook
from tests.support.airflow_env import AIRFLOW_BIN, AIRFLOW_ENV
from tests.support.ports import free_port

AIRFLOW_PACKAGE = Path(airflow.__file__).parent
HOOK_CLASS = "airflow_pulsar.hooks.pulsar.PulsarHook"


def _conn(**fields: object) -> Connection:
    extra = fields.pop("extra", None)
    return Connection(conn_id="pulsar_test", conn_type="pulsar", extra=json.dumps(extra) if extra else None, **fields)


def _airflow_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **AIRFLOW_ENV}
    return subprocess.run([str(AIRFLOW_BIN), *args], capture_output=True, text=True, env=env, timeout=60)


# ---- provider metadata ----


def test_provider_info_validates_against_airflow_schema() -> None:
    info = get_provider_info()
    schema = json.loads((AIRFLOW_PACKAGE / "provider_info.schema.json").read_text())
    jsonschema.validate(info, schema)
    # The declarative connection form (conn-fields, ui-field-behaviour) is specified by provider.yaml's schema.
    yaml_schema = json.loads((AIRFLOW_PACKAGE / "provider.yaml.schema.json").read_text())
    jsonschema.validate(info["connection-types"], yaml_schema["properties"]["connection-types"])
    assert info["connection-types"][0]["hook-class-name"] == HOOK_CLASS
    assert info["connection-types"][0]["connection-type"] == "pulsar"
    assert info["hooks"][0]["python-modules"] == ["airflow_pulsar.hooks.pulsar"]


def test_hook_identity_and_form() -> None:
    assert (PulsarHook.conn_name_attr, PulsarHook.default_conn_name) == ("pulsar_conn_id", "pulsar_default")
    assert (PulsarHook.conn_type, PulsarHook.hook_name) == ("pulsar", "Apache Pulsar")
    behaviour = PulsarHook.get_ui_field_behaviour()
    schema = json.loads((AIRFLOW_PACKAGE / "customized_form_field_behaviours.schema.json").read_text())
    jsonschema.validate(behaviour, schema)
    assert set(behaviour["hidden_fields"]) == {"schema"}
    assert behaviour["relabeling"]["password"] == "Token, password or client secret"
    assert {"host", "port"} <= set(behaviour["relabeling"])


def test_providers_manager_knows_the_pulsar_connection_type() -> None:
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    manager = ProvidersManager()  # what the API server (connection form, test button) uses
    assert "airflow-pulsar" in manager.providers
    hook = ProvidersManagerTaskRuntime().hooks["pulsar"]  # what tasks use (Connection.get_hook)
    assert hook is not None
    assert (hook.hook_class_name, hook.connection_id_attribute_name) == (HOOK_CLASS, "pulsar_conn_id")
    assert hook.hook_name == "Apache Pulsar" and hook.connection_testable
    widgets = manager.connection_form_widgets
    for name in ("admin_url", "use_tls", "tls_trust_certs_file_path", "tls_allow_insecure_connection",
                 "tls_validate_hostname", "operation_timeout_seconds", "memory_limit_bytes", "auth_method",
                 "tls_certificate_file_path", "tls_private_key_file_path", "oauth2_issuer_url"):
        assert f"extra__pulsar__{name}" in widgets
    assert manager.field_behaviours["pulsar"]["relabeling"]["password"] == "Token, password or client secret"


def test_task_sdk_resolves_the_hook_from_a_connection(pulsar_conn) -> None:
    pulsar_conn(host="localhost", port=6650)
    hook = Connection.get("pulsar_default").get_hook()
    assert isinstance(hook, PulsarHook) and hook.pulsar_conn_id == "pulsar_default"


def test_airflow_cli_lists_the_provider_and_its_hook() -> None:
    listed = _airflow_cli("providers", "list", "--output", "json")
    assert listed.returncode == 0, listed.stderr
    packages = json.loads(next(line for line in listed.stdout.splitlines() if line.startswith("[")))
    assert {"package_name": "airflow-pulsar", "version": "0.1.0"} in [
        {key: p[key] for key in ("package_name", "version")} for p in packages
    ]
    hooks = _airflow_cli("providers", "hooks")
    assert hooks.returncode == 0, hooks.stderr
    row = next(line for line in hooks.stdout.splitlines() if line.startswith("pulsar "))
    assert HOOK_CLASS in row and "pulsar_conn_id" in row and "airflow-pulsar" in row


def test_importing_and_constructing_the_hook_opens_no_socket() -> None:
    code = (
        "import socket, threading\n"
        "def refuse(*a, **k): raise AssertionError('socket opened')\n"
        "socket.socket.connect = refuse; socket.socket.connect_ex = refuse; socket.create_connection = refuse\n"
        "before = threading.active_count()\n"
        "import airflow_pulsar.hooks.pulsar as m\n"
        "hook = m.PulsarHook('pulsar_default'); repr(hook)\n"
        "assert threading.active_count() == before, threading.enumerate()\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr


# ---- connection → service URL, admin URL, client settings ----


@pytest.mark.parametrize(
    ("fields", "service_url", "admin_url"),
    [
        ({"host": "broker"}, "pulsar://broker:6650", "http://broker:8080"),
        ({"host": "broker", "port": 7000}, "pulsar://broker:7000", "http://broker:8080"),
        ({"host": "broker", "extra": {"use_tls": True}}, "pulsar+ssl://broker:6651", "https://broker:8443"),
        ({"host": "broker", "port": 7001, "extra": {"use_tls": "true"}}, "pulsar+ssl://broker:7001", "https://broker:8443"),
        ({"host": "pulsar://b1:6650,b2:6650"}, "pulsar://b1:6650,b2:6650", "http://b1:8080"),
        ({"host": "pulsar+ssl://b1:6651"}, "pulsar+ssl://b1:6651", "https://b1:8443"),
        ({"host": "broker", "extra": {"admin_url": "http://admin:9090/"}}, "pulsar://broker:6650", "http://admin:9090"),
        ({"host": "broker", "extra": {"extra__pulsar__admin_url": "http://old:1"}}, "pulsar://broker:6650", "http://old:1"),
        # An admin port's URL: the client looks topics up over HTTP, and the admin URL is that port.
        ({"host": "http://broker:8080"}, "http://broker:8080", "http://broker:8080"),
        ({"host": "https://broker:8443"}, "https://broker:8443", "https://broker:8443"),
        ({"host": "http://broker:8080", "extra": {"admin_url": "http://admin:9090"}}, "http://broker:8080", "http://admin:9090"),
    ],
)
def test_service_and_admin_urls(fields: dict, service_url: str, admin_url: str) -> None:
    config = PulsarConnectionConfig.from_connection(_conn(**fields))
    assert (config.service_url, config.admin_url) == (service_url, admin_url)
    assert config.use_tls == service_url.startswith(("pulsar+ssl", "https"))


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({}, "has no host"),
        ({"host": "ftp://broker:8080"}, r"must be a host name or a pulsar://, pulsar\+ssl://, http:// or https://"),
        ({"host": "broker", "extra": {"use_tls": "maybe"}}, "'use_tls' must be a boolean"),
        ({"host": "broker", "extra": {"operation_timeout_seconds": "soon"}}, "must be a number"),
        ({"host": "broker", "extra": {"operation_timeout_seconds": 0}}, "must be positive"),
    ],
)
def test_bad_connections_are_rejected_clearly(fields: dict, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        PulsarConnectionConfig.from_connection(_conn(**fields))


def test_extras_reach_the_client(pulsar_conn) -> None:
    # URI form: extras arrive as strings.
    pulsar_conn(
        "pulsar://:tok-extras-123456@broker.example:6651/?use_tls=true&tls_allow_insecure_connection=true"
        "&tls_validate_hostname=false&operation_timeout_seconds=12.5&memory_limit_bytes=1048576"
    )
    hook = PulsarHook()
    assert hook.service_url == "pulsar+ssl://broker.example:6651"
    client = hook.get_client()  # built, not connected
    try:
        assert client.use_tls and client.service_url.tls
        assert client.operation_timeout == 12.5 and client.memory_limit_bytes == 1048576
        assert client._tls_context is not None and not client._tls_context.check_hostname
        assert client.authentication.token() == "tok-extras-123456"
        assert hook.get_client() is client and hook.get_conn() is client
        assert not client._pool
    finally:
        hook.close()
    assert client._closed and hook._client is None


def test_client_kwargs_override_the_connection(pulsar_conn) -> None:
    pulsar_conn(host="broker", extra={"operation_timeout_seconds": 5})
    hook = PulsarHook(client_kwargs={"operation_timeout_seconds": 7, "connection_timeout_ms": 1500})
    client = hook.get_client()
    assert (client.operation_timeout, client.connection_timeout) == (7.0, 1.5)
    assert client.authentication is None
    hook.close()


# ---- against the real broker ----


@pytest.mark.parametrize("form", ["json", "uri"])
def test_produce_then_consume_through_the_hook(broker, pulsar_conn, topic_name: str, form: str) -> None:
    host, port = broker.service_url.removeprefix("pulsar://").rsplit(":", 1)
    if form == "json":
        pulsar_conn(host=host, port=int(port), password="tok-produce-123456", extra={"admin_url": broker.web_url})
    else:
        pulsar_conn(f"pulsar://:tok-produce-123456@{host}:{port}/?admin_url={quote(broker.web_url, safe='')}")
    with PulsarHook() as hook:
        assert hook.admin_url == broker.web_url
        consumer = hook.subscribe(
            [topic_name], "airflow", consumer_type=ConsumerType.Shared, initial_position=InitialPosition.Earliest
        )
        producer = hook.create_producer(topic_name, batching_enabled=True, batching_max_messages=5)
        for i in range(10):
            producer.send(f"m{i}".encode(), properties={"i": str(i)})
        got = []
        for _ in range(10):
            message = consumer.receive(timeout_millis=5000)
            got.append(message.data())
            consumer.acknowledge(message)
        assert got == [f"m{i}".encode() for i in range(10)]
        reader = hook.create_reader(topic_name, MessageId.earliest)
        assert reader.read_next(5000).data() == b"m0"
        client = hook.get_client()
    assert client._closed and not client._handlers
    # close() closed what the hook created; a later call builds a new client.
    assert hook._client is None and not hook._handlers


@pytest.mark.parametrize("form", ["json", "uri"])
def test_connection_test_succeeds_against_the_broker(broker, pulsar_conn, form: str) -> None:
    if form == "json":
        pulsar_conn(host=broker.service_url, password="tok-test-ok-123456", extra={"admin_url": broker.web_url})
    else:
        host, port = broker.service_url.removeprefix("pulsar://").rsplit(":", 1)
        admin_url = urllib.parse.quote(broker.web_url, safe="")
        pulsar_conn(f"pulsar://:tok-test-ok-123456@{host}:{port}?admin_url={admin_url}")
    hook = PulsarHook()
    ok, message = hook.test_connection()
    assert ok, message
    assert broker.service_url in message and broker.web_url in message and "tok-test-ok" not in message
    assert hook._client is None  # the probe client is separate and closed


def test_a_connection_to_an_http_service_url(broker, pulsar_conn, topic_name: str) -> None:
    # The admin port's URL as host: topics are looked up over HTTP, and it is the admin URL too.
    pulsar_conn(host=broker.web_url)
    hook = PulsarHook()
    ok, message = hook.test_connection()
    assert ok, message
    assert message.startswith(f"Connected to Pulsar at {broker.web_url} (")
    try:
        consumer = hook.get_client().subscribe(topic_name, "sub")
        hook.get_client().create_producer(topic_name).send(b"through an http:// connection")
        assert consumer.receive(5000).data() == b"through an http:// connection"
    finally:
        hook.close()


def test_connection_test_through_the_task_sdk(broker, pulsar_conn) -> None:
    pulsar_conn(host=broker.service_url, extra={"admin_url": broker.web_url})
    ok, message = Connection.get("pulsar_default").test_connection()
    assert ok, message


def test_connection_test_fails_naming_an_unreachable_admin_url(broker, pulsar_conn) -> None:
    admin_url = f"http://127.0.0.1:{free_port()}"
    pulsar_conn(host=broker.service_url, password="tok-admin-down-123456", extra={"admin_url": admin_url})
    ok, message = PulsarHook().test_connection()
    assert not ok
    assert message.startswith(f"Connected to Pulsar at {broker.service_url} (")
    assert f"but not to its admin REST API at {admin_url} (the connection's admin_url" in message
    assert "tok-admin-down" not in message


def test_connection_test_fails_clearly_on_a_closed_port(pulsar_conn) -> None:
    port = free_port()
    pulsar_conn(host="127.0.0.1", port=port, password="tok-closed-port-123456")
    started = time.monotonic()
    ok, message = PulsarHook().test_connection()
    assert not ok
    assert time.monotonic() - started < 10
    assert message.startswith(f"Cannot reach Pulsar at pulsar://127.0.0.1:{port}: ConnectError"), message
    assert "tok-closed-port" not in message


def test_connection_test_fails_clearly_on_a_bad_connection(pulsar_conn) -> None:
    pulsar_conn(host="ftp://wrong:8080")
    ok, message = PulsarHook().test_connection()
    assert not ok and message.startswith("Invalid Pulsar connection 'pulsar_default':"), message


# ---- the token is masked ----


def test_token_is_masked_and_never_shown(pulsar_conn, caplog: pytest.LogCaptureFixture, capfd) -> None:
    from airflow.sdk.log import mask_logs

    token = f"tok-secret-{time.monotonic_ns()}"
    # Straight from a Connection object, so the mask is ours (not the one Connection.get adds).
    config = PulsarConnectionConfig.from_connection(_conn(host="broker", password=token))
    assert mask_logs(None, "info", {"event": f"header Bearer {token}"})["event"] == "header Bearer ***"
    assert token not in repr(config)

    pulsar_conn(host="127.0.0.1", port=free_port(), password=token)
    caplog.set_level(logging.DEBUG)
    hook = PulsarHook()
    client = hook.get_client()
    texts = [repr(hook), repr(hook.config), repr(client.authentication), str(hook.config.client_kwargs())]
    texts.append(hook.test_connection()[1])
    hook.close()
    out, err = capfd.readouterr()
    for text in [*texts, caplog.text, out, err]:
        assert token not in text
    assert client.authentication.token() == token  # still sent to the broker


# ---- admin REST ----


def test_admin_clients_use_the_admin_url_and_token(broker, pulsar_conn, topic_name: str) -> None:
    import asyncio

    pulsar_conn(host=broker.service_url, password="tok-admin-123456", extra={"admin_url": broker.web_url})
    hook = PulsarHook()
    producer = hook.create_producer(topic_name)
    producer.send(b"x")
    admin = hook.get_admin()
    assert hook.get_admin() is admin and "tok-admin" not in repr(admin)
    assert any(topic.endswith("/" + topic_name) for topic in admin.list_topics("public/default"))

    async def stats() -> dict:
        async with hook.get_async_admin() as async_admin:
            return await async_admin.topic_stats(topic_name)

    assert asyncio.run(stats())["msgInCounter"] == 1
    hook.close()
    assert hook._admin is None
