"""Helpers of the transaction tests (tests/integration/test_transactions*.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from airflow_pulsar.client import Client, InitialPosition, Transaction
from tests.support.consumer_checks import receive_all


def sent_and_received(client: Client, topic: str, count: int, consumer_type: Any) -> tuple[Any, list[Any]]:
    """``m-0``..``m-{count-1}`` sent one entry each, and a consumer of ``consumer_type`` that received them all."""
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(count):
        producer.send(f"m-{i}".encode())
    consumer = client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest, consumer_type=consumer_type)
    return consumer, receive_all(consumer, count)


def json_value(i: int) -> bytes:
    """Message ``i`` as the Spark ingest tests' JSON rows have it."""
    return json.dumps({"id": i, "name": f"n{i}", "amount": i / 4, "at": "2024-05-01T12:00:00Z"}).encode()


@dataclass(frozen=True)
class TransactionalTopic:
    """A topic written by :func:`transactional_topic`: the ids a consumer receives now, the open
    transaction, and the ids a consumer receives once it commits."""

    visible: list[int]
    open_transaction: Transaction
    after_commit: list[int]


# What the log of :func:`transactional_topic` holds, entry by entry: Pulsar's MarkerType of a
# marker (21 commit, 22 abort), whether the entry's transaction aborted, and whether it lies past
# the max read position (X-Pulsar-marker-type, X-Pulsar-txn-aborted, X-Pulsar-txn-uncommitted).
TRANSACTIONAL_LOG = [
    (None, None, "false"),  # 0: plain, id 0
    (None, "false", "false"),  # 1: committed, id 1
    (None, "true", "false"),  # 2: aborted, id 100
    (None, "false", "false"),  # 3: committed, id 2
    ("21", "false", "false"),  # 4: commit marker
    ("22", "true", "false"),  # 5: abort marker
    (None, None, "false"),  # 6: plain, id 3
    (None, "true", "false"),  # 7: aborted, id 101
    ("22", "true", "false"),  # 8: abort marker (the max read position)
    (None, "false", "true"),  # 9: open, id 4
    (None, None, "true"),  # 10: plain after the open transaction, id 5
]


# How long the open transaction of :func:`transactional_topic` stays open unless ended.
OPEN_FOR_MS = 15 * 60 * 1000


def transactional_topic(client: Client, topic: str) -> TransactionalTopic:
    """``topic`` holding, one entry per message, plain and committed messages, an aborted
    transaction's messages, markers, then (before an open transaction) an aborted transaction's
    message and marker, the open transaction's message and a plain message waiting behind it
    (see ``TRANSACTIONAL_LOG``). ``client`` has transactions on."""
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(json_value(0))
    committed, aborted = client.new_transaction(), client.new_transaction()
    producer.send(json_value(1), transaction=committed)
    producer.send(json_value(100), transaction=aborted)
    producer.send(json_value(2), transaction=committed)
    committed.commit()
    aborted.abort()
    producer.send(json_value(3))
    tail = client.new_transaction()
    producer.send(json_value(101), transaction=tail)
    tail.abort()
    # Open through a Spark run or two: the default timeout (60 s) would abort it on a busy machine.
    still_open = client.new_transaction(transaction_timeout_ms=OPEN_FOR_MS)
    producer.send(json_value(4), transaction=still_open)
    producer.send(json_value(5))
    producer.close()
    return TransactionalTopic([0, 1, 2, 3], still_open, [4, 5])

# The max read position of :func:`transactional_topic` while its transaction is open: the abort
# marker just before the open transaction's message.
MAX_READ_ENTRY = 8
