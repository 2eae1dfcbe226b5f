"""Permits: FLOW of a whole queue on subscribe, again at half the queue, one per receive at zero queue."""

from __future__ import annotations

import pulsar
import pytest

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import InitialPosition
from tests.support.consumer_checks import broker_consumer, data, nothing_more, produce, receive_all
from tests.support.polling import wait_until


def test_flow_goes_out_at_half_the_queue(broker, official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 40)
    consumer = our_client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest, receiver_queue_size=10)
    # The broker filled the queue and has no permits left.
    wait_until(lambda: broker_consumer(broker, topic_name, "sub")["msgOutCounter"] == 10)
    assert broker_consumer(broker, topic_name, "sub")["availablePermits"] == 0
    assert consumer.stats().flows_sent == 1

    receive_all(consumer, 4)
    assert consumer.stats().available_permits == 4
    assert consumer.stats().flows_sent == 1
    assert broker_consumer(broker, topic_name, "sub")["msgOutCounter"] == 10

    receive_all(consumer, 1)  # the fifth message: half the queue
    stats = consumer.stats()
    assert (stats.flows_sent, stats.permits_sent, stats.available_permits) == (2, 15, 0)
    wait_until(lambda: broker_consumer(broker, topic_name, "sub")["msgOutCounter"] == 15)
    assert data(receive_all(consumer, 35)) == [f"m{i}".encode() for i in range(5, 40)]


@pytest.mark.embedded_only
def test_a_batch_costs_its_size_in_permits(broker, official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    """Our broker dispatches a batch only when the permits cover all its messages.

    Embedded broker only: Apache Pulsar (default ``preciseDispatcherFlowControl=false``) reads as
    many entries as there are permits and so sends all three batches at once (docs/broker.md: where our
    broker differs); the consumer copes with both, as the other tests here show.
    """
    produce(official, topic_name, 30, batch=10)
    consumer = our_client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest, receiver_queue_size=10)
    wait_until(lambda: broker_consumer(broker, topic_name, "sub")["msgOutCounter"] == 10)
    assert consumer.stats().queued_entries == 1  # one entry, still packed
    receive_all(consumer, 4)
    assert broker_consumer(broker, topic_name, "sub")["msgOutCounter"] == 10
    receive_all(consumer, 1)
    wait_until(lambda: broker_consumer(broker, topic_name, "sub")["msgOutCounter"] == 20)
    assert data(receive_all(consumer, 25)) == [f"m{i}".encode() for i in range(5, 30)]


def test_zero_queue_takes_one_message_per_receive(broker, official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 5)
    consumer = our_client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest, receiver_queue_size=0)
    assert broker_consumer(broker, topic_name, "sub")["availablePermits"] == 0
    assert broker_consumer(broker, topic_name, "sub")["msgOutCounter"] == 0
    for i in range(3):
        assert consumer.receive(5000).data() == f"m{i}".encode()
        counters = broker_consumer(broker, topic_name, "sub")
        assert (counters["msgOutCounter"], counters["availablePermits"]) == (i + 1, 0)
        assert consumer.stats().queued_entries == 0
    assert consumer.receive(5000).data() == b"m3"
    assert consumer.receive(5000).data() == b"m4"
    # A receive that times out leaves its one permit standing; the next message uses it.
    assert nothing_more(consumer.receive)
    assert broker_consumer(broker, topic_name, "sub")["availablePermits"] == 1
    produce(official, topic_name, 1)
    assert consumer.receive(5000).data() == b"m0"
    assert broker_consumer(broker, topic_name, "sub")["msgOutCounter"] == 6


def test_stats_line_shows_a_stuck_consumer(broker, official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 20)
    consumer = our_client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest, receiver_queue_size=10)
    wait_until(lambda: consumer.stats().queued_entries == 10)
    receive_all(consumer, 3)
    consumer.acknowledge(consumer.receive(5000))
    stats = consumer.stats()
    line = str(stats)
    # The application holds 10 delivered messages, took only 4: permits below half, nothing flows.
    assert "permits=4/10" in line and "flows=1" in line and "received=" in line and "pending_acks=1" in line
    # Still packed or unpacked already, as the socket reads brought them: six wait.
    assert f"queued={stats.queued_entries} entries+{stats.queued_messages} msgs" in line
    assert stats.queued_entries + stats.queued_messages == 6
