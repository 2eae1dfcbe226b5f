"""Subscription types and redelivery with the official client: Exclusive, Shared, Failover, Key_Shared, nacks."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pulsar
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import BatchingType, Client
from tests.support.broker_rules import failover_active
from tests.support.official_client import OfficialFactory, assert_nothing_more, create_partitioned, data_of, receive_n, wait_backlog

pytestmark = pytest.mark.interop


@pytest.fixture
def our_client(broker: BrokerProcess) -> Iterator[Client]:
    with Client(broker.service_url) as made:
        yield made


# A Failover subscription's new active consumer gets nothing for a second (Pulsar's
# activeConsumerFailoverDelayTimeMillis): a drain after a takeover must wait longer than that.
FAILOVER_WAIT_MS = 2500


def _drain(consumer: pulsar.Consumer, ack: bool = True, idle_ms: int = 500) -> list[pulsar.Message]:
    """Receive until nothing arrives for ``idle_ms``; acknowledge each message if asked."""
    messages = []
    while True:
        try:
            message = consumer.receive(timeout_millis=idle_ms)
        except pulsar.Timeout:
            return messages
        messages.append(message)
        if ack:
            consumer.acknowledge(message)


def _poll_all(consumers: list[pulsar.Consumer], count: int, timeout: float = 15.0) -> list[list[pulsar.Message]]:
    """Receive ``count`` messages in all from several consumers, in turn; acknowledge each one."""
    got: list[list[pulsar.Message]] = [[] for _ in consumers]
    deadline = time.monotonic() + timeout
    while sum(map(len, got)) < count and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            try:
                message = consumer.receive(timeout_millis=50)
            except pulsar.Timeout:
                continue
            got[index].append(message)
            consumer.acknowledge(message)
    assert sum(map(len, got)) == count, f"received {[len(g) for g in got]} of {count}"
    return got


def test_exclusive_refuses_a_second_consumer(official_factory: OfficialFactory, topic_name: str) -> None:
    first_client, second_client = official_factory(), official_factory()
    first = first_client.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Exclusive)
    with pytest.raises(pulsar.ConsumerBusy):
        second_client.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Exclusive)
    # A different type on the same subscription is refused as well.
    with pytest.raises(pulsar.ConsumerBusy):
        second_client.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared)
    # The first consumer is unaffected, and once it is gone the subscription is free again.
    producer = first_client.create_producer(topic_name)
    producer.send(b"one")
    message = first.receive(timeout_millis=5000)
    assert message.data() == b"one"
    first.acknowledge(message)
    first.close()
    again = second_client.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Exclusive)
    producer.send(b"two")
    assert again.receive(timeout_millis=5000).data() == b"two"


@pytest.mark.parametrize("batching", [False, True], ids=["batching-off", "batching-on"])
def test_shared_consumers_split_the_messages(official_factory: OfficialFactory, topic_name: str, batching: bool) -> None:
    client = official_factory()
    consumers = [
        client.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10)
        for _ in range(2)
    ]
    producer = client.create_producer(topic_name, batching_enabled=batching, batching_max_messages=5)
    sent = [f"m{i}".encode() for i in range(100)]
    for payload in sent:
        producer.send_async(payload, None)
    producer.flush()

    got = _poll_all(consumers, len(sent))
    assert all(got), f"one consumer got nothing: {[len(g) for g in got]}"
    union = data_of(got[0] + got[1])
    assert len(set(union)) == len(sent)
    assert set(union) == set(sent)
    for consumer in consumers:
        assert_nothing_more(consumer.receive)


def test_failover_active_consumer_then_takeover(
    broker: BrokerProcess, official_factory: OfficialFactory, topic_name: str
) -> None:
    client_a, client_b = official_factory(), official_factory()
    # Which of two equal consumers is active on a non-partitioned topic follows Pulsar's hash ring.
    active_name = failover_active(topic_name, ["a-consumer", "b-consumer"])
    standby_name = "b-consumer" if active_name == "a-consumer" else "a-consumer"
    active = client_a.subscribe(
        topic_name, "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name=active_name
    )
    standby = client_b.subscribe(
        topic_name, "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name=standby_name
    )
    producer = client_a.create_producer(topic_name)
    for i in range(10):
        producer.send(f"m{i}".encode())

    first = receive_n(active, 10)
    assert data_of(first) == [f"m{i}".encode() for i in range(10)]
    assert_nothing_more(standby.receive)
    # Acknowledge only the first four, then the active consumer goes away.
    for message in first[:4]:
        active.acknowledge(message)
    wait_backlog(broker, topic_name, "sub", 6)
    active.close()

    for i in range(10, 13):
        producer.send(f"m{i}".encode())
    taken_over = _drain(standby, idle_ms=FAILOVER_WAIT_MS)
    assert data_of(taken_over) == [f"m{i}".encode() for i in range(4, 13)]
    stats = broker.topic_stats(topic_name)["subscriptions"]["sub"]
    assert stats["type"] == "Failover"
    assert [c["consumerName"] for c in stats["consumers"]] == [standby_name]


def test_failover_consumer_joining_with_a_higher_rank_takes_over(
    official_factory: OfficialFactory, topic_name: str
) -> None:
    client_a, client_b = official_factory(), official_factory()
    late = client_a.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name="z")
    producer = client_a.create_producer(topic_name)
    producer.send(b"before")
    assert late.receive(timeout_millis=5000).data() == b"before"
    # A joiner that Pulsar's hash ring ranks above "z" for this topic becomes the active consumer;
    # "z" keeps what it already holds. Many candidates, since one of z's points may lie just past the
    # topic's hash and leave few names a point in between.
    joiner = next(
        name for name in (f"joiner-{i}" for i in itertools.count()) if failover_active(topic_name, ["z", name]) == name
    )
    early = client_b.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name=joiner)
    time.sleep(0.3)
    for i in range(5):
        producer.send(f"after{i}".encode())
    # The unacknowledged message the old active consumer held moves over first.
    assert data_of(_drain(early, idle_ms=FAILOVER_WAIT_MS)) == [b"before"] + [f"after{i}".encode() for i in range(5)]


@pytest.mark.parametrize(
    ("producer_client", "batching"),
    [
        ("official", {"batching_enabled": False}),
        ("official", {"batching_enabled": True, "batching_type": pulsar.BatchingType.KeyBased}),
        ("ours", {"batching_enabled": True, "batching_type": BatchingType.KeyBased}),
    ],
    ids=["batching-off", "key-based-batching", "our-key-based-batching"],
)
def test_key_shared_keeps_each_key_on_one_consumer(
    our_client: Client, official_factory: OfficialFactory, topic_name: str, producer_client: str, batching: dict[str, object]
) -> None:
    client = official_factory()
    consumers = [
        client.subscribe(
            topic_name,
            "sub",
            consumer_type=pulsar.ConsumerType.KeyShared,
            consumer_name=f"c{i}",
            receiver_queue_size=50,
        )
        for i in range(2)
    ]
    producer_of = client if producer_client == "official" else our_client
    producer = producer_of.create_producer(topic_name, batching_max_publish_delay_ms=20, **batching)
    keys = [f"key-{i}" for i in range(20)]
    sent = [(keys[i % len(keys)], i) for i in range(200)]
    for key, index in sent:
        producer.send_async(str(index).encode(), None, partition_key=key)
    producer.flush()

    owners: dict[str, set[int]] = defaultdict(set)
    order: dict[str, list[int]] = defaultdict(list)
    for index, messages in enumerate(_poll_all(consumers, len(sent))):
        for message in messages:
            owners[message.partition_key()].add(index)
            order[message.partition_key()].append(int(message.data()))
    assert all(len(o) == 1 for o in owners.values()), dict(owners)
    assert {next(iter(o)) for o in owners.values()} == {0, 1}, "the keys were not spread over both consumers"
    # Per key, messages arrive in publish order (one consumer per key, so its order is the key's).
    for key, indexes in order.items():
        assert indexes == [i for k, i in sent if k == key]
    for consumer in consumers:
        assert_nothing_more(consumer.receive)


def test_key_shared_keeps_key_order_when_a_consumer_joins(official_factory: OfficialFactory, topic_name: str) -> None:
    client_a, client_b = official_factory(), official_factory()
    first = client_a.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name="a")
    producer = client_a.create_producer(topic_name)
    keys = [f"key-{i}" for i in range(10)]
    for i in range(100):
        producer.send_async(str(i).encode(), None, partition_key=keys[i % 10])
    producer.flush()
    held = receive_n(first, 100)  # all of them, none acknowledged yet

    # A second consumer takes over some keys. Until the first one acknowledged what it holds of
    # a key, newer messages of that key must wait, or they would overtake the older ones.
    joined = client_b.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name="b")
    for i in range(100, 200):
        producer.send_async(str(i).encode(), None, partition_key=keys[i % 10])
    producer.flush()
    assert_nothing_more(joined.receive, 500)

    received: dict[str, list[int]] = defaultdict(list)
    owners: dict[str, set[str]] = defaultdict(set)
    for message in held:
        received[message.partition_key()].append(int(message.data()))
        first.acknowledge(message)
    for name, consumer in (("a", first), ("b", joined)):
        for message in _drain(consumer):
            received[message.partition_key()].append(int(message.data()))
            if int(message.data()) >= 100:
                owners[message.partition_key()].add(name)
    # Per key: the first hundred (from "a"), then the rest from whichever consumer owns it now.
    for key, indexes in received.items():
        assert indexes == [i for i in range(200) if keys[i % 10] == key]
    assert {o for names in owners.values() for o in names} == {"a", "b"}
    assert all(len(names) == 1 for names in owners.values())


@pytest.mark.parametrize("batching", [False, True], ids=["batching-off", "batching-on"])
def test_negative_ack_redelivers_with_count(official: pulsar.Client, topic_name: str, batching: bool) -> None:
    consumer = official.subscribe(
        topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=200
    )
    producer = official.create_producer(topic_name, batching_enabled=batching)
    for i in range(4):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()

    first = receive_n(consumer, 4)
    assert [m.redelivery_count() for m in first] == [0] * 4
    for message in first:
        consumer.negative_acknowledge(message)
    started = time.monotonic()
    again = receive_n(consumer, 4)
    assert time.monotonic() - started >= 0.1  # not before the nack delay
    assert sorted(data_of(again)) == sorted(data_of(first))
    assert [m.redelivery_count() for m in again] == [1] * 4
    # A second round counts up again. Within a batch a nack takes back the whole entry (batch index
    # acks are off), so only without batching can part of the messages be acknowledged meanwhile.
    retry = again[:1] if not batching else again
    for message in again:
        if message in retry:
            consumer.negative_acknowledge(message)
        else:
            consumer.acknowledge(message)
    third = receive_n(consumer, len(retry))
    assert sorted(data_of(third)) == sorted(data_of(retry))
    assert [m.redelivery_count() for m in third] == [2] * len(retry)
    for message in third:
        consumer.acknowledge(message)
    assert_nothing_more(consumer.receive, 600)


@pytest.mark.parametrize(
    "sub_type", [pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Failover], ids=["exclusive", "failover"]
)
def test_negative_ack_on_a_single_active_subscription_rewinds(
    official: pulsar.Client, topic_name: str, sub_type: pulsar.ConsumerType
) -> None:
    consumer = official.subscribe(topic_name, "sub", consumer_type=sub_type, negative_ack_redelivery_delay_ms=200)
    producer = official.create_producer(topic_name)
    for i in range(5):
        producer.send(f"m{i}".encode())
    messages = receive_n(consumer, 5)
    consumer.acknowledge(messages[0])
    consumer.acknowledge(messages[1])
    consumer.negative_acknowledge(messages[2])
    # These clients ask for every unacknowledged message again, not just the nacked one; as in
    # Pulsar, the redelivery count is not tracked for single-active subscriptions.
    again = receive_n(consumer, 3)
    assert data_of(again) == [b"m2", b"m3", b"m4"]
    assert [m.redelivery_count() for m in again] == [0, 0, 0]
    for message in again:
        consumer.acknowledge(message)
    assert_nothing_more(consumer.receive)


def test_shared_consumer_closing_hands_its_unacked_messages_over(
    official_factory: OfficialFactory, topic_name: str
) -> None:
    client_a, client_b = official_factory(), official_factory()
    leaving = client_a.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client_a.create_producer(topic_name)
    for i in range(6):
        producer.send(f"m{i}".encode())
    held = receive_n(leaving, 6)
    leaving.acknowledge(held[0])
    staying = client_b.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared)
    leaving.close()
    assert sorted(data_of(_drain(staying))) == [f"m{i}".encode() for i in range(1, 6)]


def test_zero_receiver_queue_consumer(official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(topic_name, "sub", receiver_queue_size=0)
    producer = official.create_producer(topic_name)
    for i in range(5):
        producer.send(f"m{i}".encode())
    # A zero-queue consumer only has receive() without a timeout (each call sends FLOW(1)); run it
    # in a thread, and close the consumer to free the thread if a message never comes.
    received: list[bytes] = []

    def consume() -> None:
        for _ in range(5):
            message = consumer.receive()
            received.append(message.data())
            consumer.acknowledge(message)

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():
        consumer.close()
    assert received == [f"m{i}".encode() for i in range(5)]


def test_dead_letter_topic_after_max_redeliveries(official: pulsar.Client, topic_name: str) -> None:
    dlq_topic = f"{topic_name}-dlq"
    dlq = official.subscribe(dlq_topic, "dlq-sub", initial_position=pulsar.InitialPosition.Earliest)
    consumer = official.subscribe(
        topic_name,
        "sub",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=1, dead_letter_topic=dlq_topic),
    )
    producer = official.create_producer(topic_name)
    producer.send(b"poison", properties={"p": "1"})
    producer.send(b"fine")
    seen = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            message = consumer.receive(timeout_millis=500)
        except pulsar.Timeout:
            break
        seen.append((message.data(), message.redelivery_count()))
        if message.data() == b"poison":
            consumer.negative_acknowledge(message)
        else:
            consumer.acknowledge(message)
    assert (b"poison", 0) in seen and (b"poison", 1) in seen and (b"fine", 0) in seen
    dead = dlq.receive(timeout_millis=5000)
    assert dead.data() == b"poison"
    assert dead.properties()["p"] == "1"


def test_failover_on_a_partitioned_topic_spreads_partitions(
    broker: BrokerProcess, official_factory: OfficialFactory, topic_name: str
) -> None:
    create_partitioned(broker, topic_name, 4)
    client_a, client_b = official_factory(), official_factory()
    consumers = [
        c.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Failover, consumer_name=name)
        for c, name in ((client_a, "a"), (client_b, "b"))
    ]
    producer = client_a.create_producer(
        topic_name, message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution
    )
    for i in range(40):
        producer.send(f"m{i}".encode())
    partitions = [{m.message_id().partition() for m in got} for got in _poll_all(consumers, 40)]
    # Each partition has one active consumer, and both consumers are active for some partitions.
    assert partitions[0] and partitions[1] and not partitions[0] & partitions[1]
    assert partitions[0] | partitions[1] == {0, 1, 2, 3}


def test_pattern_subscription_sees_matching_topics(official: pulsar.Client, topic_name: str) -> None:
    producers = [official.create_producer(f"{topic_name}-{suffix}") for suffix in ("a", "b", "other")]
    consumer = official.subscribe(
        re.compile(f"persistent://public/default/{re.escape(topic_name)}-[ab]$"),
        "sub",
        initial_position=pulsar.InitialPosition.Earliest,
    )
    for producer in producers:
        producer.send(producer.topic().rsplit("-", 1)[1].encode())
    assert sorted(data_of(receive_n(consumer, 2))) == [b"a", b"b"]
    assert_nothing_more(consumer.receive)
