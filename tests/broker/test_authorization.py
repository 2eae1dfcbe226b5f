"""The embedded broker's authorization decisions, on a real BrokerService and its storage: who may
do which topic and namespace operation by superuser role, tenant admin role and grants; grants
surviving a restart and going with their topic or namespace; the options that turn it on; and
every admin path declaring what it requires. The same decisions, on the wire and on admin REST,
are held to Apache Pulsar's by tests/interop/test_permissions_matrix.py."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from airflow_pulsar.broker.admin_authorization import requirement_of
from airflow_pulsar.broker.admin_http import AdminApi
from airflow_pulsar.broker.authorization import NamespaceOperation, TenantNotFoundError, TopicOperation
from airflow_pulsar.broker.config import BrokerConfig, ConfigError, add_arguments, from_arguments
from airflow_pulsar.broker.permissions import AuthAction
from airflow_pulsar.broker.service import BrokerService
from airflow_pulsar.client.topic_name import TopicName

T = TypeVar("T")
TOPIC = TopicName.parse("persistent://acme/ns/orders")
PARTITIONED = TopicName.parse("persistent://acme/ns/events")
CONSUMING = [op for op in TopicOperation if op not in (TopicOperation.LOOKUP, TopicOperation.GET_STATS,
                                                        TopicOperation.GET_METADATA, TopicOperation.PRODUCE)]  # fmt: skip


class Running:
    """A BrokerService on its own event loop, as the broker runs it (storage writes included)."""

    def __init__(self, data_dir: Path, superusers: frozenset[str] = frozenset({"admin"})):
        self.loop = asyncio.new_event_loop()
        config = BrokerConfig(data_dir=data_dir, fsync=False, authorization=True, superuser_roles=superusers)
        self.service = BrokerService(config)
        self.service.start(self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def close(self) -> None:
        self.run(asyncio.sleep(0))
        self.service.close()
        self.loop.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Running]:
    """A service with tenant ``acme`` (admin role ``ops``), namespace ``acme/ns``, a topic and a
    partitioned topic of two partitions; ``admin`` is its superuser."""
    running = Running(tmp_path)
    service = running.service
    running.run(service.tenants.create("acme", {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}))
    running.run(service.policies.create_namespace("acme/ns"))
    running.run(service.get_topic(TOPIC))
    running.run(service.create_partitioned_topic(PARTITIONED, 2))
    yield running
    running.close()


def allowed(running: Running, role: str, topic: TopicName, operation: TopicOperation, subscription: str | None = None) -> bool:
    authorizer = running.service.authorization
    assert authorizer is not None
    return authorizer.topic_refusal(role, topic, operation, subscription) is None


def test_superusers_and_tenant_admins_may_do_anything_on_the_tenants_topics(broker: Running) -> None:
    for role in ("admin", "ops"):
        assert all(allowed(broker, role, TOPIC, op, "any-sub") for op in TopicOperation), role
    authorizer = broker.service.authorization
    assert authorizer is not None
    assert authorizer.namespace_refusal("ops", "acme/ns", NamespaceOperation.DELETE_TOPIC) is None
    refusal = authorizer.namespace_refusal("clerk", "acme/ns", NamespaceOperation.DELETE_TOPIC)
    assert str(refusal) == "role 'clerk' is neither a superuser nor an admin of tenant 'acme'"


def test_a_produce_grant_allows_lookup_and_produce_only(broker: Running) -> None:
    broker.run(broker.service.permissions.grant_namespace("acme/ns", "writer", [AuthAction.produce]))
    for op in (TopicOperation.LOOKUP, TopicOperation.GET_STATS, TopicOperation.GET_METADATA, TopicOperation.PRODUCE):
        assert allowed(broker, "writer", TOPIC, op)
    assert not any(allowed(broker, "writer", TOPIC, op, "s") for op in CONSUMING)
    authorizer = broker.service.authorization
    assert authorizer is not None
    refusal = authorizer.topic_refusal("writer", TOPIC, TopicOperation.PEEK_MESSAGES, "s")
    assert str(refusal) == "role 'writer' has no consume permission on topic persistent://acme/ns/orders"


def test_a_consume_grant_on_the_topic_allows_lookup_and_the_consuming_operations(broker: Running) -> None:
    broker.run(broker.service.permissions.grant_topic(TOPIC, "reader", [AuthAction.consume]))
    assert all(allowed(broker, "reader", TOPIC, op, "s") for op in CONSUMING)
    assert allowed(broker, "reader", TOPIC, TopicOperation.LOOKUP)
    assert not allowed(broker, "reader", TOPIC, TopicOperation.PRODUCE)
    other = TopicName.parse("persistent://acme/ns/other")
    assert not allowed(broker, "reader", other, TopicOperation.LOOKUP), "a topic grant is for that topic only"
    authorizer = broker.service.authorization
    assert authorizer is not None
    refusal = authorizer.namespace_refusal("reader", "acme/ns", NamespaceOperation.GET_TOPICS)
    assert refusal is not None, "listing a namespace's topics needs a namespace grant, as in Pulsar"


def test_a_grant_on_a_partitioned_topic_covers_its_partitions(broker: Running) -> None:
    broker.run(broker.service.permissions.grant_topic(PARTITIONED, "reader", [AuthAction.consume]))
    assert allowed(broker, "reader", PARTITIONED.partition_name(1), TopicOperation.CONSUME, "s")
    broker.run(broker.service.permissions.grant_topic(PARTITIONED.partition_name(0), "reader", [AuthAction.produce]))
    broker.run(broker.service.permissions.revoke_topic(PARTITIONED, "reader"))
    assert broker.service.permissions.topic_grants(PARTITIONED.partition_name(0)) == {}, "revoked on the partitions too"
    assert not allowed(broker, "reader", PARTITIONED.partition_name(1), TopicOperation.CONSUME, "s")


def test_a_subscription_with_roles_admits_only_those_roles(broker: Running) -> None:
    permissions = broker.service.permissions
    broker.run(permissions.grant_namespace("acme/ns", "reader", [AuthAction.consume]))
    broker.run(permissions.grant_namespace("acme/ns", "auditor", [AuthAction.consume]))
    broker.run(permissions.grant_subscription("acme/ns", "billing", ["reader"]))
    assert allowed(broker, "reader", TOPIC, TopicOperation.CONSUME, "billing")
    assert not allowed(broker, "auditor", TOPIC, TopicOperation.SKIP, "billing")
    assert allowed(broker, "auditor", TOPIC, TopicOperation.CONSUME, "other"), "a subscription without a list admits any consumer"
    assert allowed(broker, "auditor", TOPIC, TopicOperation.LOOKUP), "a lookup names no subscription"
    assert allowed(broker, "ops", TOPIC, TopicOperation.CONSUME, "billing"), "tenant admins are not held to the list"
    authorizer = broker.service.authorization
    assert authorizer is not None
    refusal = authorizer.topic_refusal("auditor", TOPIC, TopicOperation.CONSUME, "billing")
    assert str(refusal) == "role 'auditor' is not among the roles granted subscription 'billing' of namespace acme/ns"
    assert broker.run(permissions.revoke_subscription("acme/ns", "billing", "reader"))
    assert permissions.subscription_roles("acme/ns") == {}, "the list goes when its last role does"
    assert not broker.run(permissions.revoke_subscription("acme/ns", "billing", "reader"))


def test_a_tenant_that_does_not_exist_is_named_to_all_but_superusers(broker: Running) -> None:
    elsewhere = TopicName.parse("persistent://nowhere/ns/t")
    with pytest.raises(TenantNotFoundError):
        allowed(broker, "ops", elsewhere, TopicOperation.LOOKUP)
    assert allowed(broker, "admin", elsewhere, TopicOperation.LOOKUP)


def test_grants_survive_a_restart_and_go_with_their_topic_and_namespace(tmp_path: Path) -> None:
    running = Running(tmp_path)
    service = running.service
    running.run(service.policies.create_namespace("public/ns"))
    topic = TopicName.parse("persistent://public/ns/t")
    running.run(service.get_topic(topic))
    running.run(service.permissions.grant_namespace("public/ns", "writer", [AuthAction.produce, AuthAction.produce]))
    running.run(service.permissions.grant_topic(topic, "reader", [AuthAction.sinks, AuthAction.consume]))
    running.run(service.permissions.grant_subscription("public/ns", "sub", ["reader", "reader"]))
    running.close()

    running = Running(tmp_path)
    service = running.service
    assert service.permissions.namespace_grants("public/ns") == {"writer": ["produce"]}
    assert service.permissions.topic_grants(topic) == {"writer": ["produce"], "reader": ["consume", "sinks"]}
    assert service.permissions.subscription_roles("public/ns") == {"sub": ["reader"]}
    assert service.policies.namespace_policies("public/ns")["auth_policies"]["destination_auth"] == {
        str(topic): {"reader": ["consume", "sinks"]}
    }, "kept as Pulsar keeps them, in the namespace's policies"
    running.run(service.delete_topic(topic))
    assert service.permissions.topic_grants(topic) == {"writer": ["produce"]}, "a deleted topic's grants go with it"
    running.run(service.policies.delete_namespace("public/ns"))
    running.run(service.policies.create_namespace("public/ns"))
    assert service.permissions.namespace_grants("public/ns") == {}, "a namespace made again starts without grants"
    running.close()


def parse(*argv: str) -> BrokerConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return from_arguments(parser.parse_args(["--data-dir", "/tmp/unused", *argv]))


def test_authorization_takes_superuser_roles_and_needs_authentication() -> None:
    config = parse("--token-secret-file", "k", "--authorization", "--superuser-roles", " admin, ops ,")
    assert config.authorization and config.superuser_roles == {"admin", "ops"}
    with pytest.raises(ConfigError, match="--authorization needs authentication"):
        parse("--authorization")
    with pytest.raises(ConfigError, match="--superuser-roles needs --authorization"):
        parse("--token-secret-file", "k", "--superuser-roles", "admin")


def test_every_admin_path_declares_what_it_requires(broker: Running) -> None:
    app = AdminApi(broker.service).app
    undeclared = [
        f"{route.method} {route.resource.canonical}"
        for route in app.router.routes()
        if route.resource is not None and route.method != "HEAD" and requirement_of(route.handler) is None
    ]
    assert undeclared == []
    assert len(app.router.routes()) > 40



def test_the_admin_client_grants_the_actions_the_broker_knows() -> None:
    from airflow_pulsar.client.admin import AuthAction as ClientAction

    assert [action.value for action in ClientAction] == [action.value for action in AuthAction]
