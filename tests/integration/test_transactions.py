"""Transactions (PIP-31) against a broker with transaction coordinators: sends that become visible
on commit and vanish on abort, acknowledgements held until the transaction ends, conflicts,
timeouts, and the Java client's rules for a transaction that is no longer open. On both brokers:
``transaction_broker`` runs ours with coordinators, and Apache Pulsar with them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_pulsar.client import Client, ConsumerType, InitialPosition, TransactionState
from airflow_pulsar.client.exceptions import (
    InvalidConfiguration,
    InvalidTxnStatusError,
    MessageTooBig,
    TransactionConflict,
    TransactionCoordinatorNotFoundError,
    TransactionNotFound,
)
from airflow_pulsar.client.transaction import CoordinatorClient, TxnId
from tests.conftest import TRANSACTION_COORDINATORS
from tests.support.consumer_checks import backlog, data, nothing_more, receive_all
from tests.support.polling import wait_until
from tests.support.transactions import sent_and_received

# How long a message held by an open transaction is given to show up anyway.
INVISIBLE_MS = 1000


@pytest.fixture
def client(transaction_broker: Any) -> Iterator[Client]:
    """Our client with transactions on, on the broker with coordinators."""
    client = Client(transaction_broker.service_url, operation_timeout_seconds=10, connection_timeout_ms=3000, enable_transaction=True)
    yield client
    client.close()


def shared(client: Client, topic: str, subscription: str = "sub") -> Any:
    return client.subscribe(topic, subscription, initial_position=InitialPosition.Earliest, consumer_type=ConsumerType.Shared)


def received_one(client: Client, topic: str, payload: bytes) -> tuple[Any, Any, Any]:
    """A producer on ``topic``, a Shared consumer, and the one message ``payload`` it received."""
    producer = client.create_producer(topic)
    producer.send(payload)
    consumer = shared(client, topic)
    (message,) = receive_all(consumer, 1)
    return producer, consumer, message


def test_sends_in_a_transaction_are_visible_only_after_commit(client: Client, topic_name: str) -> None:
    producer = client.create_producer(topic_name)
    consumer = shared(client, topic_name)
    producer.send(b"before")
    txn = client.new_transaction()
    assert txn.state is TransactionState.OPEN
    for i in range(3):
        producer.send(f"in-{i}".encode(), transaction=txn)
    assert data(receive_all(consumer, 1)) == [b"before"]
    assert nothing_more(consumer.receive, INVISIBLE_MS)
    txn.commit()
    assert txn.state is TransactionState.COMMITTED
    assert data(receive_all(consumer, 3)) == [b"in-0", b"in-1", b"in-2"]


def test_abort_drops_the_sends(client: Client, topic_name: str) -> None:
    producer = client.create_producer(topic_name)
    consumer = shared(client, topic_name)
    txn = client.new_transaction()
    producer.send(b"dropped-0", transaction=txn)
    futures = [producer.send_future(b"dropped-1", transaction=txn)]
    futures[0].result(10)
    txn.abort()
    assert txn.state is TransactionState.ABORTED
    producer.send(b"after")
    assert data(receive_all(consumer, 1)) == [b"after"]
    assert nothing_more(consumer.receive, INVISIBLE_MS)


def test_send_async_in_a_transaction(client: Client, topic_name: str) -> None:
    producer = client.create_producer(topic_name)
    consumer = shared(client, topic_name)
    txn = client.new_transaction()
    results: list[Any] = []
    for i in range(5):
        producer.send_async(f"m-{i}".encode(), lambda result, message_id: results.append(result), transaction=txn)
    producer.flush()
    wait_until(lambda: len(results) == 5, "5 send callbacks")
    assert nothing_more(consumer.receive, INVISIBLE_MS)
    txn.commit()
    assert data(receive_all(consumer, 5)) == [f"m-{i}".encode() for i in range(5)]


def test_sends_to_several_topics_commit_together(client: Client, transaction_broker: Any, topic_name: str) -> None:
    partitioned = f"{topic_name}-partitioned"
    response = transaction_broker.admin("PUT", f"/admin/v2/persistent/public/default/{partitioned}/partitions", json=2)
    assert response.status_code in (200, 204), response.text
    plain = client.create_producer(topic_name)
    spread = client.create_producer(partitioned)
    plain_consumer, spread_consumer = shared(client, topic_name), shared(client, partitioned)
    txn = client.new_transaction()
    plain.send(b"plain", transaction=txn)
    for i in range(4):  # round robin: both partitions join the transaction
        spread.send(f"spread-{i}".encode(), partition_key=f"key-{i}", transaction=txn)
    assert nothing_more(plain_consumer.receive, INVISIBLE_MS)
    assert nothing_more(spread_consumer.receive, 300)
    txn.commit()
    assert data(receive_all(plain_consumer, 1)) == [b"plain"]
    assert sorted(data(receive_all(spread_consumer, 4))) == [f"spread-{i}".encode() for i in range(4)]


def test_transactions_are_spread_over_the_coordinators(client: Client, topic_name: str) -> None:
    producer = client.create_producer(topic_name)
    consumer = shared(client, topic_name)
    transactions = [client.new_transaction() for _ in range(2 * TRANSACTION_COORDINATORS)]
    # The most significant bits name the coordinator: each one opens transactions in turn.
    assert sorted({txn.id.most_bits for txn in transactions}) == list(range(TRANSACTION_COORDINATORS))
    assert len({txn.id for txn in transactions}) == len(transactions)
    for i, txn in enumerate(transactions):
        producer.send(f"txn-{i}".encode(), transaction=txn)
    for txn in transactions:  # every later request goes to the transaction's own coordinator
        txn.commit()
    assert sorted(data(receive_all(consumer, len(transactions)))) == sorted(f"txn-{i}".encode() for i in range(len(transactions)))


def test_acknowledgement_in_a_transaction_counts_on_commit(client: Client, transaction_broker: Any, topic_name: str) -> None:
    producer = client.create_producer(topic_name)
    for i in range(3):
        producer.send(f"m-{i}".encode())
    consumer = shared(client, topic_name)
    messages = receive_all(consumer, 3)
    txn = client.new_transaction()
    consumer.acknowledge(messages[1], transaction=txn)
    consumer.acknowledge(messages[0])
    consumer.acknowledge(messages[2])
    consumer.close()
    # Until the transaction ends, the broker holds m-1 for it: delivered to no consumer, not even a new one.
    again = shared(client, topic_name)
    assert nothing_more(again.receive, INVISIBLE_MS)
    txn.commit()
    wait_until(lambda: backlog(transaction_broker, topic_name, "sub") == 0, "an empty backlog after the commit")
    again.close()
    assert nothing_more(shared(client, topic_name).receive, INVISIBLE_MS)


def test_acknowledgement_of_one_message_of_a_batch_in_a_transaction(client: Client, transaction_broker: Any, topic_name: str) -> None:
    producer = client.create_producer(topic_name, batching_max_publish_delay_ms=1000)
    for future in [producer.send_future(f"m-{i}".encode()) for i in range(3)]:
        future.result(10)
    consumer = client.subscribe(
        topic_name, "sub", initial_position=InitialPosition.Earliest, consumer_type=ConsumerType.Shared,
        batch_index_ack_enabled=True, ack_receipt_enabled=True,
    )
    messages = receive_all(consumer, 3)
    assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in messages}) == 1  # one entry
    consumer.acknowledge(messages[0])  # once the broker confirmed it
    aborted, committed = client.new_transaction(), client.new_transaction()
    consumer.acknowledge(messages[1], transaction=aborted)
    # Each transaction holds its own index of the entry: no conflict between them.
    consumer.acknowledge(messages[2], transaction=committed)
    aborted.abort()
    committed.commit()
    # The entry comes back with only the index the aborted transaction held.
    (again,) = receive_all(consumer, 1)
    assert again.data() == b"m-1"
    assert nothing_more(consumer.receive, INVISIBLE_MS)
    consumer.acknowledge(again)
    wait_until(lambda: backlog(transaction_broker, topic_name, "sub") == 0, "an empty backlog")


def test_acknowledgement_in_an_aborted_transaction_is_redelivered(client: Client, topic_name: str) -> None:
    _, consumer, message = received_one(client, topic_name, b"only")
    txn = client.new_transaction()
    consumer.acknowledge(message, transaction=txn)
    assert nothing_more(consumer.receive, INVISIBLE_MS)  # acknowledged, pending: not redelivered
    txn.abort()
    (redelivered,) = receive_all(consumer, 1)
    assert redelivered.data() == b"only"
    assert str(redelivered.message_id()) == str(message.message_id())


def test_cumulative_acknowledgement_in_a_transaction(client: Client, transaction_broker: Any, topic_name: str) -> None:
    consumer, messages = sent_and_received(client, topic_name, 5, ConsumerType.Failover)
    aborted = client.new_transaction()
    consumer.acknowledge_cumulative(messages[3], transaction=aborted)
    aborted.abort()
    # The abort releases the acknowledgement: everything is delivered again, from the start.
    assert data(receive_all(consumer, 5)) == data(messages)
    committed = client.new_transaction()
    consumer.acknowledge_cumulative(messages[2], transaction=committed)
    committed.commit()
    wait_until(lambda: backlog(transaction_broker, topic_name, "sub") == 2, "two messages left after the commit")


def test_acknowledging_one_message_in_two_transactions_conflicts(client: Client, topic_name: str) -> None:
    _, consumer, message = received_one(client, topic_name, b"contested")
    first, second = client.new_transaction(), client.new_transaction()
    consumer.acknowledge(message, transaction=first)
    with pytest.raises(TransactionConflict):
        consumer.acknowledge(message, transaction=second)
    # As in the Java client: a transaction with a failed operation cannot commit; it is aborted instead.
    with pytest.raises(TransactionConflict, match="aborted"):
        second.commit()
    assert second.state is TransactionState.ABORTED
    first.commit()
    assert first.state is TransactionState.COMMITTED


def test_a_failed_send_makes_the_commit_abort(client: Client, topic_name: str) -> None:
    producer = client.create_producer(topic_name, batching_enabled=False)
    consumer = shared(client, topic_name)
    txn = client.new_transaction()
    producer.send(b"kept back", transaction=txn)
    with pytest.raises(MessageTooBig):
        producer.send(b"x" * (6 * 1024 * 1024), transaction=txn)  # over the broker's 5 MB
    with pytest.raises(MessageTooBig, match="aborted"):
        txn.commit()
    assert txn.state is TransactionState.ABORTED
    producer.send(b"after")
    assert data(receive_all(consumer, 1)) == [b"after"]


def test_a_transaction_times_out_and_is_aborted(client: Client, topic_name: str) -> None:
    producer = client.create_producer(topic_name)
    consumer = shared(client, topic_name)
    txn = client.new_transaction(transaction_timeout_ms=1500)
    assert txn.timeout_ms == 1500
    producer.send(b"too late", transaction=txn)
    wait_until(lambda: txn.state is TransactionState.TIME_OUT, "the transaction's timeout", timeout=5)
    with pytest.raises(InvalidTxnStatusError, match="TIME_OUT"):
        producer.send(b"more", transaction=txn)
    with pytest.raises(InvalidTxnStatusError, match="TIME_OUT"):
        txn.commit()
    # The coordinator aborted it too: what it held back is dropped, and what follows flows again.
    producer.send(b"after")
    assert data(receive_all(consumer, 1, timeout_ms=15000)) == [b"after"]
    assert nothing_more(consumer.receive, INVISIBLE_MS)


def test_a_committed_transaction_takes_no_more_operations(client: Client, topic_name: str) -> None:
    producer, consumer, message = received_one(client, topic_name, b"m")
    txn = client.new_transaction()
    txn.commit()
    with pytest.raises(InvalidTxnStatusError, match="COMMITTED"):
        producer.send(b"late", transaction=txn)
    results: list[Any] = []
    producer.send_async(b"late", lambda result, message_id: results.append(result), transaction=txn)
    assert [result.name for result in results] == ["InvalidTxnStatusError"]
    with pytest.raises(InvalidTxnStatusError):
        consumer.acknowledge(message, transaction=txn)
    with pytest.raises(InvalidTxnStatusError):
        txn.commit()
    with pytest.raises(InvalidTxnStatusError):
        txn.abort()
    assert txn.state is TransactionState.COMMITTED
    assert nothing_more(consumer.receive, INVISIBLE_MS)


def test_an_aborted_transaction_cannot_commit(client: Client) -> None:
    txn = client.new_transaction()
    txn.abort()
    with pytest.raises(InvalidTxnStatusError, match="ABORTED"):
        txn.commit()
    assert txn.state is TransactionState.ABORTED


def test_the_coordinator_refuses_to_end_a_transaction_it_does_not_know(client: Client) -> None:
    coordinator = CoordinatorClient(client)
    with pytest.raises(TransactionNotFound):
        coordinator.end(TxnId(0, 10**12), commit=True)


def test_transactions_need_the_client_option(transaction_broker: Any) -> None:
    with Client(transaction_broker.service_url, operation_timeout_seconds=10) as client:
        with pytest.raises(InvalidConfiguration, match="enable_transaction"):
            client.new_transaction()


def test_a_broker_without_coordinators_refuses_transactions(broker: Any) -> None:
    """On both brokers: our broker and the session's Apache Pulsar run no coordinator."""
    started = time.monotonic()
    with Client(broker.service_url, operation_timeout_seconds=5, enable_transaction=True) as client:
        with pytest.raises(TransactionCoordinatorNotFoundError, match="transaction_coordinator_assign"):
            client.new_transaction()
    assert time.monotonic() - started < 10
    response = broker.admin("GET", "/admin/v3/transactions/coordinatorStats")
    assert response.status_code == 503
    assert response.json()["reason"] == "This Broker is not configured with transactionCoordinatorEnabled=true."
