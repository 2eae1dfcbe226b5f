"""Lookups on a two-broker cluster: a client given one broker's URL is redirected to the broker that
owns the topic, and a partitioned topic whose partitions live on different brokers is produced and
consumed whole. The official client reads what ours wrote and the other way round."""

from __future__ import annotations

from collections import defaultdict

import pulsar
import pytest

from airflow_pulsar.client import Client, InitialPosition
from jvm.pulsar_cluster import PulsarCluster
from tests.support.cluster_topics import official_client, partitioned_topic_on_every_broker, topic_owned_by

pytestmark = pytest.mark.cluster

COUNT = 200


@pytest.mark.parametrize("owner_index", [0, 1], ids=["owned-by-broker-0", "owned-by-broker-1"])
def test_a_topic_is_reached_through_the_broker_that_does_not_own_it(
    cluster: PulsarCluster, topic_name: str, owner_index: int
) -> None:
    owner = cluster.brokers[owner_index]
    other = cluster.brokers[1 - owner_index]
    topic = topic_owned_by(cluster, owner, "public/default", topic_name)
    # Pulsar's own HTTP lookup on the other broker redirects to the owner, too.
    path = topic.replace("persistent://", "/lookup/v2/topic/persistent/")
    assert other.admin("GET", path).json()["brokerUrl"] == owner.service_url

    # Ours and the official client each know only the broker that does not own the topic.
    with Client(other.service_url) as ours:
        producer = ours.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
        for i in range(COUNT):
            producer.send_async(f"ours-{i}".encode(), None)
        producer.flush()
        official = official_client(other.service_url)
        try:
            subscriber = official.subscribe(topic, "oracle", initial_position=pulsar.InitialPosition.Earliest)
            read = [subscriber.receive(10_000).data().decode() for _ in range(COUNT)]
            assert read == [f"ours-{i}" for i in range(COUNT)]
            theirs = official.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
            for i in range(COUNT):
                theirs.send_async(f"official-{i}".encode(), None)
            theirs.flush()
        finally:
            official.close()
        consumer = ours.subscribe(topic, "ours", initial_position=InitialPosition.Earliest)
        values = [consumer.receive(10_000).data().decode() for _ in range(2 * COUNT)]
    assert values == [f"ours-{i}" for i in range(COUNT)] + [f"official-{i}" for i in range(COUNT)]
    # The owner served the producers: the topic's stats count both streams.
    stats = owner.topic_stats(topic.rsplit("/", 1)[1])
    assert stats["msgInCounter"] == 2 * COUNT


def test_partitions_owned_by_different_brokers_are_produced_and_consumed_whole(
    cluster: PulsarCluster, topic_name: str
) -> None:
    topic, owners = partitioned_topic_on_every_broker(cluster, "public/default", topic_name, 4)
    first, second = cluster.brokers
    keys = [f"key-{k}" for k in range(20)]

    # Ours produces through broker 0 alone: partition metadata from it, each partition looked up and
    # redirected to its owner.
    with Client(first.service_url) as ours:
        producer = ours.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=5)
        for i in range(COUNT * 5):
            producer.send_async(f"{keys[i % len(keys)]}:{i}".encode(), None, partition_key=keys[i % len(keys)])
        producer.flush()
    # The official client, through broker 1 alone, reads every partition.
    official = official_client(second.service_url)
    try:
        consumer = official.subscribe(topic, "oracle", initial_position=pulsar.InitialPosition.Earliest)
        received = [consumer.receive(10_000) for _ in range(COUNT * 5)]
    finally:
        official.close()

    partitions_of_key: dict[str, set[str]] = defaultdict(set)
    by_key: dict[str, list[int]] = defaultdict(list)
    for message in received:
        key, index = message.data().decode().split(":")
        partitions_of_key[key].add(message.topic_name())
        by_key[key].append(int(index))
    assert sum(len(indexes) for indexes in by_key.values()) == COUNT * 5
    assert sorted(i for indexes in by_key.values() for i in indexes) == list(range(COUNT * 5))
    assert all(indexes == sorted(indexes) for indexes in by_key.values())
    assert all(len(names) == 1 for names in partitions_of_key.values())  # a key stays on its partition
    used = set().union(*partitions_of_key.values())
    assert {owners[int(name.rsplit("-", 1)[1])].name for name in used} == {first.name, second.name}
    # The partitioned stats, asked of either broker, gather every partition from its owner.
    short = topic.replace("persistent://", "/admin/v2/persistent/")
    for broker in cluster.brokers:
        stats = broker.admin("GET", f"{short}/partitioned-stats").json()
        assert stats["msgInCounter"] == COUNT * 5
