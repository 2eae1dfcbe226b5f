"""Behaviours where our client once differed from the official ``pulsar-client``: each scenario
runs with both clients on the same broker and ours must match what the official one does."""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import pulsar
import pytest

import airflow_pulsar.client as our_module
from airflow_pulsar.client import Client, MessageId
from tests.support.official_client import OPERATION_TIMEOUT, RECEIVE_TIMEOUT_MS, data_of, read_n


@pytest.fixture
def ours(broker: Any) -> Any:
    """Our client on the module's broker, closed after the test."""
    with Client(broker.service_url, operation_timeout_seconds=OPERATION_TIMEOUT) as client:
        yield client


def _seen(message: Any) -> tuple[Any, Any, bool]:
    return message.data(), message.value(), message.has_null_value()


@pytest.mark.parametrize("batching", [False, True])
def test_null_values_cross_both_ways(official: pulsar.Client, ours: Any, topic_name: str, batching: bool) -> None:
    """``send(None)`` sends a null value (a tombstone) from either client; both consumers see the
    same data, value and null flag for it as for an empty and a plain payload."""
    theirs_in = official.subscribe(topic_name, "official")
    ours_in = ours.subscribe(topic_name, "ours")
    sent = [None, b"", b"plain"]
    for producer in (
        official.create_producer(topic_name, batching_enabled=batching),
        ours.create_producer(topic_name, batching_enabled=batching),
    ):
        for content in sent:
            producer.send_async(content, None)
        producer.flush()
    seen_by_official = [_seen(theirs_in.receive(RECEIVE_TIMEOUT_MS)) for _ in range(2 * len(sent))]
    seen_by_ours = [_seen(ours_in.receive(RECEIVE_TIMEOUT_MS)) for _ in range(2 * len(sent))]
    assert seen_by_ours == seen_by_official
    assert [seen[2] for seen in seen_by_official] == [True, False, False] * 2


def _reader_after_seek_to_latest(client: Any, ids: Any, topic: str) -> list[Any]:
    producer = client.create_producer(topic, batching_enabled=False)
    for number in range(3):
        producer.send(b"m%d" % number)
    reader = client.create_reader(topic, ids.earliest)
    steps: list[Any] = [reader.read_next(RECEIVE_TIMEOUT_MS).data()]
    reader.seek(ids.latest)
    steps.append(reader.has_message_available())
    producer.send(b"after the seek")
    steps += [reader.has_message_available(), reader.read_next(RECEIVE_TIMEOUT_MS).data()]
    reader.close()
    return steps


def _inclusive_reader_at_latest(client: Any, ids: Any, topic: str) -> list[Any]:
    producer = client.create_producer(topic, batching_enabled=False)
    for number in range(3):
        producer.send(b"m%d" % number)
    reader = client.create_reader(topic, ids.latest, start_message_id_inclusive=True)
    steps: list[Any] = [reader.has_message_available(), reader.read_next(RECEIVE_TIMEOUT_MS).data()]
    steps.append(reader.has_message_available())
    reader.close()
    return steps


@pytest.mark.parametrize("scenario", [_reader_after_seek_to_latest, _inclusive_reader_at_latest])
def test_reader_at_latest(official: pulsar.Client, ours: Any, topic_name: str, scenario: Any) -> None:
    """A reader seeking to ``latest`` has nothing available until a new message comes; one
    created at ``latest`` with ``start_message_id_inclusive`` reads the last message."""
    expected = scenario(official, pulsar.MessageId, topic_name + "-official")
    assert scenario(ours, MessageId, topic_name + "-ours") == expected


def _rewound_past_the_limit(client: Any, api: ModuleType, topic: str) -> list[Any]:
    dlq = topic + "-DLQ"
    dead = client.subscribe(dlq, "dead")
    policy = api.ConsumerDeadLetterPolicy(max_redeliver_count=2, dead_letter_topic=dlq)
    consumer = client.subscribe(topic, "sub", consumer_type=api.ConsumerType.Shared, dead_letter_policy=policy)
    client.create_producer(topic).send(b"poison", properties={"k": "v"})
    counts: list[Any] = []
    for _ in range(5):
        try:
            counts.append(consumer.receive(2000).redelivery_count())
        except api.Timeout:
            counts.append("nothing")
            break
        consumer.redeliver_unacknowledged_messages()
    moved = dead.receive(RECEIVE_TIMEOUT_MS)
    return [counts, moved.data(), moved.properties()["k"], moved.properties()["REAL_TOPIC"].endswith(topic)]


def test_redeliver_all_moves_a_message_past_the_limit_to_the_dead_letter_topic(
    official: pulsar.Client, ours: Any, topic_name: str
) -> None:
    """A message brought back by ``redeliver_unacknowledged_messages()`` more often than
    ``max_redeliver_count`` goes to the dead-letter topic instead of to the application."""
    expected = _rewound_past_the_limit(official, pulsar, topic_name + "-official")
    assert expected[0] == [0, 1, 2, "nothing"]
    assert _rewound_past_the_limit(ours, our_module, topic_name + "-ours") == expected


def test_a_fenced_waiting_producer_gets_back_in(official: pulsar.Client, topic_name: str) -> None:
    """As in Apache Pulsar: a WaitForExclusive producer fenced by ExclusiveWithFencing queues on
    its reconnect (an Exclusive newcomer is fenced, a Shared one busy meanwhile) and, once the
    fencing producer is gone, is promoted and its messages stored."""
    modes = pulsar.ProducerAccessMode
    owner = official.create_producer(topic_name, access_mode=modes.WaitForExclusive, batching_enabled=False)
    owner.send(b"first")
    fencer = official.create_producer(topic_name, access_mode=modes.ExclusiveWithFencing)
    fencer.send(b"from the fencer")
    with pytest.raises(pulsar.ProducerFenced):
        official.create_producer(topic_name, access_mode=modes.Exclusive)
    with pytest.raises(pulsar.ProducerBusy):
        official.create_producer(topic_name)
    # A send makes the fenced producer reconnect while the fencer holds the topic, so it queues
    # (reconnecting to a free topic instead, it would meet the epoch check and stay fenced).
    results: list[pulsar.Result] = []
    owner.send_async(b"back in", lambda result, _id: results.append(result))
    time.sleep(2)
    fencer.close()
    owner.flush()
    assert results == [pulsar.Result.Ok]
    with pytest.raises(pulsar.ProducerFenced):
        official.create_producer(topic_name, access_mode=modes.Exclusive)
    reader = official.create_reader(topic_name, pulsar.MessageId.earliest)
    assert data_of(read_n(reader, 3)) == [b"first", b"from the fencer", b"back in"]


def test_a_fenced_producer_learns_it_at_its_next_send(official: pulsar.Client, topic_name: str) -> None:
    """As in Apache Pulsar: ExclusiveWithFencing drops the producers it fences without telling
    their clients, so a fenced producer does not reconnect at once (and, being ExclusiveWithFencing
    itself, fence the newer one in turn); its next send finds it fenced and is not stored."""
    modes = pulsar.ProducerAccessMode
    first = official.create_producer(topic_name, access_mode=modes.ExclusiveWithFencing, batching_enabled=False)
    first.send(b"first")
    second = official.create_producer(topic_name, access_mode=modes.ExclusiveWithFencing, batching_enabled=False)
    time.sleep(1)
    assert first.is_connected() and second.is_connected()
    with pytest.raises(pulsar.ProducerFenced):
        first.send(b"fenced")
    second.send(b"second")
    assert not first.is_connected() and second.is_connected()
    reader = official.create_reader(topic_name, pulsar.MessageId.earliest)
    assert data_of(read_n(reader, 2)) == [b"first", b"second"]
