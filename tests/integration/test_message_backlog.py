"""Backlogs in messages where Pulsar's stats count entries, on both brokers.

Pulsar's ``msgBacklog`` counts entries (a batch is one). ``PulsarAdmin.message_backlog`` counts
messages exactly from the broker entry index (PIP-90; Apache Pulsar here runs with
``AppendIndexMetadataInterceptor``, our broker appends it by default), and estimates them where a
broker appends no index. The same scenarios run on both brokers and must give the same figures.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client, ConsumerType, InitialPosition, Message
from airflow_pulsar.client.admin import (
    AdminError,
    AdminNotFoundError,
    AdminPreconditionFailedError,
    AsyncPulsarAdmin,
    PulsarAdmin,
)
from jvm.apache_pulsar import QUICK_JIT, PulsarStandalone

SUB = "s"
# 100 messages in batches of 10, then one unbatched: 11 entries, broker entry indexes 9, 19, ... 99, 100.
BATCHES, PER_BATCH = 10, 10
TOTAL = BATCHES * PER_BATCH + 1


@pytest.fixture
def admin(broker: Any) -> Iterator[PulsarAdmin]:
    with PulsarAdmin(broker.web_url, timeout_seconds=30) as client:
        yield client


@pytest.fixture
def our_client(broker: Any) -> Iterator[Client]:
    """Our client on the module's broker, with the 30 s operation timeout of this module's admin client."""
    with Client(broker.service_url, operation_timeout_seconds=30) as pulsar_client:
        yield pulsar_client


def produce_batches(client: Client, topic: str, batches: int = BATCHES, single: bool = True) -> None:
    """``batches`` entries of PER_BATCH messages each, then (if ``single``) one unbatched message."""
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=PER_BATCH, batching_max_publish_delay_ms=5000
    )
    for i in range(batches * PER_BATCH):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    producer.close()
    if single:
        client.create_producer(topic, batching_enabled=False).send(b"single")


def by_entry(consumer: Any, count: int) -> dict[int, list[Message]]:
    """Receive ``count`` messages, grouped by entry id."""
    grouped: dict[int, list[Message]] = {}
    for _ in range(count):
        message = consumer.receive(10_000)
        grouped.setdefault(message.message_id().entry_id(), []).append(message)
    return grouped


def settled(probe: Callable[[], Any], expected: Any, timeout: float = 10.0) -> Any:
    """Poll ``probe`` until it returns ``expected`` (acks are grouped for 100 ms), or time out."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value == expected or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def figures(admin: PulsarAdmin, topic: str) -> tuple[int, int, bool]:
    backlog = admin.message_backlog(topic, SUB)
    return backlog.messages, backlog.entries, backlog.exact


def test_msg_backlog_counts_entries_as_pulsar_does(broker: Any, admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    admin.create_partitioned_topic(topic_name, 2)
    admin.create_subscription(topic_name, SUB, InitialPosition.Earliest)
    for index in range(2):  # 50 messages in 5 batches on each partition
        produce_batches(our_client, f"{topic_name}-partition-{index}", batches=BATCHES // 2, single=False)

    for index in range(2):
        part = broker.topic_stats(f"{topic_name}-partition-{index}")
        assert part["msgInCounter"] == 50
        sub = part["subscriptions"][SUB]
        assert (sub["msgBacklog"], sub["msgBacklogNoDelayed"]) == (5, 5)
    total = admin.partitioned_stats(topic_name)["subscriptions"][SUB]
    assert (total["msgBacklog"], total["msgBacklogNoDelayed"]) == (BATCHES, BATCHES)
    assert admin.backlog(topic_name, SUB).msg_backlog == BATCHES

    counted = admin.message_backlog(topic_name, SUB)
    assert (counted.messages, counted.entries, counted.exact) == (100, BATCHES, True)
    assert [(p.topic, p.messages, p.entries, p.exact) for p in counted.partitions] == [
        (f"persistent://public/default/{topic_name}-partition-{i}", 50, 5, True) for i in range(2)
    ]
    assert counted.backlog_size == sum(p.backlog_size for p in counted.partitions) > 0


def test_count_is_exact_after_individual_acks_of_whole_entries(admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    consumer = our_client.subscribe(topic_name, SUB, consumer_type=ConsumerType.Shared, initial_position=InitialPosition.Earliest)
    produce_batches(our_client, topic_name)
    entries = by_entry(consumer, TOTAL)
    ledger = next(iter(entries.values()))[0].message_id().ledger_id()
    first = min(entries)
    assert figures(admin, topic_name) == (TOTAL, 11, True)

    def ack(*positions: int) -> None:
        for position in positions:
            for message in entries[first + position]:
                consumer.acknowledge(message)

    ack(2, 3, 4, 7)  # leaves two individually deleted ranges above the mark-delete
    assert settled(lambda: figures(admin, topic_name), (61, 7, True)) == (61, 7, True)
    cursor = admin.internal_stats(topic_name)["cursors"][SUB]
    assert cursor["markDeletePosition"] == f"{ledger}:{first - 1}"
    assert cursor["individuallyDeletedMessages"] == (
        f"[({ledger}:{first + 1}..{ledger}:{first + 4}],({ledger}:{first + 6}..{ledger}:{first + 7}]]"
    )

    ack(0)  # the mark-delete moves to entry 0; entry 1 still holds the ranges apart
    assert settled(lambda: figures(admin, topic_name), (51, 6, True)) == (51, 6, True)
    ack(1)  # the mark-delete swallows the first range
    assert settled(lambda: figures(admin, topic_name), (41, 5, True)) == (41, 5, True)
    ack(10)  # the unbatched entry: a range ending at the last confirmed entry
    assert settled(lambda: figures(admin, topic_name), (40, 4, True)) == (40, 4, True)
    internal = admin.internal_stats(topic_name)
    assert internal["lastConfirmedEntry"] == f"{ledger}:{first + 10}"
    assert internal["cursors"][SUB]["markDeletePosition"] == f"{ledger}:{first + 4}"
    assert internal["cursors"][SUB]["individuallyDeletedMessages"] == (
        f"[({ledger}:{first + 6}..{ledger}:{first + 7}],({ledger}:{first + 9}..{ledger}:{first + 10}]]"
    )
    consumer.close()


def test_count_is_exact_after_cumulative_acks(admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    consumer = our_client.subscribe(topic_name, SUB, initial_position=InitialPosition.Earliest)
    produce_batches(our_client, topic_name)
    entries = by_entry(consumer, TOTAL)
    first = min(entries)

    consumer.acknowledge_cumulative(entries[first + 3][-1])  # entries 0..3 whole
    assert settled(lambda: figures(admin, topic_name), (61, 7, True)) == (61, 7, True)
    # Inside a batch: without batch-index acks the entry stays unacknowledged, and counts whole.
    consumer.acknowledge_cumulative(entries[first + 5][4])
    assert settled(lambda: figures(admin, topic_name), (51, 6, True)) == (51, 6, True)
    consumer.acknowledge_cumulative(entries[first + 10][0])
    assert settled(lambda: figures(admin, topic_name), (0, 0, True)) == (0, 0, True)
    consumer.close()


def test_the_count_reads_the_oldest_unacknowledged_entrys_publish_time(
    admin: PulsarAdmin, our_client: Client, topic_name: str
) -> None:
    """The count looks up the entry after the mark-delete, the one a peek shows, so its publish
    time comes with the count (the backlog sensor's age then needs no peek)."""
    consumer = our_client.subscribe(topic_name, SUB, initial_position=InitialPosition.Earliest)
    produce_batches(our_client, topic_name)
    entries = by_entry(consumer, TOTAL)
    first = min(entries)
    assert admin.message_backlog(topic_name, SUB).oldest_publish_ms == admin.peek_message(topic_name, SUB).publish_time_ms

    consumer.acknowledge_cumulative(entries[first + 3][-1])  # entries 0..3 whole: entry 4 is the oldest left
    assert settled(lambda: figures(admin, topic_name), (61, 7, True)) == (61, 7, True)
    counted = admin.message_backlog(topic_name, SUB)
    peeked = admin.peek_message(topic_name, SUB)
    assert peeked.message_id.endswith(f":{first + 4}")
    assert counted.oldest_publish_ms == peeked.publish_time_ms == entries[first + 4][0].publish_timestamp()
    consumer.acknowledge_cumulative(entries[first + 9][-1])  # one entry left: one lookup serves the count
    assert settled(lambda: figures(admin, topic_name), (1, 1, True)) == (1, 1, True)
    assert admin.message_backlog(topic_name, SUB).oldest_publish_ms == admin.peek_message(topic_name, SUB).publish_time_ms
    consumer.close()


def test_async_admin_counts_the_same(admin: PulsarAdmin, our_client: Client, broker: Any, topic_name: str) -> None:
    admin.create_partitioned_topic(topic_name, 3)
    admin.create_subscription(topic_name, SUB, InitialPosition.Earliest)
    produce_batches(our_client, f"{topic_name}-partition-1", batches=3, single=True)

    async def read() -> Any:
        async with AsyncPulsarAdmin(broker.web_url) as async_admin:
            return await async_admin.message_backlog(topic_name, SUB)

    counted = asyncio.run(read())
    assert counted == admin.message_backlog(topic_name, SUB)
    assert (counted.messages, counted.entries, counted.exact) == (31, 4, True)
    assert [(p.messages, p.entries) for p in counted.partitions] == [(0, 0), (31, 4), (0, 0)]


def test_partitioned_internal_stats_hold_every_partitions_internal_stats(
    admin: PulsarAdmin, our_client: Client, topic_name: str
) -> None:
    """Pulsar's partitioned-internalStats: ``{"metadata": {"partitions": N, ...}, "partitions":
    {name: internal stats}}``, each partition's the document its own internalStats gives."""
    admin.create_partitioned_topic(topic_name, 2)
    admin.create_subscription(topic_name, SUB, InitialPosition.Earliest)
    produce_batches(our_client, f"{topic_name}-partition-1", batches=2, single=False)

    document = admin.partitioned_internal_stats(topic_name)
    assert set(document) == {"metadata", "partitions"}
    assert (document["metadata"]["partitions"], document["metadata"]["deleted"]) == (2, False)
    names = [f"persistent://public/default/{topic_name}-partition-{i}" for i in range(2)]
    assert sorted(document["partitions"]) == names
    for name in names:
        own = admin.internal_stats(name)
        together = document["partitions"][name]
        assert set(together) == set(own)
        for field in ("entriesAddedCounter", "numberOfEntries", "currentLedgerEntries", "lastConfirmedEntry", "state"):
            assert together[field] == own[field], field
        cursor, own_cursor = together["cursors"][SUB], own["cursors"][SUB]
        for field in ("markDeletePosition", "individuallyDeletedMessages"):
            assert cursor[field] == own_cursor[field], field
    assert document["partitions"][names[1]]["entriesAddedCounter"] == 2
    assert int(document["partitions"][names[1]]["lastConfirmedEntry"].split(":")[1]) == 1

    with pytest.raises(AdminNotFoundError, match="Partitioned Topic .* not found"):
        admin.partitioned_internal_stats(f"{topic_name}-partition-0")
    admin.create_topic(f"{topic_name}-plain")
    with pytest.raises(AdminNotFoundError, match="Partitioned Topic .* not found"):
        admin.partitioned_internal_stats(f"{topic_name}-plain")
    with pytest.raises(AdminNotFoundError, match="Partitioned Topic .* not found"):
        admin.partitioned_internal_stats(f"{topic_name}-missing")


def test_a_count_stops_where_the_entries_settle_the_threshold(admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    """``at_least``: entries >= N says messages >= N, so the entries are returned as a lower bound;
    below it the messages (10 a batch here) are counted exactly."""
    admin.create_partitioned_topic(topic_name, 2)
    admin.create_subscription(topic_name, SUB, InitialPosition.Earliest)
    produce_batches(our_client, f"{topic_name}-partition-0", batches=3, single=True)  # 4 entries, 31 messages

    bound = admin.message_backlog(topic_name, SUB, at_least=4)
    assert (bound.messages, bound.entries, bound.exact, bound.lower_bound) == (4, 4, False, True)
    assert [(p.messages, p.entries, p.exact, p.lower_bound) for p in bound.partitions] == [(4, 4, False, True), (0, 0, True, False)]
    for at_least in (5, 31, None):
        counted = admin.message_backlog(topic_name, SUB, at_least=at_least)
        assert (counted.messages, counted.entries, counted.exact, counted.lower_bound) == (31, 4, True, False)
    with pytest.raises(ValueError, match="at_least"):
        admin.message_backlog(topic_name, SUB, at_least=-1)


def test_entries_carry_the_broker_entry_index(broker: Any, admin: PulsarAdmin, our_client: Client, topic_name: str) -> None:
    consumer = our_client.subscribe(topic_name, SUB, initial_position=InitialPosition.Earliest)
    produce_batches(our_client, topic_name)
    entries = by_entry(consumer, TOTAL)
    ledger = next(iter(entries.values()))[0].message_id().ledger_id()
    first = min(entries)

    fifth = admin.get_message_by_id(topic_name, ledger, first + 5)
    assert (fifth.message_id, fifth.index, fifth.batch_size) == (f"{ledger}:{first + 5}", 59, PER_BATCH)
    newest = admin.examine_message(topic_name)
    assert (newest.index, newest.batch_size, newest.data) == (100, None, b"single")
    second = admin.examine_message(topic_name, "earliest", 2)
    assert (second.message_id, second.index) == (f"{ledger}:{first + 1}", 19)
    assert admin.examine_message(topic_name, InitialPosition.Latest, 11).index == 9
    peeked = admin.peek_message(topic_name, SUB)
    assert (peeked.message_id, peeked.index, peeked.batch_size) == (f"{ledger}:{first}", 9, PER_BATCH)

    # The headers as Pulsar 4.2.4 sends them, on a HEAD as on a GET.
    path = f"/admin/v2/persistent/public/default/{topic_name}/ledger/{ledger}/entry/{first}"
    response = broker.admin("GET", path)
    headers = response.headers
    assert headers["X-Pulsar-Message-ID"] == f"{ledger}:{first}"
    assert headers["X-Pulsar-Broker-Entry-METADATA-index"] == "9"
    assert headers["X-Pulsar-num-batch-message"] == "10"
    # The stored entry less its MessageMetadata: checksum and metadata size (10 bytes), the broker
    # entry metadata section (8), and the uncompressed batch (the body).
    assert int(headers["X-Pulsar-batch-size"]) == len(response.content) + 18
    assert headers["X-Pulsar-PROPERTY"] == "{}"
    assert headers["X-Pulsar-Is-Encrypted"] == "false"
    assert headers["X-Pulsar-sequence-id"] == "0" and headers["X-Pulsar-highest-sequence-id"] == "9"
    assert headers["X-Pulsar-producer-name"] and headers["X-Pulsar-publish-time"].endswith("Z")
    head = broker.admin("HEAD", path)
    assert head.status_code == 200 and head.headers["X-Pulsar-Broker-Entry-METADATA-index"] == "9"
    unbatched = broker.admin("GET", f"/admin/v2/persistent/public/default/{topic_name}/ledger/{ledger}/entry/{first + 10}")
    assert "X-Pulsar-num-batch-message" not in unbatched.headers and "X-Pulsar-batch-size" not in unbatched.headers
    consumer.close()


def test_entry_lookups_refuse_bad_input(admin: PulsarAdmin, topic_name: str) -> None:
    admin.create_topic(topic_name)
    with pytest.raises(AdminPreconditionFailedError, match="total message is zero"):
        admin.examine_message(topic_name)
    with pytest.raises(AdminNotFoundError, match="not found"):
        admin.get_message_by_id(topic_name, 999_999, 0)
    admin.create_partitioned_topic(f"{topic_name}-p", 2)
    with pytest.raises(AdminError, match="HTTP 405.*partitioned"):
        admin.get_message_by_id(f"{topic_name}-p", 1, 0)
    with pytest.raises(AdminError, match="HTTP 405.*partitioned"):
        admin.examine_message(f"{topic_name}-p")
    with pytest.raises(ValueError, match="initial_position must be 'latest' or 'earliest'"):
        admin.examine_message(topic_name, "oldest")
    with pytest.raises(ValueError, match="message_position must be an int >= 1"):
        admin.examine_message(topic_name, "latest", 0)
    with pytest.raises(ValueError, match="entry_id must be an int >= 0"):
        admin.get_message_by_id(topic_name, 1, -1)
    with pytest.raises(ValueError, match="max_range_lookups must be an int >= 0"):
        admin.message_backlog(topic_name, SUB, max_range_lookups=-1)
    with pytest.raises(AdminNotFoundError, match="subscription 'nobody' not found"):
        admin.message_backlog(topic_name, "nobody")


@pytest.fixture(scope="module")
def unindexed_broker(broker_kind: str) -> Iterator[Any]:
    """A broker that appends no broker entry index: ours with --no-entry-index, or Apache Pulsar
    without AppendIndexMetadataInterceptor (the suite's one extra Pulsar start)."""
    with tempfile.TemporaryDirectory(prefix="unindexed-") as work_dir:
        if broker_kind == "pulsar":
            started: Any = PulsarStandalone(Path(work_dir), config={"brokerEntryMetadataInterceptors": ""}, jvm_options=QUICK_JIT).start()
        else:
            started = BrokerProcess(Path(work_dir), "--no-entry-index").start()
        try:
            yield started
        finally:
            started.stop()


def test_count_is_estimated_without_the_index(unindexed_broker: Any, topic_name: str) -> None:
    with Client(unindexed_broker.service_url) as client, PulsarAdmin(unindexed_broker.web_url, timeout_seconds=30) as admin:
        consumer = client.subscribe(topic_name, SUB, consumer_type=ConsumerType.Shared, initial_position=InitialPosition.Earliest)
        produce_batches(client, topic_name)
        entries = by_entry(consumer, TOTAL)
        ledger = next(iter(entries.values()))[0].message_id().ledger_id()
        first = min(entries)
        assert admin.get_message_by_id(topic_name, ledger, first).index is None
        # msgInCounter over entriesAddedCounter: 101 messages in 11 entries.
        assert figures(admin, topic_name) == (TOTAL, 11, False)
        for position in (2, 3, 4, 7):
            for message in entries[first + position]:
                consumer.acknowledge(message)
        # 7 entries left, estimated at 101/11 messages each (61 exactly).
        assert settled(lambda: figures(admin, topic_name), (64, 7, False)) == (64, 7, False)
        consumer.close()


@pytest.mark.embedded_only
def test_index_survives_a_restart(broker_kind: str, broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    """Our broker only: it rebuilds the index from the message counts it stores with each entry,
    where a Pulsar bookie keeps the entry metadata inside the entry itself."""
    broker = broker_factory()
    with Client(broker.service_url) as client:
        consumer = client.subscribe(topic_name, SUB, consumer_type=ConsumerType.Shared, initial_position=InitialPosition.Earliest)
        produce_batches(client, topic_name)
        entries = by_entry(consumer, TOTAL)
        first = min(entries)
        for position in (0, 3):
            for message in entries[first + position]:
                consumer.acknowledge(message)
        consumer.close()
    with PulsarAdmin(broker.web_url) as admin:
        assert settled(lambda: figures(admin, topic_name), (81, 9, True)) == (81, 9, True)
    broker.restart()
    with PulsarAdmin(broker.web_url) as admin:
        assert figures(admin, topic_name) == (81, 9, True)
        assert admin.internal_stats(topic_name)["entriesAddedCounter"] == 0  # counted since the load, as Pulsar
        assert admin.examine_message(topic_name).index == 100
