"""The backlog count on a topic with transactions is what a consumer receives: not the markers,
not aborted messages, not the messages of an open transaction or those waiting behind it. On both
brokers (``transaction_broker``), with the entry headers the count reads compared to Pulsar's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from airflow_pulsar.client import Client, ConsumerType, InitialPosition
from airflow_pulsar.client.admin import PulsarAdmin
from tests.support.consumer_checks import nothing_more, receive_all
from tests.support.transactions import TRANSACTIONAL_LOG, transactional_topic


@pytest.fixture
def client(transaction_broker: Any) -> Iterator[Client]:
    client = Client(transaction_broker.service_url, operation_timeout_seconds=10, enable_transaction=True)
    yield client
    client.close()


@pytest.fixture
def admin(transaction_broker: Any) -> Iterator[PulsarAdmin]:
    with PulsarAdmin(transaction_broker.web_url) as admin:
        yield admin


def ids(messages: list[Any]) -> list[int]:
    return [json.loads(message.data())["id"] for message in messages]


def test_the_backlog_counts_what_a_fresh_consumer_receives(client: Client, admin: PulsarAdmin, topic_name: str) -> None:
    client.subscribe(topic_name, "counted", initial_position=InitialPosition.Earliest).close()
    topic = transactional_topic(client, topic_name)

    counted = admin.message_backlog(topic_name, "counted")
    consumer = client.subscribe(topic_name, "counted", consumer_type=ConsumerType.Exclusive, ack_receipt_enabled=True)
    received = receive_all(consumer, len(topic.visible))

    assert ids(received) == topic.visible
    assert nothing_more(consumer.receive, 1000)
    assert counted.messages == len(topic.visible) and counted.exact
    assert counted.entries == len(TRANSACTIONAL_LOG)  # Pulsar's msgBacklog counts every entry
    # Entries reach the threshold but messages do not: the markers hold none, so no short-cut.
    threshold = admin.message_backlog(topic_name, "counted", at_least=len(TRANSACTIONAL_LOG))
    assert (threshold.messages, threshold.lower_bound) == (len(topic.visible), False)

    consumer.acknowledge_cumulative(received[-1])
    # Acknowledged through the last message received: what is left is never received, or not yet.
    assert admin.message_backlog(topic_name, "counted").messages == 0

    topic.open_transaction.commit()
    after = admin.message_backlog(topic_name, "counted")
    assert ids(receive_all(consumer, len(topic.after_commit))) == topic.after_commit
    assert after.messages == len(topic.after_commit) and after.exact


def test_entry_headers_say_markers_aborted_and_uncommitted_as_pulsar(
    client: Client, transaction_broker: Any, topic_name: str
) -> None:
    transactional_topic(client, topic_name)
    path = f"/admin/v2/persistent/public/default/{topic_name}"
    ledger = httpx.get(transaction_broker.web_url + path + "/internalStats", timeout=10).json()["lastConfirmedEntry"].split(":")[0]
    seen = []
    for entry_id in range(len(TRANSACTIONAL_LOG)):
        headers = httpx.head(f"{transaction_broker.web_url}{path}/ledger/{ledger}/entry/{entry_id}", timeout=10).headers
        seen.append(tuple(headers.get(f"X-Pulsar-{name}") for name in ("marker-type", "txn-aborted", "txn-uncommitted")))
    assert seen == TRANSACTIONAL_LOG


def test_each_partition_counts_what_a_consumer_receives_of_it(client: Client, admin: PulsarAdmin, topic_name: str) -> None:
    admin.create_partitioned_topic(topic_name, 2)
    client.subscribe(topic_name, "counted", initial_position=InitialPosition.Earliest).close()
    producer = client.create_producer(topic_name, batching_enabled=False)
    keys = ["k0", "k1", "k2", "k3"]  # spread over both partitions
    committed, aborted, still_open = (client.new_transaction() for _ in range(3))
    for key in keys:
        producer.send(key.encode(), partition_key=key)
        producer.send(b"committed-" + key.encode(), partition_key=key, transaction=committed)
        producer.send(b"aborted-" + key.encode(), partition_key=key, transaction=aborted)
    committed.commit()
    aborted.abort()
    producer.send(b"open", partition_key="k0", transaction=still_open)

    counted = admin.message_backlog(topic_name, "counted")
    consumer = client.subscribe(topic_name, "counted")
    received = receive_all(consumer, 2 * len(keys))

    assert sorted(message.data() for message in received) == sorted([k.encode() for k in keys] + [b"committed-" + k.encode() for k in keys])
    assert nothing_more(consumer.receive, 1000)
    assert counted.exact and counted.messages == 2 * len(keys)
    by_partition = {part.topic: part.messages for part in counted.partitions}
    for message in received:
        by_partition[message.topic_name()] -= 1
    assert set(by_partition.values()) == {0}
    still_open.abort()
