"""Authorization on both brokers: the same roles get the same answers from the embedded broker
(``--authorization --superuser-roles admin`` with token authentication) and from Apache Pulsar
(``authorizationEnabled``, ``superUserRoles=admin``, ``AuthenticationProviderToken``).

The roles: the superuser ``admin``; ``tenant-admin``, an admin of tenant ``acme``; ``producer`` and
``consumer``, granted produce and consume on namespace ``acme/ns``; ``stranger``, granted nothing;
and an anonymous client, with no credentials. Every role tries every operation (our client on the
binary protocol, our admin client on admin REST, the official client as the oracle for lookups,
producers and consumers) and the outcome (allowed, or the error's kind and HTTP status) is the
one Apache Pulsar gives, which the table below states. On our broker a refusal also names the
role, the resource and what the role lacked. Then the grant, list and revoke paths answer alike,
a subscription's role list is enforced, a refusal fails at once rather than being retried, and
grants survive a broker restart.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pulsar
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.broker.tokens import create_token
from airflow_pulsar.client import AuthenticationToken, Client, InitialPosition
from airflow_pulsar.client.admin import AdminError, AsyncPulsarAdmin, AuthAction, PulsarAdmin
from airflow_pulsar.client.asyncio import Client as AsyncClient
from airflow_pulsar.client.exceptions import PulsarException, Result
from jvm.apache_pulsar import QUICK_JIT, PulsarStandalone

pytestmark = pytest.mark.interop

TENANT, NAMESPACE = "acme", "acme/ns"
TOPIC = f"persistent://{NAMESPACE}/orders"
ROLES = ("admin", "tenant-admin", "producer", "consumer", "stranger", "anonymous")
OK = "allowed"


@dataclass
class AuthorizingBroker:
    """A broker with token authentication and authorization, and a token for any role."""

    process: BrokerProcess | PulsarStandalone
    secret: bytes

    @property
    def name(self) -> str:
        return self.process.name

    def token(self, role: str) -> str:
        return create_token(self.secret, role)

    def client(self, role: str, operation_timeout_seconds: float = 10) -> Client:
        authentication = None if role == "anonymous" else AuthenticationToken(self.token(role))
        return Client(self.process.service_url, authentication=authentication, operation_timeout_seconds=operation_timeout_seconds)

    def admin(self, role: str) -> PulsarAdmin:
        authentication = None if role == "anonymous" else AuthenticationToken(self.token(role))
        return PulsarAdmin(self.process.web_url, authentication=authentication, timeout_seconds=30)

    def official(self, role: str) -> pulsar.Client:
        return pulsar.Client(
            self.process.service_url,
            authentication=pulsar.AuthenticationToken(self.token(role)),
            operation_timeout_seconds=10,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )


def start(kind: str, work: Path) -> AuthorizingBroker:
    secret = secrets.token_bytes(32)
    key = work / "secret.key"
    key.write_bytes(secret)
    if kind == "embedded":
        args = ("--token-secret-file", str(key), "--authorization", "--superuser-roles", "admin")
        return AuthorizingBroker(BrokerProcess(work / "data", *args).start(), secret)
    admin_token = create_token(secret, "admin")
    config = {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        "tokenSecretKey": f"file://{key}",
        "superUserRoles": "admin",
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": f"token:{admin_token}",
    }
    pulsar_broker = PulsarStandalone(work / "pulsar", config=config, admin_token=admin_token, jvm_options=QUICK_JIT)
    return AuthorizingBroker(pulsar_broker.start(), secret)


@pytest.fixture(scope="module")
def authz(broker_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthorizingBroker]:
    """The module's broker of ``broker_kind`` with authorization on, set up as the module docstring says:
    a topic with one message and the subscriptions the operations act on, a topic and a namespace
    per role to delete."""
    broker = start(broker_kind, tmp_path_factory.mktemp(f"authz-{broker_kind}"))
    try:
        with broker.admin("admin") as admin:
            tenant = {"adminRoles": ["tenant-admin"], "allowedClusters": ["standalone"]}
            admin_call(broker, "PUT", f"/admin/v2/tenants/{TENANT}", json=tenant)
            admin.create_namespace(NAMESPACE)
            admin.create_topic(TOPIC)
            for subscription in ("peek", "skip", "reset"):
                admin.create_subscription(TOPIC, subscription, InitialPosition.Earliest)
            admin.grant_namespace_permission(NAMESPACE, "producer", [AuthAction.produce])
            admin.grant_namespace_permission(NAMESPACE, "consumer", ["consume"])
            admin.grant_subscription_permission(NAMESPACE, "reserved", ["tenant-admin"])
            for role in ROLES:
                admin.create_topic(f"persistent://{NAMESPACE}/doomed-{role}")
                admin.create_namespace(f"{TENANT}/doomed-{role}")
        with broker.client("admin") as client:
            client.create_producer(TOPIC).send(b"the message peeked at")
        yield broker
    finally:
        broker.process.stop()


def admin_call(broker: AuthorizingBroker, method: str, path: str, **kwargs: Any) -> Any:
    """A raw admin request as the superuser (for what PulsarAdmin has no method for: tenants)."""
    response = broker.process.admin(method, path, headers={"Authorization": f"Bearer {broker.token('admin')}"}, **kwargs)
    assert response.status_code < 300, response.text
    return response


@pytest.fixture(scope="module", autouse=True)
def broker_log_is_clean(authz: AuthorizingBroker) -> Iterator[None]:
    """Replaces the interop tier's check, which reads the module's default broker: this module's
    broker is its own, and its log must hold no unhandled exception either."""
    yield
    if authz.name == "embedded":
        text = authz.process.log_path.read_text(errors="replace")
        assert "Traceback" not in text, text[-5000:]


# ---- the matrix ----


def outcome(action: Callable[[], Any]) -> tuple[str, str]:
    """``(OK, "")`` or the failure's kind (the HTTP status of an admin call) and its message."""
    try:
        action()
    except AdminError as exc:
        return str(exc.status), exc.reason
    except (PulsarException, pulsar.PulsarException) as exc:
        return type(exc).__name__, str(exc)
    return OK, ""


def operations(broker: AuthorizingBroker, role: str) -> dict[str, Callable[[], Any]]:
    """Each operation of the matrix, done as ``role``."""

    def binary(use: Callable[[Client], Any]) -> Callable[[], Any]:
        def run() -> Any:
            with broker.client(role) as client:
                return use(client)

        return run

    def official(use: Callable[[pulsar.Client], Any]) -> Callable[[], Any]:
        def run() -> Any:
            client = broker.official(role)
            try:
                return use(client)
            finally:
                client.close()

        return run

    def rest(use: Callable[[PulsarAdmin], Any]) -> Callable[[], Any]:
        def run() -> Any:
            with broker.admin(role) as admin:
                return use(admin)

        return run

    def raw(method: str, path: str) -> Callable[[], Any]:
        """A path PulsarAdmin has no method for, as an AdminError when refused."""

        def run() -> Any:
            headers = {} if role == "anonymous" else {"Authorization": f"Bearer {broker.token(role)}"}
            # Not process.admin(): Apache Pulsar's launcher adds its superuser token to those requests.
            response = httpx.request(method, broker.process.web_url + path, headers=headers, timeout=30)
            if response.status_code >= 400:
                raise AdminError(response.text, operation=path, method=method, path=path, status=response.status_code)

        return run

    elsewhere = "persistent://nowhere/ns/t"

    return {
        "lookup": binary(lambda c: c.get_topic_partitions(TOPIC)),
        "produce": binary(lambda c: c.create_producer(TOPIC).send(b"from " + role.encode())),
        "subscribe": binary(lambda c: c.subscribe(TOPIC, f"sub-{role}").close()),
        "subscribe-reserved": binary(lambda c: c.subscribe(TOPIC, "reserved").close()),
        "official-produce": official(lambda c: c.create_producer(TOPIC).close()),
        "official-subscribe": official(lambda c: c.subscribe(TOPIC, f"official-{role}").close()),
        "stats": rest(lambda a: a.topic_stats(TOPIC)),
        "list-topics": rest(lambda a: a.list_topics(NAMESPACE)),
        "peek": rest(lambda a: a.peek_message(TOPIC, "peek")),
        "skip": rest(lambda a: a.clear_backlog(TOPIC, "skip")),
        "reset-cursor": rest(lambda a: a.reset_cursor(TOPIC, "reset", 0)),
        "delete-topic": rest(lambda a: a.delete_topic(f"persistent://{NAMESPACE}/doomed-{role}")),
        "create-namespace": rest(lambda a: a.create_namespace(f"{TENANT}/new-{role}")),
        "delete-namespace": rest(lambda a: a.delete_namespace(f"{TENANT}/doomed-{role}")),
        "grant": rest(lambda a: a.grant_namespace_permission(NAMESPACE, f"granted-by-{role}", ["consume"])),
        "list-permissions": rest(lambda a: a.namespace_permissions(NAMESPACE)),
        "topic-permissions": rest(lambda a: a.topic_permissions(TOPIC)),
        "partitions": rest(lambda a: a.partition_count(TOPIC)),
        "create-topic": rest(lambda a: a.create_topic(f"persistent://{NAMESPACE}/made-by-{role}")),
        "topic-policy": rest(lambda a: a.topic_deduplication(TOPIC)),
        "namespace-policy": rest(lambda a: a.namespace_deduplication(NAMESPACE)),
        "http-lookup": raw("GET", f"/lookup/v2/topic/persistent/{NAMESPACE}/orders"),
        "list-namespaces": raw("GET", f"/admin/v2/namespaces/{TENANT}"),
        "get-tenant": raw("GET", f"/admin/v2/tenants/{TENANT}"),
        "list-tenants": raw("GET", "/admin/v2/tenants"),
        "lookup-elsewhere": binary(lambda c: c.get_topic_partitions(elsewhere)),
        "stats-elsewhere": rest(lambda a: a.topic_stats(elsewhere)),
    }


AZ, AN = "AuthorizationError", "AuthenticationError"
# Apache Pulsar 4.2's answer to each role for each operation; anonymous clients are refused at
# connect (and the official client, which retries a refused connect, is not asked for them).
EXPECTED: dict[str, dict[str, str]] = {
    #                      admin  tenant-admin  producer  consumer  stranger  anonymous
    "lookup":             dict(zip(ROLES, (OK, OK, OK, OK, AZ, AN), strict=True)),
    "produce":            dict(zip(ROLES, (OK, OK, OK, AZ, AZ, AN), strict=True)),
    "subscribe":          dict(zip(ROLES, (OK, OK, AZ, OK, AZ, AN), strict=True)),
    "subscribe-reserved": dict(zip(ROLES, (OK, OK, AZ, AZ, AZ, AN), strict=True)),
    "official-produce":   dict(zip(ROLES[:5], (OK, OK, OK, AZ, AZ), strict=True)),
    "official-subscribe": dict(zip(ROLES[:5], (OK, OK, AZ, OK, AZ), strict=True)),
    "stats":              dict(zip(ROLES, (OK, OK, OK, OK, "401", "401"), strict=True)),
    "list-topics":        dict(zip(ROLES, (OK, OK, OK, OK, "403", "401"), strict=True)),
    "peek":               dict(zip(ROLES, (OK, OK, "401", OK, "401", "401"), strict=True)),
    "skip":               dict(zip(ROLES, (OK, OK, "401", OK, "401", "401"), strict=True)),
    "reset-cursor":       dict(zip(ROLES, (OK, OK, "401", OK, "401", "401"), strict=True)),
    "delete-topic":       dict(zip(ROLES, (OK, OK, "403", "403", "403", "401"), strict=True)),
    "create-namespace":   dict(zip(ROLES, (OK, OK, "401", "401", "401", "401"), strict=True)),
    "delete-namespace":   dict(zip(ROLES, (OK, OK, "401", "401", "401", "401"), strict=True)),
    "grant":              dict(zip(ROLES, (OK, OK, "403", "403", "403", "401"), strict=True)),
    "list-permissions":   dict(zip(ROLES, (OK, OK, "403", "403", "403", "401"), strict=True)),
    "topic-permissions":  dict(zip(ROLES, (OK, OK, "401", "401", "401", "401"), strict=True)),
    "partitions":         dict(zip(ROLES, (OK, OK, OK, OK, "401", "401"), strict=True)),
    "create-topic":       dict(zip(ROLES, (OK, OK, "403", "403", "403", "401"), strict=True)),
    "topic-policy":       dict(zip(ROLES, (OK, OK, "403", "403", "403", "401"), strict=True)),
    "namespace-policy":   dict(zip(ROLES, (OK, OK, "403", "403", "403", "401"), strict=True)),
    "http-lookup":        dict(zip(ROLES, (OK, OK, OK, OK, "401", "401"), strict=True)),
    "list-namespaces":    dict(zip(ROLES, (OK, OK, "401", "401", "401", "401"), strict=True)),
    "get-tenant":         dict(zip(ROLES, (OK, OK, "401", "401", "401", "401"), strict=True)),
    "list-tenants":       dict(zip(ROLES, (OK, "401", "401", "401", "401", "401"), strict=True)),
    # A tenant that does not exist: the superuser hears the namespace is missing, the others the tenant.
    "lookup-elsewhere":   dict(zip(ROLES, ("TopicNotFound",) * 5 + (AN,), strict=True)),
    "stats-elsewhere":    dict(zip(ROLES, ("404",) * 5 + ("401",), strict=True)),
}  # fmt: skip
CASES = [(operation, role) for operation, by_role in EXPECTED.items() for role in by_role]


@pytest.mark.parametrize(("operation", "role"), CASES, ids=[f"{op}-{role}" for op, role in CASES])
def test_each_role_gets_pulsars_answer(authz: AuthorizingBroker, operation: str, role: str) -> None:
    kind, message = outcome(operations(authz, role)[operation])
    assert kind == EXPECTED[operation][role], message
    # Our broker names who lacked what on which resource. (The official client's errors carry no
    # broker message, and the anonymous client is refused at connect.)
    refused = kind in (AZ, "401", "403") and role != "anonymous" and not operation.startswith("official")
    if authz.name == "embedded" and refused:
        assert f"role '{role}'" in message, message
        resources = (TOPIC, f"namespace {NAMESPACE}", f"tenant '{TENANT}'", "subscription 'reserved'", "this cluster")
        assert any(resource in message for resource in resources), message


def test_a_refusal_fails_at_once_and_names_the_role_the_resource_and_the_action(authz: AuthorizingBroker) -> None:
    began = time.monotonic()
    with authz.client("producer", operation_timeout_seconds=30) as client, pytest.raises(PulsarException) as refused:
        client.subscribe(TOPIC, "never")
    assert time.monotonic() - began < 5, "a refusal is not transient: the client does not retry it"
    assert type(refused.value).__name__ == AZ
    with authz.admin("stranger") as admin, pytest.raises(AdminError) as denied:
        admin.message_backlog(TOPIC, "peek")  # what the backlog sensor and trigger read first: the stats
    assert time.monotonic() - began < 10 and denied.value.status == 401
    if authz.name == "embedded":
        assert str(refused.value).startswith("Client is not authorized to subscribe: role 'producer'")
        assert f"has no consume permission on topic {TOPIC}" in str(refused.value)
        assert f"role 'stranger' has no produce or consume permission on topic {TOPIC}" in denied.value.reason


def test_the_asyncio_clients_the_triggers_use_fail_at_once_too(authz: AuthorizingBroker) -> None:
    async def attempt() -> tuple[PulsarException, AdminError]:
        client = AsyncClient(
            authz.process.service_url, authentication=AuthenticationToken(authz.token("producer")), operation_timeout_seconds=30
        )
        try:
            with pytest.raises(PulsarException) as refused:
                await client.subscribe(TOPIC, "never")
        finally:
            await client.close()
        async with AsyncPulsarAdmin(authz.process.web_url, authentication=AuthenticationToken(authz.token("stranger"))) as admin:
            with pytest.raises(AdminError) as denied:
                await admin.message_backlog(TOPIC, "peek")
        return refused.value, denied.value

    began = time.monotonic()
    refused, denied = asyncio.run(attempt())
    assert time.monotonic() - began < 10, "neither refusal is retried"
    assert refused.error() == Result.AuthorizationError and denied.status == 401
    if authz.name == "embedded":
        assert f"role 'producer' has no consume permission on topic {TOPIC}" in str(refused)
        assert f"role 'stranger' has no produce or consume permission on topic {TOPIC}" in str(denied)


# ---- grant, list, revoke ----


def test_grants_list_and_revoke_as_on_pulsar(authz: AuthorizingBroker) -> None:
    topic = f"persistent://{NAMESPACE}/granted"
    with authz.admin("tenant-admin") as admin:
        admin.create_topic(topic)
        admin.grant_topic_permission(topic, "auditor", [AuthAction.consume, "sinks"])
        admin.grant_namespace_permission(NAMESPACE, "writer", ["produce"])
        admin.grant_topic_permission(topic, "writer", ["consume"])
        granted = {role: set(actions) for role, actions in admin.topic_permissions(topic).items()}
        assert granted["auditor"] == {"consume", "sinks"}
        assert granted["writer"] == {"produce", "consume"}, "the namespace's grant and the topic's, joined"
        assert set(admin.namespace_permissions(NAMESPACE)["writer"]) == {"produce"}
        admin.revoke_topic_permission(topic, "writer")
        assert set(admin.topic_permissions(topic)["writer"]) == {"produce"}
        admin.revoke_namespace_permission(NAMESPACE, "writer")
        admin.revoke_namespace_permission(NAMESPACE, "never-granted")
        assert "writer" not in admin.topic_permissions(topic)
        with pytest.raises(AdminError) as missing:
            admin.grant_topic_permission(f"persistent://{NAMESPACE}/never-created", "auditor", ["consume"])
        assert missing.value.status == 404
        with pytest.raises(AdminError) as no_namespace:
            admin.grant_namespace_permission(f"{TENANT}/never-created", "auditor", ["consume"])
        assert no_namespace.value.status == 404
        with pytest.raises(ValueError, match="unknown action 'publish'"):
            admin.grant_namespace_permission(NAMESPACE, "auditor", ["publish"])
        admin.delete_topic(topic)
        admin.create_topic(topic)
        assert "auditor" not in admin.topic_permissions(topic), "a deleted topic's grants go with it"


def test_a_subscription_list_admits_only_its_roles(authz: AuthorizingBroker) -> None:
    with authz.admin("admin") as admin:
        admin.grant_namespace_permission(NAMESPACE, "billing", ["consume"])
        admin.grant_namespace_permission(NAMESPACE, "auditor", ["consume"])
        admin.grant_subscription_permission(NAMESPACE, "invoices", ["billing"])
        assert admin.subscription_permissions(NAMESPACE)["invoices"] == ["billing"]
    with authz.client("billing") as client:
        client.subscribe(TOPIC, "invoices").close()
    with authz.client("auditor") as client:
        client.subscribe(TOPIC, "audit").close()
        with pytest.raises(PulsarException) as refused:
            client.subscribe(TOPIC, "invoices")
    assert type(refused.value).__name__ == AZ
    if authz.name == "embedded":
        assert f"role 'auditor' is not among the roles granted subscription 'invoices' of namespace {NAMESPACE}" in str(refused.value)
    with authz.admin("auditor") as admin, pytest.raises(AdminError) as peek:
        admin.peek_message(TOPIC, "invoices")
    assert peek.value.status == 401
    with authz.admin("admin") as admin:
        admin.revoke_subscription_permission(NAMESPACE, "invoices", "billing")
        assert "invoices" not in admin.subscription_permissions(NAMESPACE)
        with pytest.raises(AdminError) as unlisted:
            admin.revoke_subscription_permission(NAMESPACE, "invoices", "billing")
        assert unlisted.value.status == 500, "Pulsar's answer for a subscription without a list"
    with authz.client("auditor") as client:
        client.subscribe(TOPIC, "invoices").close()


def test_grants_survive_a_restart(authz: AuthorizingBroker) -> None:
    with authz.admin("admin") as admin:
        admin.grant_namespace_permission(NAMESPACE, "survivor", ["produce"])
        admin.grant_subscription_permission(NAMESPACE, "kept", ["survivor"])
    authz.process.restart()
    with authz.admin("admin") as admin:
        assert admin.namespace_permissions(NAMESPACE)["survivor"] == ["produce"]
        assert admin.subscription_permissions(NAMESPACE)["kept"] == ["survivor"]
    with authz.client("survivor") as client:
        client.create_producer(TOPIC).send(b"after the restart")
        with pytest.raises(PulsarException):
            client.subscribe(TOPIC, "kept")


def test_grant_bodies_are_read_as_on_pulsar(authz: AuthorizingBroker) -> None:
    headers = {"Authorization": f"Bearer {authz.token('admin')}", "Content-Type": "application/json"}

    def post(path: str, body: str) -> int:
        return httpx.post(authz.process.web_url + path, content=body, headers=headers, timeout=30).status_code

    grant = f"/admin/v2/namespaces/{NAMESPACE}/permissions/lenient"
    assert post(grant, "") == 400, "no list of actions"
    assert post(grant, '"produce"') == 400, "not a list"
    assert post(grant, '["produce", "publish"]') == 204, "an unknown action is dropped, not refused"
    with authz.admin("admin") as admin:
        assert admin.namespace_permissions(NAMESPACE)["lenient"] == ["produce"]
        with pytest.raises(AdminError) as gone:
            admin.namespace_permissions(f"{TENANT}/never-created")
        assert gone.value.status == 404
    assert post(f"/admin/v2/namespaces/{NAMESPACE}/permissions/subscription/lenient", "") == 400, "no list of roles"
