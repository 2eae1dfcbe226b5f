"""Subscription types, partitioned and multi-topic consumers, seek, batch_receive and listeners."""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict

import pulsar

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import ConsumerBatchReceivePolicy, ConsumerType, InitialPosition
from tests.support.broker_rules import failover_active
from tests.support.consumer_checks import data, nothing_more, produce, receive_all
from tests.support.polling import wait_until

EARLIEST = {"initial_position": InitialPosition.Earliest}


def test_failover_switches_to_the_standby_consumer(official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 6)
    active_name = failover_active(topic_name, ["a", "b"])
    standby_name = "b" if active_name == "a" else "a"
    first = our_client.subscribe(topic_name, "sub", consumer_type=ConsumerType.Failover, consumer_name=active_name, **EARLIEST)
    standby = our_client.subscribe(topic_name, "sub", consumer_type=ConsumerType.Failover, consumer_name=standby_name, **EARLIEST)
    wait_until(lambda: first.stats().is_active is True and standby.stats().is_active is False)
    got = receive_all(first, 3)
    first.acknowledge_cumulative(got[-1])
    assert nothing_more(standby.receive)
    first.close()  # flushes the ack; the standby becomes active and gets the rest
    wait_until(lambda: standby.stats().is_active is True)
    assert data(receive_all(standby, 3)) == [b"m3", b"m4", b"m5"]


def test_key_shared_keeps_each_key_on_one_consumer(official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    consumers = [
        our_client.subscribe(topic_name, "sub", consumer_type=ConsumerType.KeyShared, consumer_name=f"c{i}", **EARLIEST) for i in range(2)
    ]
    produce(official, topic_name, 60, key=lambda i: f"key-{i % 12}")
    seen: dict[str, set[int]] = defaultdict(set)
    order: dict[str, list[int]] = defaultdict(list)
    received = 0
    deadline = time.monotonic() + 10
    while received < 60 and time.monotonic() < deadline:
        for index, consumer in enumerate(consumers):
            for message in consumer.batch_receive():
                seen[message.partition_key()].add(index)
                order[message.partition_key()].append(int(message.properties()["i"]))
                consumer.acknowledge(message)
                received += 1
    assert received == 60
    assert all(len(owners) == 1 for owners in seen.values())  # sticky
    assert {owner for owners in seen.values() for owner in owners} == {0, 1}  # and spread
    assert all(values == sorted(values) for values in order.values())  # in order per key


def test_partitioned_topic_merges_its_partitions(broker, official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    broker.admin("PUT", f"/admin/v2/persistent/public/default/{topic_name}/partitions", json=3).raise_for_status()
    produce(official, topic_name, 30, key=lambda i: f"k{i}")
    consumer = our_client.subscribe(topic_name, "sub", receiver_queue_size=4, **EARLIEST)
    messages = receive_all(consumer, 30)
    assert sorted(data(messages)) == sorted(f"m{i}".encode() for i in range(30))
    assert {m.message_id().partition() for m in messages} == {0, 1, 2}
    assert {m.topic_name() for m in messages} == {f"persistent://public/default/{topic_name}-partition-{i}" for i in range(3)}
    for message in messages:
        consumer.acknowledge(message.message_id())  # the id carries its partition's topic
    last = consumer.get_last_message_ids()
    assert len(last) == 3 and all(position[0].entry_id() >= 0 for position in last.values())
    consumer.close()
    stats_path = f"/admin/v2/persistent/public/default/{topic_name}/partitioned-stats"
    wait_until(lambda: broker.admin("GET", stats_path).json()["subscriptions"]["sub"]["msgBacklog"] == 0)


def test_list_and_pattern_subscriptions(official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    names = [f"{topic_name}-x{i}" for i in range(3)]
    for name in names:
        produce(official, name, 2)
    by_list = our_client.subscribe(names[:2], "sub-list", **EARLIEST)
    assert sorted(data(receive_all(by_list, 4))) == [b"m0", b"m0", b"m1", b"m1"]
    pattern = re.compile(f"persistent://public/default/{re.escape(topic_name)}-x.*")
    by_pattern = our_client.subscribe(pattern, "sub-pattern", **EARLIEST)
    assert {m.topic_name().rsplit("-", 1)[1] for m in receive_all(by_pattern, 6)} == {"x0", "x1", "x2"}
    assert nothing_more(by_pattern.receive)


def test_seek_by_message_id_and_by_time(official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 5)
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(official, topic_name, 5)
    consumer = our_client.subscribe(topic_name, "sub", **EARLIEST)
    messages = receive_all(consumer, 10)
    for message in messages:
        consumer.acknowledge(message)
    consumer.seek(messages[2].message_id())
    assert consumer.receive(5000).message_id() == messages[3].message_id()  # exclusive, as the official client
    consumer.seek(middle)
    assert consumer.receive(5000).data() == b"m0" and consumer.receive(5000).message_id() == messages[6].message_id()
    assert consumer.get_last_message_id() == messages[-1].message_id()


def test_batch_receive_returns_a_list_within_the_policy(official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 25, batch=5)
    policy = ConsumerBatchReceivePolicy(10, -1, 200)
    consumer = our_client.subscribe(topic_name, "sub", batch_receive_policy=policy, **EARLIEST)
    batches = [consumer.batch_receive() for _ in range(3)]
    assert [len(b) for b in batches] == [10, 10, 5]
    assert data([m for b in batches for m in b]) == [f"m{i}".encode() for i in range(25)]
    started = time.monotonic()
    assert consumer.batch_receive() == []
    assert time.monotonic() - started >= 0.2


def test_message_listener_gets_every_message(official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    got: list[bytes] = []
    done = threading.Event()

    def listener(consumer, message) -> None:
        got.append(message.data())
        consumer.acknowledge(message)
        if len(got) == 10:
            done.set()

    consumer = our_client.subscribe(topic_name, "sub", message_listener=listener, **EARLIEST)
    produce(official, topic_name, 10, batch=5)
    assert done.wait(5)
    assert got == [f"m{i}".encode() for i in range(10)]
    consumer.close()
