"""Small helpers shared by the interop tests: the official client (the oracle) producing, receiving and
reading, and the broker's admin view of what it did."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pulsar

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin
from tests.support.polling import wait_until

OPERATION_TIMEOUT = 10
RECEIVE_TIMEOUT_MS = 5000


# The official_factory fixture: make(broker=None) -> an official client for that (or the module's) broker.
OfficialFactory = Callable[..., pulsar.Client]


def full_name(topic: str) -> str:
    """The fully qualified name of a short topic name in public/default."""
    return f"persistent://public/default/{topic}"


def receive_n(consumer: Any, count: int, timeout_ms: int = RECEIVE_TIMEOUT_MS) -> list[pulsar.Message]:
    """Receive exactly ``count`` messages (each within the timeout), failing otherwise."""
    return [consumer.receive(timeout_millis=timeout_ms) for _ in range(count)]


def read_n(reader: pulsar.Reader, count: int, timeout_ms: int = RECEIVE_TIMEOUT_MS) -> list[pulsar.Message]:
    """Read exactly ``count`` messages from a reader."""
    return [reader.read_next(timeout_millis=timeout_ms) for _ in range(count)]


def assert_nothing_more(receive: Callable[..., pulsar.Message], timeout_ms: int = 300) -> None:
    """Assert that ``receive`` (a consumer's receive or a reader's read_next) times out."""
    try:
        message = receive(timeout_millis=timeout_ms)
    except pulsar.Timeout:
        return
    raise AssertionError(f"unexpected message {message.data()!r} {message.message_id()}")


def backlog(broker: BrokerProcess, topic: str, subscription: str) -> int:
    """The subscription's backlog in messages, each message of a batch counted (exact from the
    broker entry index, on both brokers); Pulsar's own msgBacklog counts entries."""
    with PulsarAdmin(broker.web_url, timeout_seconds=30) as admin:
        return admin.message_backlog(topic, subscription).messages


def wait_backlog(broker: BrokerProcess, topic: str, subscription: str, expected: int, timeout: float = 10.0) -> None:
    """Wait until the admin stats show ``expected`` as the backlog (the client groups its acks)."""
    wait_until(lambda: backlog(broker, topic, subscription) == expected, timeout=timeout)


def id_key(message_id: Any) -> tuple[int, int, int, int]:
    """A comparable tuple for a message id: (ledger, entry, partition, batch index)."""
    return (message_id.ledger_id(), message_id.entry_id(), message_id.partition(), message_id.batch_index())


def data_of(messages: list[pulsar.Message]) -> list[bytes]:
    """The payloads of some messages, in order."""
    return [m.data() for m in messages]


def produce(
    client: pulsar.Client, topic: str, count: int, batching: bool = False, gap: float = 0.0
) -> list[pulsar.MessageId]:
    """Send m0..m{count-1} and return their ids in send order.

    With batching, in batches of exactly five (flush() sends a short last one; no timer cuts one
    short). ``gap`` seconds between sends give entries distinct publish times.
    """
    producer = client.create_producer(
        topic, batching_enabled=batching, batching_max_messages=5, batching_max_publish_delay_ms=60_000
    )
    ids: list[pulsar.MessageId] = []
    for i in range(count):
        if gap:
            time.sleep(gap)
            producer.flush()
        producer.send_async(f"m{i}".encode(), lambda result, msg_id: ids.append(msg_id))
    producer.flush()
    producer.close()
    assert len(ids) == count
    return ids


def create_partitioned(broker: BrokerProcess, topic: str, partitions: int) -> None:
    """Create a partitioned topic through the admin API, as ``pulsar-admin topics create-partitioned-topic``."""
    response = broker.admin(
        "PUT",
        f"/admin/v2/persistent/public/default/{topic}/partitions",
        content=str(partitions),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 204, response.text
