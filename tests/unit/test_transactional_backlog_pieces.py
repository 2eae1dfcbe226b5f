"""The pieces of the transactional backlog count that need no broker: which entries it looks at
across ledgers, and what an entry's headers (as Apache Pulsar 4.2.4 sends them) say a consumer
receives of it. tests/integration/test_transactional_backlog.py counts on both brokers."""

from __future__ import annotations

import httpx
import pytest

from airflow_pulsar.client.admin.calls import UnexpectedResponse
from airflow_pulsar.client.admin.transactional_backlog import decode_delivered_messages, entries_between, holds_transactions
from airflow_pulsar.client.message_count import Position

P = Position


def test_the_entries_after_the_mark_delete_through_the_max_read_position_across_ledgers() -> None:
    ledgers = [(3, 5), (5, 0), (7, 4), (9, 3)]  # ledger 5 holds no entry
    assert list(entries_between(P(3, 2), P(7, 1), ledgers)) == [P(3, 3), P(3, 4), P(7, 0), P(7, 1)]
    assert list(entries_between(P(7, -1), P(7, 1), ledgers)) == [P(7, 0), P(7, 1)]
    assert list(entries_between(P(9, 2), P(9, 2), ledgers)) == []
    assert list(entries_between(P(9, 2), P(7, 3), ledgers)) == []  # acknowledged past the max read position


@pytest.mark.parametrize(
    ("headers", "messages"),
    [
        ({}, 1),
        ({"X-Pulsar-num-batch-message": "5"}, 5),
        ({"X-Pulsar-num-batch-message": "5", "X-Pulsar-txnid-most-bits": "1", "X-Pulsar-txn-aborted": "false"}, 5),
        ({"X-Pulsar-txnid-most-bits": "1", "X-Pulsar-txn-aborted": "true"}, 0),
        ({"X-Pulsar-marker-type": "21", "X-Pulsar-txn-aborted": "false"}, 0),
        ({"X-Pulsar-marker-type": "22", "X-Pulsar-txn-aborted": "true"}, 0),
        ({"X-Pulsar-txn-uncommitted": "true"}, 0),
    ],
)
def test_an_entry_delivers_its_messages_unless_a_marker_aborted_or_uncommitted(headers: dict, messages: int) -> None:
    assert decode_delivered_messages(httpx.Response(200, headers=headers)) == messages


def test_unreadable_batch_headers_are_refused() -> None:
    with pytest.raises(UnexpectedResponse, match="num-batch-message"):
        decode_delivered_messages(httpx.Response(200, headers={"X-Pulsar-num-batch-message": "many"}))


def test_a_partition_holds_transactions_when_its_stats_count_any() -> None:
    assert not holds_transactions({"msgInCounter": 4})
    assert not holds_transactions({"ongoingTxnCount": 0, "committedTxnCount": 0, "abortedTxnCount": 0})
    assert holds_transactions({"ongoingTxnCount": 0, "committedTxnCount": 2, "abortedTxnCount": 0})
