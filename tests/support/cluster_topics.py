"""Helpers of the cluster tier: topics placed on chosen brokers, namespaces, and reading a topic back.

Pulsar's load manager spreads bundles over the brokers as it likes; a test that needs a topic on
a given broker moves the topic's bundle there (``PulsarCluster.place``, an admin unload with a
destination broker).
"""

from __future__ import annotations

import uuid
from collections import defaultdict

import pulsar

from jvm.pulsar_cluster import ClusterBroker, PulsarCluster

ATTEMPTS = 20
OPERATION_TIMEOUT = 30


def unique(prefix: str) -> str:
    """``prefix`` with a random suffix (topic names must not repeat within a session's cluster)."""
    return f"{prefix[:60]}-{uuid.uuid4().hex[:8]}"


def topic_owned_by(cluster: PulsarCluster, broker: ClusterBroker, namespace: str, prefix: str) -> str:
    """A new topic in ``namespace`` whose bundle ``broker`` owns."""
    topic = f"persistent://{namespace}/{unique(prefix)}"
    cluster.place(topic, broker)
    return topic


def partitioned_topic_on_every_broker(
    cluster: PulsarCluster, namespace: str, prefix: str, partitions: int
) -> tuple[str, dict[int, ClusterBroker]]:
    """A new partitioned topic whose partition ``i`` broker ``i % 2`` owns, and each partition's owner.

    Partitions that share a bundle would move together, so names are drawn until each partition
    falls in a bundle of its own.
    """
    for _ in range(ATTEMPTS):
        topic = f"persistent://{namespace}/{unique(prefix)}"
        names = [f"{topic}-partition-{i}" for i in range(partitions)]
        if len({cluster.bundle_of(name) for name in names}) < partitions:
            continue
        path = topic.replace("persistent://", "/admin/v2/persistent/")
        cluster.admin("PUT", f"{path}/partitions", json=partitions).raise_for_status()
        owners = {i: cluster.brokers[i % len(cluster.brokers)] for i in range(partitions)}
        for i, name in enumerate(names):
            cluster.place(name, owners[i])
        return topic, owners
    raise AssertionError(f"no {partitions} partitions of {namespace} fell in distinct bundles in {ATTEMPTS} draws")


def create_namespace(cluster: PulsarCluster, prefix: str, deduplication: bool = False) -> str:
    """A new namespace in the ``public`` tenant (8 bundles), with broker deduplication on if asked."""
    namespace = f"public/{unique(prefix)}"
    policies = {"bundles": {"numBundles": 8}, "deduplicationEnabled": deduplication}
    cluster.admin("PUT", f"/admin/v2/namespaces/{namespace}", json=policies).raise_for_status()
    applied = cluster.admin("GET", f"/admin/v2/namespaces/{namespace}/deduplication")
    assert applied.json() is deduplication, applied.text
    return namespace


def official_client(service_url: str) -> pulsar.Client:
    """The official client (the oracle), quiet and with short timeouts."""
    return pulsar.Client(
        service_url,
        operation_timeout_seconds=OPERATION_TIMEOUT,
        connection_timeout_ms=5000,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


def read_subscription(service_url: str, topic: str, subscription: str, count: int) -> list[str]:
    """The first ``count`` message values on an existing subscription, read with the official client."""
    client = official_client(service_url)
    try:
        consumer = client.subscribe(topic, subscription, initial_position=pulsar.InitialPosition.Earliest)
        values = []
        for _ in range(count):
            message = consumer.receive(timeout_millis=OPERATION_TIMEOUT * 1000)
            values.append(message.data().decode())
            consumer.acknowledge(message)
        return values
    finally:
        client.close()


def assert_each_once_in_key_order(values: list[str], expected: int) -> None:
    """``values`` ("key:index") hold every index below ``expected`` once, and each key's indexes ascend."""
    indexes = [int(value.split(":")[1]) for value in values]
    missing = sorted(set(range(expected)) - set(indexes))
    duplicated = len(indexes) - len(set(indexes))
    assert not missing and not duplicated, f"{len(missing)} lost (e.g. {missing[:5]}), {duplicated} duplicated"
    by_key: dict[str, list[int]] = defaultdict(list)
    for value in values:
        key, index = value.split(":")
        by_key[key].append(int(index))
    unordered = [key for key, seen in by_key.items() if seen != sorted(seen)]
    assert not unordered, f"keys out of order: {unordered}"
