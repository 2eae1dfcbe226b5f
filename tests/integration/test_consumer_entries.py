"""Bulk readers' takes of whole entries (``Consumer.take_entries``): permits, limits, acks, and
the refusal for consumers that track messages one by one."""

from __future__ import annotations

import time

import pulsar
import pytest

from airflow_pulsar.client import MessageId
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import ConsumerBatchReceivePolicy, InitialPosition, ReceivedEntry, create_reader
from airflow_pulsar.client.exceptions import InvalidConfiguration
from airflow_pulsar.client.protocol.batch import read_batch
from tests.support.consumer_checks import backlog, produce


def payloads(entries: list[ReceivedEntry]) -> list[bytes]:
    """The messages' payloads of entries, in order."""
    out: list[bytes] = []
    for entry in entries:
        if entry.batch_size:
            read_batch(entry.payload, entry.batch_size, lambda _, i, data, s: data, None, entry.wanted, out)
        else:
            out.append(entry.payload)
    return out


def take_all(consumer, count: int) -> list[ReceivedEntry]:
    """Entries until they hold ``count`` messages (each take within the policy's timeout)."""
    entries: list[ReceivedEntry] = []
    for _ in range(200):
        entries += consumer.take_entries()
        if sum(entry.message_count() for entry in entries) >= count:
            return entries
    raise AssertionError(f"{count} messages did not come: {sum(e.message_count() for e in entries)}")


@pytest.mark.parametrize("batch", [0, 7], ids=["unbatched", "batched"])
def test_takes_return_their_permits_and_cumulative_acks_clear_the_backlog(
    broker, official: pulsar.Client, our_client: Client, topic_name: str, batch: int
) -> None:
    produce(official, topic_name, 70, batch=batch)
    # A queue of 10 holds a fraction of the backlog: every message only comes if takes give permits back.
    policy = ConsumerBatchReceivePolicy(20, -1, 200)
    consumer = our_client.subscribe(
        topic_name, "sub", initial_position=InitialPosition.Earliest, receiver_queue_size=10, batch_receive_policy=policy
    )
    first = consumer.take_entries()
    # Whole entries: a take stops at the entry that reaches the policy's 20 messages.
    assert 0 < sum(entry.message_count() for entry in first) < 20 + max(batch, 1)
    entries = first + take_all(consumer, 70 - sum(entry.message_count() for entry in first))

    assert payloads(entries) == [f"m{i}".encode() for i in range(70)]
    assert all(entry.batch_size == batch for entry in entries)
    stats = consumer.stats()
    # The queue's 10 on subscribe, then every message's permit once (those not yet flowed wait in available).
    assert stats.permits_sent + stats.available_permits == 10 + 70
    consumer.acknowledge_cumulative(entries[-1].last_message_id())
    consumer.close()
    assert backlog(broker, topic_name, "sub") == 0


def test_a_reader_resumes_after_the_entries_it_took(our_client: Client, official: pulsar.Client, topic_name: str) -> None:
    produce(official, topic_name, 30, batch=10)
    policy = ConsumerBatchReceivePolicy(10, -1, 200)  # a take of one entry
    reader = create_reader(our_client, topic_name, MessageId.earliest, batch_receive_policy=policy)
    consumer = reader.consumer
    first = take_all(consumer, 10)
    assert payloads(first) == [f"m{i}".encode() for i in range(10)]
    # The broker closes the reader's consumer (as an unload does): it subscribes again after the
    # last entry taken, and the rest comes exactly once.
    child = consumer.partition_consumers[0]
    child.handle_broker_close()
    rest = take_all(consumer, 20)
    assert payloads(rest) == [f"m{i}".encode() for i in range(10, 30)]
    reader.close()


def test_consumers_that_track_messages_one_by_one_are_refused(our_client: Client, topic_name: str) -> None:
    consumer = our_client.subscribe(topic_name, "timed", unacked_messages_timeout_ms=10_000)
    with pytest.raises(InvalidConfiguration, match="take_entries"):
        consumer.take_entries()
    consumer.close()


def test_a_take_until_an_entry_ends_with_it_without_waiting(our_client: Client, official: pulsar.Client, topic_name: str) -> None:
    ids = produce(official, topic_name, 30, batch=10)
    # A policy that would wait a minute for 1,000 messages: the take ends at the entry asked for.
    policy = ConsumerBatchReceivePolicy(1000, -1, 60_000)
    reader = create_reader(our_client, topic_name, MessageId.earliest, batch_receive_policy=policy)
    consumer = reader.consumer
    second = (ids[10].ledger_id(), ids[10].entry_id())
    started = time.monotonic()
    taken: list[ReceivedEntry] = []
    while not taken or (taken[-1].ledger_id, taken[-1].entry_id) < second:
        taken += consumer.take_entries(until=second)
        assert time.monotonic() - started < 30, "the take waited for its policy's limits"
    assert payloads(taken) == [f"m{i}".encode() for i in range(20)]
    # The entry after it stays queued for the next take.
    assert payloads(consumer.take_entries(until=(ids[20].ledger_id(), ids[20].entry_id()))) == [f"m{i}".encode() for i in range(20, 30)]
    reader.close()
