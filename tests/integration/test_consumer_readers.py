"""Readers: start positions (inclusive or not, inside batches), has_message_available, seek, partitions."""

from __future__ import annotations

import time

import pulsar
import pytest

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import MessageId
from tests.support.consumer_checks import data, key_of, nothing_more, produce
from tests.support.polling import wait_until


def _ours(official_id: pulsar.MessageId) -> MessageId:
    return MessageId.deserialize(official_id.serialize())


@pytest.mark.parametrize("batch", [0, 4], ids=["single", "batched"])
@pytest.mark.parametrize("inclusive", [False, True], ids=["exclusive", "inclusive"])
def test_reader_reads_the_range_after_its_start(
    official: pulsar.Client, our_client: Client, topic_name: str, batch: int, inclusive: bool
) -> None:
    ids = produce(official, topic_name, 12, batch=batch)
    start = 5  # inside the second batch when batched
    reader = our_client.create_reader(topic_name, _ours(ids[start]), start_message_id_inclusive=inclusive)
    first = start if inclusive else start + 1
    got = [reader.read_next(5000) for _ in range(12 - first)]
    assert data(got) == [f"m{i}".encode() for i in range(first, 12)]
    assert [key_of(m.message_id()) for m in got] == [key_of(i) for i in ids[first:]]
    assert not reader.has_message_available()
    assert nothing_more(reader.read_next)


def test_reader_from_earliest_and_latest(official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    produce(official, topic_name, 3)
    earliest = our_client.create_reader(topic_name, MessageId.earliest)
    latest = our_client.create_reader(topic_name, MessageId.latest)
    assert earliest.has_message_available()
    assert not latest.has_message_available()
    assert data([earliest.read_next(5000) for _ in range(3)]) == [b"m0", b"m1", b"m2"]
    assert not earliest.has_message_available()
    produce(official, topic_name, 1)
    assert latest.has_message_available() and earliest.has_message_available()
    assert latest.read_next(5000).data() == b"m0"


def test_reader_seek_and_resume_after_reconnect(broker, official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    ids = produce(official, topic_name, 8, batch=4)
    reader = our_client.create_reader(topic_name, MessageId.earliest)
    assert data([reader.read_next(5000) for _ in range(6)]) == [f"m{i}".encode() for i in range(6)]
    reader.seek(_ours(ids[1]))
    assert reader.read_next(5000).data() == b"m2"
    broker.restart()
    # The reader resubscribes from its last message, inside the batch; its reconnect backoff
    # (doubling up to 30 s while the broker was down) can put the resubscribe some seconds after the restart.
    assert data([reader.read_next(40000 if i == 0 else 5000) for i in range(5)]) == [f"m{i}".encode() for i in range(3, 8)]


def test_reader_acknowledges_a_batch_only_once_read_to_its_end(
    broker, official: pulsar.Client, our_client: Client, topic_name: str
) -> None:
    """The reader's cumulative ack stops before an entry whose batch it has read only in part."""
    ids = produce(official, topic_name, 8, batch=4)
    reader = our_client.create_reader(topic_name, MessageId.earliest)
    assert data([reader.read_next(5000) for _ in range(7)]) == [f"m{i}".encode() for i in range(7)]
    first, second = f"{ids[0].ledger_id()}:{ids[0].entry_id()}", f"{ids[4].ledger_id()}:{ids[4].entry_id()}"

    def mark_delete() -> str | None:
        stats = broker.admin("GET", f"/admin/v2/persistent/public/default/{topic_name}/internalStats").json()
        (cursor,) = stats["cursors"].values()
        position = cursor["markDeletePosition"]
        return position if position in (first, second) else None

    # The first entry is read to its end: the ack reaches it, and no further.
    assert wait_until(mark_delete, "the reader's ack at the broker") == first
    time.sleep(0.5)  # more than the ack grouping time: a wrong ack of the second entry would show
    assert mark_delete() == first
    reader.close()


def test_reader_of_a_partitioned_topic(broker, official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    broker.admin("PUT", f"/admin/v2/persistent/public/default/{topic_name}/partitions", json=2).raise_for_status()
    produce(official, topic_name, 10, key=lambda i: f"k{i}")
    reader = our_client.create_reader(topic_name, MessageId.earliest)
    assert reader.has_message_available()
    assert sorted(data([reader.read_next(5000) for _ in range(10)])) == sorted(f"m{i}".encode() for i in range(10))
    assert not reader.has_message_available()
    assert len(reader.get_last_message_ids()) == 2
    with pytest.raises(Exception, match="earliest or MessageId.latest"):
        our_client.create_reader(topic_name, MessageId(0, 1, 1))
