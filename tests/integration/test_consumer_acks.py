"""Acknowledgements against the real broker: grouping, cumulative, batch indexes, receipts, nacks, timeouts."""

from __future__ import annotations

import time

import pulsar
import pytest

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import ConsumerType, InitialPosition
from airflow_pulsar.client.exceptions import CumulativeAcknowledgementNotAllowedError
from tests.support.consumer_checks import backlog, data, nothing_more, produce, receive_all
from tests.support.polling import wait_until


def test_acks_are_grouped_into_one_command(broker, official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 50)
    consumer = our_client.subscribe(
        topic_name, "sub", initial_position=InitialPosition.Earliest, consumer_type=ConsumerType.Shared,
        ack_group_time_ms=1500, ack_group_max_size=20,
    )
    started = time.monotonic()
    for message in receive_all(consumer, 50):
        consumer.acknowledge(message)
    # Two full groups went out at once; the last ten wait for the group time.
    assert (consumer.stats().acks_sent, consumer.stats().pending_acks) == (40, 10)
    wait_until(lambda: backlog(broker, topic_name, "sub") == 10, timeout=1)
    wait_until(lambda: backlog(broker, topic_name, "sub") == 0, timeout=3)
    assert time.monotonic() - started >= 1.5
    assert consumer.stats().acks_sent == 50


def test_cumulative_ack_survives_a_broker_restart(broker, official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 20, batch=4)
    consumer = our_client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest)
    messages = receive_all(consumer, 20)
    consumer.acknowledge_cumulative(messages[11])  # the end of the third batch
    wait_until(lambda: backlog(broker, topic_name, "sub") == 8)
    time.sleep(0.3)  # the cursor write is group-committed just after the ack applies
    broker.restart(crash=True)
    # The same consumer resubscribes by itself and gets what was not acknowledged, again.
    again = receive_all(consumer, 8, timeout_ms=15000)
    assert data(again) == data(messages[12:])
    assert consumer.stats().reconnects == 1
    assert nothing_more(consumer.receive)


def test_cumulative_ack_inside_a_batch_without_batch_index_acks(
    broker, official: pulsar.Client, our_client: Client, topic_name: str
) -> None:
    produce(official, topic_name, 10, batch=5)
    consumer = our_client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest)
    messages = receive_all(consumer, 10)
    consumer.acknowledge_cumulative(messages[7])  # inside the second batch: only the first is done
    consumer.close()
    wait_until(lambda: backlog(broker, topic_name, "sub") == 5)


def test_cumulative_ack_is_refused_on_shared_subscriptions(official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 1)
    for kind in (ConsumerType.Shared, ConsumerType.KeyShared):
        consumer = our_client.subscribe(topic_name, f"sub-{kind.name}", initial_position=InitialPosition.Earliest, consumer_type=kind)
        message = consumer.receive(5000)
        with pytest.raises(CumulativeAcknowledgementNotAllowedError, match=kind.name):
            consumer.acknowledge_cumulative(message)
        consumer.close()


@pytest.mark.parametrize("batch_index_ack", [True, False], ids=["batch-index-acks", "whole-batches"])
def test_partly_acknowledged_batches(
    broker, official: pulsar.Client, our_client: Client, topic_name: str, batch_index_ack: bool
) -> None:
    produce(official, topic_name, 10, batch=10)
    settings = {
        "initial_position": InitialPosition.Earliest,
        "consumer_type": ConsumerType.Shared,
        "batch_index_ack_enabled": batch_index_ack,
    }
    consumer = our_client.subscribe(topic_name, "sub", **settings)
    messages = receive_all(consumer, 10)
    for message in messages[::2]:
        consumer.acknowledge(message.message_id())  # by id works as well as by message
    consumer.close()
    # With batch-index acks the broker keeps the batch's ack_set and our consumer skips the acked
    # indexes of the redelivered batch; without them the batch stays wholly unacknowledged.
    expected = messages[1::2] if batch_index_ack else messages
    # Admin REST does not show batch-index acks (on Pulsar neither): a batch acknowledged in part counts whole.
    assert backlog(broker, topic_name, "sub") == 10
    consumer = our_client.subscribe(topic_name, "sub", **settings)
    again = receive_all(consumer, len(expected))
    assert data(again) == data(expected)
    assert [m.message_id().batch_index() for m in again] == [m.message_id().batch_index() for m in expected]
    assert nothing_more(consumer.receive)
    for message in again:
        consumer.acknowledge(message)
    wait_until(lambda: backlog(broker, topic_name, "sub") == 0)


def test_ack_receipt_returns_after_the_broker_confirmed(broker, official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 3)
    consumer = our_client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest, ack_receipt_enabled=True)
    messages = receive_all(consumer, 3)
    consumer.acknowledge(messages[0])
    assert backlog(broker, topic_name, "sub") == 2  # already applied when acknowledge returned
    consumer.acknowledge_cumulative(messages[2])
    assert backlog(broker, topic_name, "sub") == 0


def test_negative_ack_redelivers_after_the_delay(official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 3)
    consumer = our_client.subscribe(
        topic_name,
        "sub",
        initial_position=InitialPosition.Earliest,
        consumer_type=ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=400,
    )
    messages = receive_all(consumer, 3)
    consumer.acknowledge(messages[0])
    consumer.acknowledge(messages[2])
    nacked_at = time.monotonic()
    consumer.negative_acknowledge(messages[1])
    assert consumer.stats().pending_nacks == 1
    again = consumer.receive(5000)
    waited = time.monotonic() - nacked_at
    assert again.data() == b"m1" and again.redelivery_count() == 1
    assert 0.39 <= waited < 1.5
    assert consumer.stats().redeliveries == 1
    consumer.acknowledge(again)
    assert nothing_more(consumer.receive, 600)


def test_exclusive_negative_ack_rewinds_everything_unacknowledged(official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 4)
    consumer = our_client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest, negative_ack_redelivery_delay_ms=100)
    messages = receive_all(consumer, 4)
    consumer.acknowledge(messages[0])
    consumer.acknowledge(messages[3])
    consumer.negative_acknowledge(messages[1])
    # Exclusive and Failover cannot redeliver single entries: m2, never acked, comes back too.
    assert data(receive_all(consumer, 2)) == [b"m1", b"m2"]
    assert nothing_more(consumer.receive)


def test_ack_timeout_redelivers_unacknowledged_messages(official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 2)
    consumer = our_client.subscribe(
        topic_name, "sub", initial_position=InitialPosition.Earliest, consumer_type=ConsumerType.Shared, unacked_messages_timeout_ms=1000
    )
    first, second = receive_all(consumer, 2)
    received_at = time.monotonic()
    consumer.acknowledge(first)
    assert consumer.stats().unacked_tracked == 1
    again = consumer.receive(5000)
    assert again.data() == b"m1" and again.redelivery_count() == 1
    # received_at is taken after receive() returns, a little after the tracker started the clock.
    assert 0.95 <= time.monotonic() - received_at < 2.5
    assert consumer.stats().ack_timeouts == 1
    consumer.acknowledge(again)
    assert nothing_more(consumer.receive, 1500)
