"""Dead-lettering: after max_redeliver_count redeliveries a message moves to the DLQ topic."""

from __future__ import annotations

import pulsar

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import ConsumerDeadLetterPolicy, ConsumerType, InitialPosition
from tests.support.consumer_checks import backlog, nothing_more, produce
from tests.support.polling import wait_until


def test_message_goes_to_the_dead_letter_topic_after_n_redeliveries(
    broker, official: pulsar.Client, our_client: Client, topic_name: str
) -> None:
    produce(official, topic_name, 2)
    dlq = f"{topic_name}-dead"
    consumer = our_client.subscribe(
        topic_name,
        "sub",
        consumer_type=ConsumerType.Shared,
        initial_position=InitialPosition.Earliest,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=ConsumerDeadLetterPolicy(2, dlq, initial_subscription_name="dlq-sub"),
    )
    counts = []
    for _ in range(4):  # first delivery and two redeliveries of m1 (m0 is acked at once)
        message = consumer.receive(5000)
        if message.data() == b"m0":
            consumer.acknowledge(message)
            continue
        counts.append(message.redelivery_count())
        consumer.negative_acknowledge(message)
    assert counts == [0, 1, 2]
    assert nothing_more(consumer.receive, 800)  # the third nack sent it to the DLQ instead
    wait_until(lambda: backlog(broker, topic_name, "sub") == 0)
    assert consumer.stats().dead_lettered == 1

    dead = our_client.subscribe(dlq, "dlq-sub")  # created before the DLQ message was published
    message = dead.receive(5000)
    assert message.data() == b"m1"
    assert message.properties()["i"] == "1"
    assert message.properties()["REAL_TOPIC"] == f"persistent://public/default/{topic_name}"
    assert message.properties()["ORIGIN_MESSAGE_ID"]
