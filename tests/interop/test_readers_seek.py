"""Readers, seek and the last message id with the official client."""

from __future__ import annotations

import time

import pulsar
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from tests.support.official_client import assert_nothing_more, data_of, id_key, produce, read_n, receive_n

pytestmark = pytest.mark.interop

BATCHING = [pytest.param(False, id="batching-off"), pytest.param(True, id="batching-on")]


def _expected(indexes: range | list[int]) -> list[bytes]:
    return [f"m{i}".encode() for i in indexes]


@pytest.mark.parametrize("batching", BATCHING)
def test_reader_from_earliest_and_has_message_available(
    official: pulsar.Client, topic_name: str, batching: bool
) -> None:
    empty = official.create_reader(topic_name, pulsar.MessageId.earliest)
    assert not empty.has_message_available()
    empty.close()

    ids = produce(official, topic_name, 12, batching)
    reader = official.create_reader(topic_name, pulsar.MessageId.earliest)
    read = []
    while reader.has_message_available():
        read.append(reader.read_next(timeout_millis=5000))
    assert data_of(read) == _expected(range(12))
    assert [id_key(m.message_id()) for m in read] == [id_key(i) for i in ids]
    assert not reader.has_message_available()
    assert_nothing_more(reader.read_next)


def test_reader_from_latest_sees_only_new_messages(official: pulsar.Client, topic_name: str) -> None:
    produce(official, topic_name, 3, batching=False)
    reader = official.create_reader(topic_name, pulsar.MessageId.latest)
    assert not reader.has_message_available()
    producer = official.create_producer(topic_name)
    producer.send(b"new")
    assert reader.has_message_available()
    assert reader.read_next(timeout_millis=5000).data() == b"new"
    assert not reader.has_message_available()


@pytest.mark.parametrize("batching", BATCHING)
@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_reader_from_message_id(
    official: pulsar.Client, topic_name: str, batching: bool, inclusive: bool
) -> None:
    ids = produce(official, topic_name, 15, batching)
    # Index 7 is in the middle of the second batch when batching (batch index 2).
    start = 7
    if batching:
        assert ids[start].batch_index() == 2
    # Through serialize/deserialize, as an application would keep a position.
    start_id = pulsar.MessageId.deserialize(ids[start].serialize())
    reader = official.create_reader(topic_name, start_id, start_message_id_inclusive=inclusive)
    first = start if inclusive else start + 1
    assert reader.has_message_available()
    read = read_n(reader, 15 - first)
    assert data_of(read) == _expected(range(first, 15))
    assert not reader.has_message_available()
    assert_nothing_more(reader.read_next)


@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_reader_from_the_last_message_id(official: pulsar.Client, topic_name: str, inclusive: bool) -> None:
    ids = produce(official, topic_name, 10, batching=True)
    reader = official.create_reader(topic_name, ids[-1], start_message_id_inclusive=inclusive)
    if inclusive:
        assert reader.has_message_available()
        assert reader.read_next(timeout_millis=5000).data() == b"m9"
    assert not reader.has_message_available()
    assert_nothing_more(reader.read_next)


@pytest.mark.parametrize("batching", BATCHING)
def test_inclusive_reader_at_latest_reads_the_last_message(
    official: pulsar.Client, topic_name: str, batching: bool
) -> None:
    produce(official, topic_name, 7, batching)
    # The client asks for the last id, seeks there, and so reads exactly the last message.
    reader = official.create_reader(topic_name, pulsar.MessageId.latest, start_message_id_inclusive=True)
    assert reader.has_message_available()
    assert reader.read_next(timeout_millis=5000).data() == b"m6"
    assert not reader.has_message_available()
    assert_nothing_more(reader.read_next)


@pytest.mark.parametrize("batching", BATCHING)
def test_get_last_message_id(official: pulsar.Client, topic_name: str, batching: bool) -> None:
    consumer = official.subscribe(topic_name, "sub")
    empty = consumer.get_last_message_id()
    assert empty.entry_id() == -1
    ids = produce(official, topic_name, 12, batching)
    last = consumer.get_last_message_id()
    assert id_key(last) == id_key(ids[-1])
    if batching:
        # The last entry is a batch of two (m10, m11): the id names its last index.
        assert last.batch_index() == 1


@pytest.mark.parametrize("batching", BATCHING)
@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_consumer_seek_by_message_id(
    official: pulsar.Client, topic_name: str, batching: bool, inclusive: bool
) -> None:
    consumer = official.subscribe(
        topic_name,
        "sub",
        initial_position=pulsar.InitialPosition.Earliest,
        start_message_id_inclusive=inclusive,
    )
    ids = produce(official, topic_name, 10, batching)
    messages = receive_n(consumer, 10)
    for message in messages:
        consumer.acknowledge(message)
    target = 5 if batching else 3  # with batching, the first index of the second batch
    consumer.seek(ids[target])
    first = target if inclusive else target + 1
    assert data_of(receive_n(consumer, 10 - first)) == _expected(range(first, 10))
    assert_nothing_more(consumer.receive)


def test_consumer_seek_inside_a_batch(official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(topic_name, "sub", initial_position=pulsar.InitialPosition.Earliest)
    ids = produce(official, topic_name, 10, batching=True)
    receive_n(consumer, 10)
    consumer.seek(ids[7])
    # The broker rewinds to the entry; the client skips the batch indexes up to the seek id.
    assert data_of(receive_n(consumer, 2)) == _expected([8, 9])
    assert_nothing_more(consumer.receive)


@pytest.mark.parametrize("batching", BATCHING)
def test_consumer_seek_by_timestamp(official: pulsar.Client, topic_name: str, batching: bool) -> None:
    consumer = official.subscribe(topic_name, "sub", initial_position=pulsar.InitialPosition.Earliest)
    # A gap between sends gives every entry its own publish time (with batching, every batch).
    produce(official, topic_name, 10, batching, gap=0.01)
    messages = receive_n(consumer, 10)
    for message in messages:
        consumer.acknowledge(message)
    target = 5  # the first message of the second batch when batching
    consumer.seek(messages[target].publish_timestamp())
    assert data_of(receive_n(consumer, 10 - target)) == _expected(range(target, 10))
    assert_nothing_more(consumer.receive)

    # Seeking to a time after everything leaves nothing to deliver; to 0, everything again.
    consumer.seek(int(time.time() * 1000) + 60_000)
    assert_nothing_more(consumer.receive)
    consumer.seek(0)
    assert data_of(receive_n(consumer, 10)) == _expected(range(10))


def test_consumer_seek_to_earliest_and_latest(official: pulsar.Client, topic_name: str) -> None:
    consumer = official.subscribe(topic_name, "sub", initial_position=pulsar.InitialPosition.Earliest)
    produce(official, topic_name, 4, batching=False)
    for message in receive_n(consumer, 4):
        consumer.acknowledge(message)
    consumer.seek(pulsar.MessageId.earliest)
    assert data_of(receive_n(consumer, 4)) == _expected(range(4))
    consumer.seek(pulsar.MessageId.latest)
    assert_nothing_more(consumer.receive)
    producer = official.create_producer(topic_name)
    producer.send(b"after-latest")
    assert consumer.receive(timeout_millis=5000).data() == b"after-latest"


def test_reader_seek(broker: BrokerProcess, official: pulsar.Client, topic_name: str) -> None:
    ids = produce(official, topic_name, 10, batching=False, gap=0.01)
    reader = official.create_reader(topic_name, pulsar.MessageId.earliest)
    read = read_n(reader, 10)
    reader.seek(ids[2])
    assert data_of(read_n(reader, 7)) == _expected(range(3, 10))
    reader.seek(read[6].publish_timestamp())
    assert data_of(read_n(reader, 4)) == _expected(range(6, 10))
    assert not reader.has_message_available()
    reader.close()
    # The reader's subscription goes away with it, seeks or not.
    subscriptions = broker.admin("GET", f"/admin/v2/persistent/public/default/{topic_name}/subscriptions").json()
    assert subscriptions == []


def test_reader_at_latest_seeks_back_by_time(official: pulsar.Client, topic_name: str) -> None:
    before = int(time.time() * 1000) - 1
    produce(official, topic_name, 3, batching=False)
    reader = official.create_reader(topic_name, pulsar.MessageId.latest)
    assert not reader.has_message_available()
    # After a seek by time the reader resubscribes with no start id: the broker must keep the
    # position the seek set, not start the new subscription at the end again.
    reader.seek(before)
    assert reader.has_message_available()
    assert data_of(read_n(reader, 3)) == _expected(range(3))
    assert not reader.has_message_available()
    reader.seek(2**63 - 1)
    assert not reader.has_message_available()
