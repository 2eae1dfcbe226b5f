"""Pulsar's ``maxUnackedMessagesPerConsumer`` at its default, 50,000, on both brokers: a consumer of a
Shared subscription that acknowledges nothing is sent 50,000 messages, then nothing until its
acknowledgements bring its unacknowledged messages down to half; the consumer of an Exclusive
subscription is not held to it. The client's settings are the same on both brokers (a receiver
queue of 1,000), so what the consumer gets is the brokers' doing. The subscription's own limit,
``maxUnackedMessagesPerSubscription``, is checked on the embedded broker.
"""

from __future__ import annotations

from typing import Any

import pulsar

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import ConsumerType, InitialPosition
from tests.support.consumer_checks import broker_consumer, nothing_more, produce
from tests.support.polling import wait_until

LIMIT = 50_000
MESSAGES = LIMIT + 10_000
QUEUE = 1000


def _receive_until_quiet(consumer: Any) -> list[Any]:
    received = []
    while not nothing_more(lambda timeout: received.append(consumer.receive(timeout)), timeout_ms=2000):
        pass
    return received


def test_a_shared_consumer_stops_at_the_unacked_limit_until_it_acknowledges_half(
    broker: Any, official: pulsar.Client, our_client: Client, topic_name: str
) -> None:
    produce(official, topic_name, MESSAGES, batch=100)
    consumer = our_client.subscribe(
        topic_name, "sub", consumer_type=ConsumerType.Shared, initial_position=InitialPosition.Earliest,
        receiver_queue_size=QUEUE,
    )  # fmt: skip
    held = _receive_until_quiet(consumer)
    # Pulsar checks the limit after each read batch it sends, so it may go past by one.
    assert LIMIT <= len(held) <= LIMIT + QUEUE, len(held)
    stats = wait_until(lambda: (s := broker_consumer(broker, topic_name, "sub"))["unackedMessages"] >= LIMIT and s)
    assert stats["blockedConsumerOnUnackedMsgs"] is True
    # Acknowledged down to one short of half: still blocked; down to half: the rest comes.
    for message in held[: len(held) - LIMIT // 2 - 1]:
        consumer.acknowledge(message)
    assert nothing_more(consumer.receive, timeout_ms=2000)
    consumer.acknowledge(held[len(held) - LIMIT // 2 - 1])
    rest = _receive_until_quiet(consumer)
    assert len(held) + len(rest) == MESSAGES
    assert {m.data() for m in held + rest} == {f"m{i}".encode() for i in range(MESSAGES)}


def test_an_exclusive_consumer_is_not_held_to_the_unacked_limit(
    official: pulsar.Client, our_client: Client, topic_name: str
) -> None:
    produce(official, topic_name, MESSAGES, batch=100)
    consumer = our_client.subscribe(
        topic_name, "sub", consumer_type=ConsumerType.Exclusive, initial_position=InitialPosition.Earliest,
        receiver_queue_size=QUEUE,
    )  # fmt: skip
    assert len(_receive_until_quiet(consumer)) == MESSAGES


def test_a_subscription_stops_at_its_own_limit_below_half(broker_factory: Any, topic_name: str) -> None:
    """``maxUnackedMessagesPerSubscription`` holds all the consumers of a Shared subscription
    together, and lets them go on once their acknowledgements bring it *below* half (Pulsar's
    dispatcher rule; a consumer's own limit resumes at half). Embedded broker only: the limits
    are set small at its start, which the session's Apache Pulsar cannot be."""
    embedded = broker_factory("--max-unacked-messages-per-subscription", "100", "--max-unacked-messages-per-consumer", "0")
    official = pulsar.Client(embedded.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    produce(official, topic_name, 300)
    official.close()
    with Client(embedded.service_url) as client:
        consumers = [
            client.subscribe(topic_name, "sub", consumer_type=ConsumerType.Shared,
                             initial_position=InitialPosition.Earliest, receiver_queue_size=QUEUE)
            for _ in range(2)
        ]  # fmt: skip
        held = [_receive_until_quiet(consumer) for consumer in consumers]
        assert sum(map(len, held)) == 100, [len(h) for h in held]
        assert embedded.topic_stats(topic_name)["subscriptions"]["sub"]["blockedSubscriptionOnUnackedMsgs"] is True
        pairs = [(consumer, message) for consumer, messages in zip(consumers, held, strict=True) for message in messages]
        for consumer, message in pairs[:50]:  # 50 left: not below half
            consumer.acknowledge(message)
        assert all(nothing_more(consumer.receive, timeout_ms=1000) for consumer in consumers)
        consumer, message = pairs[50]
        consumer.acknowledge(message)  # 49 left
        assert sum(len(_receive_until_quiet(consumer)) for consumer in consumers) > 0
