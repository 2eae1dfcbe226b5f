"""Producers and consumers through a topic unload and through the kill -9 of the broker that owns
the topic, mid-stream, with broker deduplication on the namespace: every message is stored once
(0 lost, 0 duplicated) and each key's messages keep their order.

After a reconnect the producer sends again every message not yet acknowledged to it, under the
same producer name and sequence ids, so deduplication drops any the broker had already stored
(how many, if any, depends on timing). What the topic stores is read back with the official
client from an ``audit`` subscription made before the stream. Our live consumer may see a
message again after a reconnect (an ack in flight to a killed broker is lost, so Pulsar
redelivers), which is at-least-once delivery as Pulsar defines it; it must still see every
message, and each key's first deliveries in order.

The kill test runs last in the tier, so the killed broker is started again only if another test
follows (the ``cluster`` fixture does it). The stream and its checks are tests/support/keyed_stream.py's.
"""

from __future__ import annotations

import pytest

from jvm.pulsar_cluster import PulsarCluster
from tests.support.cluster_topics import partitioned_topic_on_every_broker, topic_owned_by
from tests.support.keyed_stream import COUNT, KeyedStream, StreamHistory, Tally, stored_messages, tally

pytestmark = pytest.mark.cluster


def _check(cluster: PulsarCluster, topic: str, history: StreamHistory) -> None:
    """No send failed; the live consumer saw every message, each key's first deliveries in send
    order, after reconnecting; the topic stores each once, in order per key, and nothing more."""
    counts = tally(history, stored_messages(cluster, topic))
    assert counts == Tally.exactly_once(COUNT, redelivered=counts.redelivered)
    assert history.consumer_reconnects >= 1


def test_a_topic_unloaded_mid_stream_keeps_every_message_once(
    cluster: PulsarCluster, dedup_namespace: str, topic_name: str, stream: KeyedStream
) -> None:
    owner, other = cluster.brokers
    topic = topic_owned_by(cluster, owner, dedup_namespace, topic_name)
    path = topic.replace("persistent://", "/admin/v2/persistent/")

    def unload() -> None:
        # Asked of the broker that does not own the topic: Pulsar redirects it to the owner.
        response = other.admin("PUT", f"{path}/unload")
        assert response.status_code == 204, response.text

    history = stream(topic, unload)

    _check(cluster, topic, history)
    # The producer is back on the topic under the same name.
    publishers = cluster.lookup(topic).admin("GET", f"{path}/stats").json()["publishers"]
    assert [p["producerName"] for p in publishers] == [history.producer_name]


def test_the_kill_of_the_owning_broker_mid_stream_keeps_every_message_once(
    cluster: PulsarCluster, dedup_namespace: str, topic_name: str, stream: KeyedStream
) -> None:
    topic, owners = partitioned_topic_on_every_broker(cluster, dedup_namespace, topic_name, 2)
    # Broker 0, the first host of the clients' service URL, owns partition 0; broker 1 partition 1.
    victim, survivor = owners[0], owners[1]

    history = stream(topic, victim.kill)

    _check(cluster, topic, history)
    assert not victim.running
    # The survivor took over the killed broker's partition.
    assert {cluster.lookup(f"{topic}-partition-{i}").name for i in range(2)} == {survivor.name}
