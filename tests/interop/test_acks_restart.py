"""Durability with the official client: acks and sends survive a broker restart, clean or kill -9.

Embedded broker only: this tests our broker's storage (SQLite WAL, group commit, cursor saves)
across restarts. Apache Pulsar's durability is BookKeeper's, not ours to test, and each restart
of its JVM would cost the suite 10 to 25 s; our client's reconnects across a real Pulsar broker
kill are tested in the cluster tier."""

from __future__ import annotations

import pulsar
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from tests.support.official_client import OfficialFactory, assert_nothing_more, data_of, produce, read_n, receive_n, wait_backlog

pytestmark = [pytest.mark.interop, pytest.mark.embedded_only]

RESTARTS = [pytest.param(False, id="sigterm"), pytest.param(True, id="kill-9")]


def _restart(broker: BrokerProcess, client: pulsar.Client, crash: bool) -> None:
    """Stop the broker cleanly, or kill -9 it once the acks it has applied are on disk; start it again."""
    if crash:
        # The admin stats show an ack once applied, and its cursor write is queued then; the storage
        # commits writes in order, so the receipt of a later send means that write is on disk.
        client.create_producer("commit-barrier").send(b"barrier")
        broker.kill()
    else:
        assert broker.stop() == 0, "the broker did not shut down cleanly on SIGTERM"
    broker.start()


@pytest.mark.parametrize("crash", RESTARTS)
def test_individual_acks_survive_restart(
    broker: BrokerProcess, official_factory: OfficialFactory, topic_name: str, crash: bool
) -> None:
    client = official_factory()
    consumer = client.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared)
    produce(client, topic_name, 10)
    messages = receive_n(consumer, 10)
    for message in messages[::2]:
        consumer.acknowledge(message)
    wait_backlog(broker, topic_name, "sub", 5)
    client.close()

    _restart(broker, official_factory(), crash)
    assert broker.topic_stats(topic_name)["subscriptions"]["sub"]["msgBacklog"] == 5
    consumer = official_factory().subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Shared)
    again = receive_n(consumer, 5)
    assert data_of(again) == data_of(messages[1::2])
    assert_nothing_more(consumer.receive)


@pytest.mark.parametrize("batching", [False, True], ids=["batching-off", "batching-on"])
@pytest.mark.parametrize("crash", RESTARTS)
def test_cumulative_ack_survives_restart(
    broker: BrokerProcess, official_factory: OfficialFactory, topic_name: str, crash: bool, batching: bool
) -> None:
    client = official_factory()
    consumer = client.subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Exclusive)
    produce(client, topic_name, 20, batching=batching)
    messages = receive_n(consumer, 20)
    # Up to m9: with batches of five that is the end of the second batch, a whole entry.
    consumer.acknowledge_cumulative(messages[9])
    wait_backlog(broker, topic_name, "sub", 10)
    client.close()

    _restart(broker, official_factory(), crash)
    consumer = official_factory().subscribe(topic_name, "sub", consumer_type=pulsar.ConsumerType.Exclusive)
    again = receive_n(consumer, 10)
    assert data_of(again) == data_of(messages[10:])
    assert_nothing_more(consumer.receive)


@pytest.mark.parametrize("crash", RESTARTS)
def test_cumulative_ack_inside_a_batch_survives_restart(
    broker: BrokerProcess, official_factory: OfficialFactory, topic_name: str, crash: bool
) -> None:
    client = official_factory()
    consumer = client.subscribe(topic_name, "sub")
    produce(client, topic_name, 10, batching=True)
    messages = receive_n(consumer, 10)
    assert messages[7].message_id().batch_index() == 2
    # Halfway through the second batch, the client acknowledges only up to the entry before it.
    consumer.acknowledge_cumulative(messages[7])
    wait_backlog(broker, topic_name, "sub", 5)
    client.close()

    _restart(broker, official_factory(), crash)
    consumer = official_factory().subscribe(topic_name, "sub")
    assert data_of(receive_n(consumer, 5)) == data_of(messages[5:])
    assert_nothing_more(consumer.receive)


@pytest.mark.parametrize("batching", [False, True], ids=["batching-off", "batching-on"])
def test_acknowledged_sends_survive_kill_9(
    broker: BrokerProcess, official_factory: OfficialFactory, topic_name: str, batching: bool
) -> None:
    client = official_factory()
    producer = client.create_producer(topic_name, batching_enabled=batching, batching_max_messages=50)
    acked: list[tuple[bytes, pulsar.MessageId]] = []
    for i in range(300):
        payload = f"m{i}".encode()
        producer.send_async(payload, lambda result, msg_id, p=payload: acked.append((p, msg_id)))
    producer.flush()
    assert len(acked) == 300
    # No grace period here: a send receipt means the entry is already committed.
    broker.kill()
    broker.start()

    reader = official_factory().create_reader(topic_name, pulsar.MessageId.earliest)
    read = read_n(reader, 300)
    assert data_of(read) == [p for p, _ in acked]
    assert [str(m.message_id()) for m in read] == [str(i) for _, i in acked]
    assert_nothing_more(reader.read_next)


def test_open_clients_reconnect_after_kill_9(broker: BrokerProcess, official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(topic_name, "sub")
    producer = official.create_producer(topic_name)
    producer.send(b"before")
    message = consumer.receive(timeout_millis=5000)
    consumer.acknowledge(message)
    wait_backlog(broker, topic_name, "sub", 0)
    producer.send(b"unacked")
    assert consumer.receive(timeout_millis=5000).data() == b"unacked"

    _restart(broker, official, crash=True)
    # Both reconnect on their own; the unacknowledged message comes again, then the new one.
    producer.send(b"after")
    received = data_of(receive_n(consumer, 2, timeout_ms=10_000))
    assert received == [b"unacked", b"after"]
