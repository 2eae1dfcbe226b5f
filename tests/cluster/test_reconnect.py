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
follows (the ``cluster`` fixture does it).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pulsar
import pytest

from airflow_pulsar.client import Client, InitialPosition, Result, Timeout
from jvm.pulsar_cluster import PulsarCluster
from tests.support.cluster_topics import (
    assert_each_once_in_key_order,
    create_namespace,
    official_client,
    partitioned_topic_on_every_broker,
    read_subscription,
    topic_owned_by,
)

pytestmark = pytest.mark.cluster

COUNT = 6_000
KEYS = 12
# Sends per second: slow enough that the stream spans the disruption and the reconnect after it.
RATE = 2_000
DEADLINE = 90


@pytest.fixture(scope="module")
def dedup_namespace(pulsar_cluster: PulsarCluster) -> str:
    """A namespace of this module's own, with broker deduplication on."""
    return create_namespace(pulsar_cluster, "reconnect", deduplication=True)


@dataclass
class StreamResult:
    """What the producer was told and what the live consumer saw."""

    failures: list[Result] = field(default_factory=list)
    deliveries: list[str] = field(default_factory=list)
    consumer_reconnects: int = 0
    producer_name: str = ""


@pytest.fixture
def stream(cluster: PulsarCluster) -> Iterator[Callable[[str, Callable[[], None]], StreamResult]]:
    """Run one keyed stream through ``topic`` with our client, calling ``disrupt()`` once a third of it
    was acknowledged; returns when every message was acknowledged to the producer and seen by the consumer."""
    clients: list[Client] = []

    def run(topic: str, disrupt: Callable[[], None]) -> StreamResult:
        result = StreamResult()
        client = Client(cluster.service_url, operation_timeout_seconds=DEADLINE)
        clients.append(client)
        client.subscribe(topic, "audit", initial_position=InitialPosition.Earliest).close()
        consumer = client.subscribe(topic, "live", initial_position=InitialPosition.Earliest)
        # Sends wait out the outage (a killed broker's session, then recovery) rather than time out on a busy machine.
        producer = client.create_producer(topic, block_if_queue_full=True, send_timeout_millis=DEADLINE * 1000)
        result.producer_name = producer.producer_name()
        acked = 0
        lock = threading.Lock()
        third = threading.Event()

        def sent(outcome: Result, message_id: object) -> None:
            nonlocal acked
            if outcome is not Result.Ok:
                result.failures.append(outcome)
            with lock:
                acked += 1
                if acked == COUNT // 3:
                    third.set()

        def consume() -> None:
            seen: set[str] = set()
            deadline = time.monotonic() + DEADLINE
            while len(seen) < COUNT and time.monotonic() < deadline:
                try:
                    message = consumer.receive(1_000)
                except Timeout:
                    continue
                value = message.data().decode()
                result.deliveries.append(value)
                seen.add(value)
                consumer.acknowledge(message)

        consuming = threading.Thread(target=consume, daemon=True)
        consuming.start()
        started = time.monotonic()
        disrupted = False
        for i in range(COUNT):
            key = f"key-{i % KEYS}"
            producer.send_async(f"{key}:{i}".encode(), sent, partition_key=key)
            if not disrupted and third.is_set():
                disrupt()
                disrupted = True
            time.sleep(max(0.0, started + i / RATE - time.monotonic()))
        producer.flush()
        consuming.join(DEADLINE)
        assert disrupted, "the stream ended before a third of it was acknowledged"
        assert producer.producer_name() == result.producer_name  # deduplication is keyed by it
        result.consumer_reconnects = consumer.stats().reconnects
        return result

    yield run
    for client in clients:
        client.close()


def _check(cluster: PulsarCluster, topic: str, result: StreamResult) -> None:
    """No send failed; the live consumer saw every message; the topic stores each once, in order per key."""
    assert result.failures == [], f"{len(result.failures)} sends failed: {set(result.failures)}"
    # The live consumer saw everything; each key's first deliveries kept the send order.
    first: dict[str, list[int]] = defaultdict(list)
    seen: set[str] = set()
    for value in result.deliveries:
        if value not in seen:
            seen.add(value)
            key, index = value.split(":")
            first[key].append(int(index))
    assert len(seen) == COUNT, f"the live consumer saw {len(seen)} of {COUNT} messages"
    assert all(indexes == sorted(indexes) for indexes in first.values())
    assert result.consumer_reconnects >= 1
    # The topic stores each message once, in order per key: read with the official client.
    stored = read_subscription(cluster.service_url, topic, "audit", COUNT)
    assert_each_once_in_key_order(stored, COUNT)
    oracle = official_client(cluster.service_url)
    try:
        audit = oracle.subscribe(topic, "audit")
        with pytest.raises(pulsar.Timeout):
            audit.receive(timeout_millis=1_000)  # and nothing more
    finally:
        oracle.close()


def test_a_topic_unloaded_mid_stream_keeps_every_message_once(
    cluster: PulsarCluster, dedup_namespace: str, topic_name: str, stream
) -> None:
    owner, other = cluster.brokers
    topic = topic_owned_by(cluster, owner, dedup_namespace, topic_name)
    path = topic.replace("persistent://", "/admin/v2/persistent/")

    def unload() -> None:
        # Asked of the broker that does not own the topic: Pulsar redirects it to the owner.
        response = other.admin("PUT", f"{path}/unload")
        assert response.status_code == 204, response.text

    result = stream(topic, unload)

    _check(cluster, topic, result)
    # The producer is back on the topic under the same name.
    publishers = cluster.lookup(topic).admin("GET", f"{path}/stats").json()["publishers"]
    assert [p["producerName"] for p in publishers] == [result.producer_name]


def test_the_kill_of_the_owning_broker_mid_stream_keeps_every_message_once(
    cluster: PulsarCluster, dedup_namespace: str, topic_name: str, stream
) -> None:
    topic, owners = partitioned_topic_on_every_broker(cluster, dedup_namespace, topic_name, 2)
    # Broker 0, the first host of the clients' service URL, owns partition 0; broker 1 partition 1.
    victim, survivor = owners[0], owners[1]

    result = stream(topic, victim.kill)

    _check(cluster, topic, result)
    assert not victim.running
    # The survivor took over the killed broker's partition.
    assert {cluster.lookup(f"{topic}-partition-{i}").name for i in range(2)} == {survivor.name}
