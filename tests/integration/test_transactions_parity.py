"""Transactions as the broker shows them, the same on our broker and on Apache Pulsar: the entries
a transaction's end adds (its markers take message ids), the backlog counts with those markers, the
transaction counts in a topic's stats, readers that see nothing at or past an open transaction, and
a committed transaction that survives the broker's restart and kill -9 while an open one is aborted
after its timeout.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from airflow_pulsar.client import Client, ConsumerType, InitialPosition, MessageId
from airflow_pulsar.client.exceptions import TransactionConflict, TransactionCoordinatorNotFoundError, TransactionNotFound
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand
from airflow_pulsar.client.transaction import COORDINATOR_ASSIGN_TOPIC, CoordinatorClient
from tests.conftest import TRANSACTION_COORDINATORS
from tests.support.consumer_checks import backlog, data, nothing_more, receive_all
from tests.support.polling import wait_until
from tests.support.transactions import sent_and_received

INVISIBLE_MS = 1000


@pytest.fixture
def client(transaction_broker: Any) -> Iterator[Client]:
    client = Client(transaction_broker.service_url, operation_timeout_seconds=30, enable_transaction=True)
    yield client
    client.close()


def entry_ids(messages: list[Any]) -> list[int]:
    """Each message's entry id, counted from the first one's."""
    first = messages[0].message_id().entry_id()
    return [m.message_id().entry_id() - first for m in messages]


def unbatched_producer_and_consumer(client: Client, topic: str) -> tuple[Any, Any]:
    """A producer sending each message as an entry, and an Exclusive consumer from the earliest."""
    return client.create_producer(topic, batching_enabled=False), client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)


def a_transaction_between_two_messages(client: Client, topic: str) -> tuple[Any, Any]:
    """An Exclusive consumer that received "before", and the open transaction that holds back
    its message "in" and the "after" sent next."""
    producer, consumer = unbatched_producer_and_consumer(client, topic)
    producer.send(b"before")
    txn = client.new_transaction()
    producer.send(b"in", transaction=txn)
    producer.send(b"after")
    assert data(receive_all(consumer, 1)) == [b"before"]
    return consumer, txn


def subscription_stats(broker: Any, topic: str, subscription: str = "sub") -> dict[str, Any]:
    return broker.topic_stats(topic)["subscriptions"][subscription]


def test_markers_take_message_ids(client: Client, topic_name: str) -> None:
    """A commit or an abort appends one marker entry; an aborted transaction's entries stay in the log."""
    producer, consumer = unbatched_producer_and_consumer(client, topic_name)
    producer.send(b"plain-0")
    committed = client.new_transaction()
    producer.send(b"committed-0", transaction=committed)
    producer.send(b"committed-1", transaction=committed)
    committed.commit()
    producer.send(b"plain-1")
    aborted = client.new_transaction()
    producer.send(b"aborted", transaction=aborted)
    aborted.abort()
    producer.send(b"plain-2")
    messages = receive_all(consumer, 5)
    assert data(messages) == [b"plain-0", b"committed-0", b"committed-1", b"plain-1", b"plain-2"]
    # 0, 1-2 in the transaction, 3 its commit marker, 4, 5 aborted, 6 its abort marker, 7
    assert entry_ids(messages) == [0, 1, 2, 4, 7]


def test_backlog_counts_the_transaction_entries_and_markers(client: Client, transaction_broker: Any, topic_name: str) -> None:
    producer = client.create_producer(topic_name, batching_enabled=False)
    client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest).close()
    txn = client.new_transaction()
    for i in range(3):
        producer.send(f"m-{i}".encode(), transaction=txn)
    stats = transaction_broker.topic_stats(topic_name)
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 3  # held back, yet counted
    assert stats["msgInCounter"] == 3
    stored = stats["storageSize"]
    txn.commit()
    stats = transaction_broker.topic_stats(topic_name)
    # The marker entry as Pulsar stores it: its metadata (the transaction's id in varints), the
    # checksum header and the broker entry index.
    assert stats["storageSize"] - stored == 62 + sum(max(1, (bits.bit_length() + 6) // 7) for bits in txn.id)
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 4  # with the commit marker
    assert stats["msgInCounter"] == 3  # the marker is no message in
    # The broker entry index counts the marker as a message; message_backlog counts what a consumer receives.
    assert backlog(transaction_broker, topic_name, "sub") == 3
    aborted = client.new_transaction()
    producer.send(b"dropped", transaction=aborted)
    aborted.abort()
    assert subscription_stats(transaction_broker, topic_name)["msgBacklog"] == 6
    assert backlog(transaction_broker, topic_name, "sub") == 3  # not the aborted message, nor either marker
    consumer = client.subscribe(topic_name, "sub", consumer_type=ConsumerType.Shared)
    for message in receive_all(consumer, 3):
        consumer.acknowledge(message)
    # The dispatcher acknowledged the markers and the aborted entry as it read past them.
    wait_until(lambda: subscription_stats(transaction_broker, topic_name)["msgBacklog"] == 0, "an empty backlog")
    assert nothing_more(consumer.receive, INVISIBLE_MS)


def test_topic_stats_count_transactions(client: Client, transaction_broker: Any, topic_name: str) -> None:
    producer = client.create_producer(topic_name, batching_enabled=False)
    open_one, committed, aborted = client.new_transaction(), client.new_transaction(), client.new_transaction()
    for txn in (open_one, committed, aborted):
        producer.send(b"m", transaction=txn)
    committed.commit()
    aborted.abort()
    stats = transaction_broker.topic_stats(topic_name)
    assert (stats["ongoingTxnCount"], stats["committedTxnCount"], stats["abortedTxnCount"]) == (1, 1, 1)
    open_one.abort()


def test_an_open_transaction_holds_back_what_follows(client: Client, topic_name: str) -> None:
    """Nothing after the first entry of an open transaction is delivered, sent in it or not (Pulsar's max read position)."""
    consumer, txn = a_transaction_between_two_messages(client, topic_name)
    assert nothing_more(consumer.receive, INVISIBLE_MS)
    txn.commit()
    assert data(receive_all(consumer, 2)) == [b"in", b"after"]


def test_readers_see_only_committed_messages(client: Client, topic_name: str) -> None:
    producer = client.create_producer(topic_name, batching_enabled=False)
    producer.send(b"before")
    txn = client.new_transaction()
    producer.send(b"in", transaction=txn)
    reader = client.create_reader(topic_name, MessageId.earliest)
    assert data([reader.read_next(5000)]) == [b"before"]
    assert not reader.has_message_available()  # the last message id stops before the open transaction
    txn.commit()
    wait_until(reader.has_message_available, "the committed message available")
    assert data([reader.read_next(5000)]) == [b"in"]
    aborted = client.new_transaction()
    producer.send(b"dropped", transaction=aborted)
    aborted.abort()
    assert not reader.has_message_available()  # an aborted message and the markers are nothing to read
    reader.close()


@pytest.mark.parametrize("crash", [False, True], ids=["restart", "kill-9"])
def test_a_committed_transaction_survives_the_broker_and_an_open_one_times_out(
    transaction_broker: Any, topic_name: str, crash: bool
) -> None:
    with Client(transaction_broker.service_url, operation_timeout_seconds=30, enable_transaction=True) as client:
        producer = client.create_producer(topic_name, batching_enabled=False)
        client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest, consumer_type=ConsumerType.Shared).close()
        committed = client.new_transaction()
        producer.send(b"committed", transaction=committed)
        committed.commit()
        left_open = client.new_transaction(transaction_timeout_ms=5000)
        producer.send(b"left open", transaction=left_open)
    transaction_broker.restart(crash=crash)
    with Client(transaction_broker.service_url, operation_timeout_seconds=30, enable_transaction=True) as client:
        # Apache Pulsar loads a coordinator's log when a client first connects to it: one transaction
        # on each coordinator brings the one that times the open transaction out (ours loads at start).
        for _ in range(TRANSACTION_COORDINATORS):
            client.new_transaction().abort()
        consumer = client.subscribe(topic_name, "sub", consumer_type=ConsumerType.Shared)
        assert data(receive_all(consumer, 1, timeout_ms=30_000)) == [b"committed"]
        producer = client.create_producer(topic_name, batching_enabled=False)
        producer.send(b"after")
        # The open transaction blocks what follows until its coordinator aborts it at its timeout.
        assert data(receive_all(consumer, 1, timeout_ms=60_000)) == [b"after"]
        assert nothing_more(consumer.receive, INVISIBLE_MS)


def test_admin_shows_transactions(client: Client, transaction_broker: Any, topic_name: str) -> None:
    """``/admin/v3/transactions``: a coordinator's stats, an open transaction's metadata, the topic's
    transaction buffer and the subscription's pending acknowledgements; an ended transaction is forgotten."""
    topic = f"persistent://public/default/{topic_name}"
    producer, consumer = unbatched_producer_and_consumer(client, topic_name)
    producer.send(b"plain")
    (message,) = receive_all(consumer, 1)
    txn = client.new_transaction(transaction_timeout_ms=60_000)
    sent = producer.send(b"in", transaction=txn)
    consumer.acknowledge(message, transaction=txn)
    ledger, entry = sent.ledger_id(), sent.entry_id()
    most, least = txn.id.most_bits, txn.id.least_bits

    def get(path: str) -> Any:
        response = transaction_broker.admin("GET", f"/admin/v3/transactions/{path}")
        assert response.status_code == 200, response.text
        return response.json()

    stats = get(f"coordinatorStats?coordinatorId={most}")
    assert stats["state"] == "Ready" and stats["ongoingTxnSize"] >= 1 and stats["leastSigBits"] >= least
    metadata = get(f"transactionMetadata/{most}/{least}")
    assert {k: metadata[k] for k in ("txnId", "status", "timeoutAt", "producedPartitions", "ackedPartitions")} == {
        "txnId": f"({most},{least})",
        "status": "OPEN",
        "timeoutAt": 60_000,
        "producedPartitions": {topic: {"startPosition": f"{ledger}:{entry}", "aborted": False}},
        "ackedPartitions": {topic: {"sub": {}}},
    }
    buffer = get(f"transactionBufferStats/public/default/{topic_name}")
    assert (buffer["state"], buffer["maxReadPosition"], buffer["ongoingTxnSize"]) == ("Ready", f"{ledger}:{entry - 1}", 1)
    assert get(f"transactionInBufferStats/public/default/{topic_name}/{most}/{least}") == {
        "startPosition": f"{ledger}:{entry}", "aborted": False,
    }
    assert {k: v for k, v in get(f"pendingAckStats/public/default/{topic_name}/sub").items() if k in ("state", "ongoingTxnSize")} == {
        "state": "Ready", "ongoingTxnSize": 1,
    }
    txn.abort()
    assert get(f"transactionInBufferStats/public/default/{topic_name}/{most}/{least}") == {"aborted": True}
    gone = transaction_broker.admin("GET", f"/admin/v3/transactions/transactionMetadata/{most}/{least}")
    assert (gone.status_code, gone.json()["reason"]) == (404, f"The transaction with this txdID `({most},{least})`not found ")
    unknown = transaction_broker.admin("GET", "/admin/v3/transactions/transactionMetadata/99/0")
    assert (unknown.status_code, unknown.json()["reason"]) == (404, "Transaction coordinator with id 99 not found!")


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_pending_acknowledgement_survives_a_kill(transaction_broker: Any, topic_name: str, commit: bool) -> None:
    """A message acknowledged in an open transaction stays held through kill -9; the commit after
    it applies the acknowledgement, the abort gives the message back."""
    with Client(transaction_broker.service_url, operation_timeout_seconds=30, enable_transaction=True) as client:
        producer = client.create_producer(topic_name, batching_enabled=False)
        consumer = client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest, consumer_type=ConsumerType.Shared)
        producer.send(b"held")
        producer.send(b"free")
        held, free = receive_all(consumer, 2)
        txn = client.new_transaction(transaction_timeout_ms=120_000)
        consumer.acknowledge(held, transaction=txn)
        txn_id = txn.id
    transaction_broker.restart(crash=True)
    with Client(transaction_broker.service_url, operation_timeout_seconds=30, enable_transaction=True) as client:
        consumer = client.subscribe(topic_name, "sub", consumer_type=ConsumerType.Shared)
        assert data(receive_all(consumer, 1, timeout_ms=30_000)) == [b"free"]  # "held" is not redelivered
        assert nothing_more(consumer.receive, INVISIBLE_MS)
        CoordinatorClient(client).end(txn_id, commit=commit)
        assert data(receive_all(consumer, 0 if commit else 1, timeout_ms=30_000)) == ([] if commit else [b"held"])
        assert nothing_more(consumer.receive, INVISIBLE_MS)


def test_acknowledgements_beside_a_transaction(client: Client, transaction_broker: Any, topic_name: str) -> None:
    """A transaction's acknowledgement takes the message off its consumer's unacknowledged count but
    not off the backlog; acknowledging it again in the same transaction, or acknowledging in a
    transaction a message already acknowledged, conflicts; a plain acknowledgement of a message a
    transaction holds stands when that transaction aborts."""
    producer = client.create_producer(topic_name, batching_enabled=False)
    for i in range(2):
        producer.send(f"m-{i}".encode())
    consumer = client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest, consumer_type=ConsumerType.Shared)
    first, second = receive_all(consumer, 2)
    txn = client.new_transaction()
    consumer.acknowledge(first, transaction=txn)
    stats = subscription_stats(transaction_broker, topic_name)
    assert (stats["unackedMessages"], stats["consumers"][0]["unackedMessages"], stats["msgBacklog"]) == (1, 1, 2)
    with pytest.raises(TransactionConflict):
        consumer.acknowledge(first, transaction=txn)
    consumer.acknowledge(second)
    wait_until(lambda: subscription_stats(transaction_broker, topic_name)["msgBacklog"] == 1, "the plain acknowledgement")
    with pytest.raises(TransactionConflict):
        consumer.acknowledge(second, transaction=client.new_transaction())
    consumer.acknowledge(first)
    wait_until(lambda: subscription_stats(transaction_broker, topic_name)["msgBacklog"] == 0, "the plain acknowledgement")
    txn.abort()
    assert nothing_more(consumer.receive, INVISIBLE_MS)


def test_the_official_client_reads_only_committed_messages(client: Client, transaction_broker: Any, topic_name: str) -> None:
    """The official client (which has no transactions) consumes a topic our client wrote in
    transactions: the committed messages in order, no marker, nothing aborted."""
    producer = client.create_producer(topic_name, batching_enabled=False)
    committed, aborted = client.new_transaction(), client.new_transaction()
    producer.send(b"aborted", transaction=aborted)
    producer.send(b"committed", transaction=committed)
    producer.send(b"plain")
    aborted.abort()
    committed.commit()
    official = pulsar.Client(transaction_broker.service_url, operation_timeout_seconds=30)
    try:
        consumer = official.subscribe(topic_name, "official", initial_position=pulsar.InitialPosition.Earliest)
        assert [consumer.receive(10_000).data() for _ in range(2)] == [b"committed", b"plain"]
        with pytest.raises(pulsar.Timeout):
            consumer.receive(INVISIBLE_MS)
    finally:
        official.close()


def test_the_coordinators_refusals(client: Client) -> None:
    """Pulsar's codes: an ended transaction is not found, nor is a coordinator the cluster does not run."""
    ended = client.new_transaction()
    ended.abort()
    coordinator = CoordinatorClient(client)
    with pytest.raises(TransactionNotFound):
        coordinator.end(ended.id, commit=True)
    with pytest.raises(TransactionNotFound):
        coordinator.add_partition(ended.id, "persistent://public/default/any")
    with pytest.raises(TransactionNotFound):
        coordinator.add_subscription(ended.id, "persistent://public/default/any", "sub")
    connection = client.lookup(f"{COORDINATOR_ASSIGN_TOPIC}-partition-0")
    with pytest.raises(TransactionCoordinatorNotFoundError):
        connection.call(BaseCommand.NEW_TXN, 10, tc_id=99, txn_ttl_seconds=10_000)


def test_an_abort_redelivers_what_it_had_acknowledged(client: Client, topic_name: str) -> None:
    """As Pulsar: the released message comes back counted as a redelivery, and a batch its consumer
    still held (one index acknowledged in the transaction) comes back with every unacknowledged index."""
    producer = client.create_producer(topic_name, batching_max_publish_delay_ms=1000)
    for future in [producer.send_future(f"m-{i}".encode()) for i in range(2)]:
        future.result(10)
    producer.send(b"single")
    consumer = client.subscribe(
        topic_name, "sub", initial_position=InitialPosition.Earliest, consumer_type=ConsumerType.Shared,
        batch_index_ack_enabled=True, ack_receipt_enabled=True,
    )
    first, second, single = receive_all(consumer, 3)
    txn = client.new_transaction()
    consumer.acknowledge(second, transaction=txn)
    consumer.acknowledge(single, transaction=txn)
    txn.abort()
    again = receive_all(consumer, 3)
    assert sorted((m.data(), m.redelivery_count()) for m in again) == [(b"m-0", 1), (b"m-1", 1), (b"single", 1)]
    assert nothing_more(consumer.receive, INVISIBLE_MS)


def test_a_cumulative_acknowledgement_in_a_transaction_holds_nothing_back(
    client: Client, transaction_broker: Any, topic_name: str
) -> None:
    """Unlike a message acknowledged individually in a transaction, those a transaction acknowledged
    cumulatively go to the next consumer while it is open; the commit acknowledges them."""
    consumer, messages = sent_and_received(client, topic_name, 4, ConsumerType.Failover)
    txn = client.new_transaction()
    consumer.acknowledge_cumulative(messages[2], transaction=txn)
    consumer.close()
    again = client.subscribe(topic_name, "sub", consumer_type=ConsumerType.Failover)
    assert data(receive_all(again, 4)) == data(messages)
    txn.commit()
    wait_until(lambda: subscription_stats(transaction_broker, topic_name)["msgBacklog"] == 1, "m-3 left after the commit")


def test_a_partition_registered_without_sends_gets_a_marker(client: Client, transaction_broker: Any, topic_name: str) -> None:
    producer = client.create_producer(topic_name, batching_enabled=False)
    first = producer.send(b"a")
    txn = client.new_transaction()
    CoordinatorClient(client).add_partition(txn.id, f"persistent://public/default/{topic_name}")
    txn.commit()
    assert producer.send(b"b").entry_id() - first.entry_id() == 2
    assert transaction_broker.topic_stats(topic_name)["committedTxnCount"] == 1


def test_a_timed_out_transaction_gives_back_its_acknowledgements(client: Client, topic_name: str) -> None:
    producer = client.create_producer(topic_name, batching_enabled=False)
    producer.send(b"held")
    consumer = client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest, consumer_type=ConsumerType.Shared)
    (message,) = receive_all(consumer, 1)
    consumer.acknowledge(message, transaction=client.new_transaction(transaction_timeout_ms=1500))
    (again,) = receive_all(consumer, 1, timeout_ms=15_000)
    assert (again.data(), again.redelivery_count()) == (b"held", 1)


def test_a_seek_does_not_pass_an_open_transaction(client: Client, topic_name: str) -> None:
    consumer, txn = a_transaction_between_two_messages(client, topic_name)
    consumer.seek(MessageId.earliest)
    assert data(receive_all(consumer, 1)) == [b"before"]
    assert nothing_more(consumer.receive, INVISIBLE_MS)
    txn.abort()
    (after,) = receive_all(consumer, 1)
    assert after.data() == b"after"
    # The last message id is the last message to read, not the abort marker after it.
    assert consumer.get_last_message_id().entry_id() == after.message_id().entry_id()


def test_partitioned_stats_show_the_last_partitions_transaction_counts(client: Client, transaction_broker: Any, topic_name: str) -> None:
    """As Pulsar adds partitions' stats up: the transaction counts are not summed, the last partition's stand."""
    response = transaction_broker.admin("PUT", f"/admin/v2/persistent/public/default/{topic_name}/partitions", json=2)
    assert response.status_code in (200, 204), response.text
    first, second = (client.create_producer(f"{topic_name}-partition-{i}", batching_enabled=False) for i in range(2))
    transactions = [client.new_transaction() for _ in range(3)]
    first.send(b"m", transaction=transactions[0])
    first.send(b"m", transaction=transactions[1])
    second.send(b"m", transaction=transactions[2])
    stats = transaction_broker.admin("GET", f"/admin/v2/persistent/public/default/{topic_name}/partitioned-stats").json()
    assert (stats["msgInCounter"], stats["ongoingTxnCount"]) == (3, 1)
    for txn in transactions:
        txn.abort()
