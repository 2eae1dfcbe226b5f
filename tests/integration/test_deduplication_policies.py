"""Deduplication as namespace and topic policies, through the admin client, on both brokers.

The paths, answers and errors are Pulsar's: ``/admin/v2/namespaces/{tenant}/{ns}/deduplication``
and ``/admin/v2/persistent/{tenant}/{ns}/{topic}/deduplicationEnabled`` (``applied=true`` for the
policy in force). Each test works in a namespace of its own: the Pulsar instance is shared by the
session, so ``public/default`` keeps its policies.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_pulsar.client import Client, MessageId
from airflow_pulsar.client.admin import AdminConflictError, AdminNotFoundError, AdminPreconditionFailedError, PulsarAdmin


@pytest.fixture
def admin(broker: Any) -> Iterator[PulsarAdmin]:
    with PulsarAdmin(broker.web_url) as made:
        yield made


@pytest.fixture
def namespace(admin: PulsarAdmin) -> str:
    name = f"public/dedup-policy-{uuid.uuid4().hex[:10]}"
    admin.create_namespace(name)
    return name


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Pulsar applies a policy change to a loaded topic asynchronously."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_namespace_policy_is_unset_then_set(broker: Any, admin: PulsarAdmin, namespace: str) -> None:
    assert namespace in broker.admin("GET", "/admin/v2/namespaces/public").json()
    assert admin.namespace_deduplication(namespace) is None
    admin.set_namespace_deduplication(namespace, True)
    assert admin.namespace_deduplication(namespace) is True
    admin.set_namespace_deduplication(namespace, False)
    assert admin.namespace_deduplication(namespace) is False


def test_namespace_errors_are_pulsar_s(admin: PulsarAdmin, namespace: str) -> None:
    with pytest.raises(AdminConflictError, match="Namespace already exists"):
        admin.create_namespace(namespace)
    with pytest.raises(AdminNotFoundError, match="Tenant does not exist"):
        admin.create_namespace(f"no-such-tenant-{uuid.uuid4().hex[:6]}/ns")
    with pytest.raises(AdminNotFoundError, match="Namespace does not exist"):
        admin.namespace_deduplication("public/no-such-namespace-x")


def test_topic_policy_overrides_the_namespace_and_partitions_follow_their_topic(
    admin: PulsarAdmin, namespace: str
) -> None:
    admin.set_namespace_deduplication(namespace, True)
    topic = f"persistent://{namespace}/orders"
    admin.create_partitioned_topic(topic, 2)
    assert admin.topic_deduplication(topic) is None
    assert admin.topic_deduplication(topic, applied=True) is True  # from the namespace
    admin.set_topic_deduplication(topic, False)
    wait_for(lambda: admin.topic_deduplication(topic) is False, "the topic policy")
    assert admin.topic_deduplication(topic, applied=True) is False
    with pytest.raises(AdminPreconditionFailedError, match="Not allowed to set/get topic policy for a partition"):
        admin.topic_deduplication(f"{topic}-partition-1")
    with pytest.raises(AdminNotFoundError, match="not found"):
        admin.topic_deduplication(f"persistent://{namespace}/missing")
    # Without a namespace policy, the broker's default applies: off on both brokers here.
    plain = f"persistent://{namespace}/plain"
    admin.create_topic(plain)
    admin.set_namespace_deduplication(namespace, False)
    wait_for(lambda: admin.topic_deduplication(plain, applied=True) is False, "the namespace policy")


def test_policies_decide_whether_a_resend_is_stored(broker: Any, admin: PulsarAdmin, namespace: str) -> None:
    topic = f"persistent://{namespace}/sends"
    admin.create_topic(topic)
    admin.set_namespace_deduplication(namespace, True)
    wait_for(lambda: admin.topic_stats(topic).get("deduplicationStatus") == "Enabled", "deduplication on")
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic, producer_name="resender", batching_enabled=False)
        stored = producer.send(b"first", sequence_id=7)
        duplicate = producer.send(b"first again", sequence_id=7)
        assert stored.entry_id() >= 0
        assert (duplicate.ledger_id(), duplicate.entry_id()) == (-1, -1)
        producer.close()

        admin.set_topic_deduplication(topic, False)
        wait_for(lambda: admin.topic_stats(topic).get("deduplicationStatus") == "Disabled", "deduplication off")
        producer = client.create_producer(topic, producer_name="resender", batching_enabled=False)
        assert producer.last_sequence_id() == -1  # the broker keeps no sequence ids while off
        assert producer.send(b"stored twice", sequence_id=7).entry_id() >= 0
        producer.close()

        reader = client.create_reader(topic, MessageId.earliest)
        values = []
        while reader.has_message_available():
            values.append(reader.read_next(timeout_millis=5000).data())
    assert values == [b"first", b"stored twice"]


@pytest.mark.embedded_only
def test_policies_survive_a_kill_9(broker_factory: Any) -> None:
    """Our broker's own storage: Pulsar keeps policies in its metadata store, ours in SQLite."""
    broker = broker_factory()
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_namespace("public/kept")
        admin.set_namespace_deduplication("public/kept", True)
        admin.create_partitioned_topic("persistent://public/kept/t", 2)
        admin.set_topic_deduplication("persistent://public/kept/t", False)
    broker.restart(crash=True)
    with PulsarAdmin(broker.web_url) as admin:
        assert admin.namespace_deduplication("public/kept") is True
        assert admin.topic_deduplication("persistent://public/kept/t") is False
        assert admin.topic_stats("persistent://public/kept/t-partition-0")["deduplicationStatus"] == "Disabled"
