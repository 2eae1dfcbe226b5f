"""Ingesting a topic with transactions, on both brokers (``transaction_broker``): a run takes the
plain and committed messages, never an aborted one, and stops at the max read position, before an
open transaction, acknowledging the markers and aborted messages up to it; the backlog count is
then zero; once the transaction commits, the next run takes its messages and
those that waited behind it, each row once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from airflow_pulsar.spark.job.columns import RowBatchBuilder
from airflow_pulsar.spark.job.plan import Position, ReadRange
from airflow_pulsar.spark.job.source import arrow_schema, read_range_batches
from airflow_pulsar.spark.planning.read_limits import max_read_positions
from tests.support.polling import wait_until
from tests.support.spark_ingest import (
    BYTES_ROWS,
    LOCAL_SPARK_CONF,
    SEVERAL_JOBS_TIMEOUT,
    VALUE_SCHEMA,
    Catalog,
    assert_exactly_once,
)
from tests.support.transactions import MAX_READ_ENTRY, TRANSACTIONAL_LOG, transactional_topic

pytestmark = [SEVERAL_JOBS_TIMEOUT]

SUBSCRIPTION = "to-table"


def ingest(catalog: Catalog, topic: str) -> dict[str, Any]:
    """One run of the operator into the table ``events``, as a task would run it."""
    return PulsarToTableOperator(
        task_id="ingest",
        topics=topic,
        subscription=SUBSCRIPTION,
        table="events",
        value_format="json",
        value_schema=VALUE_SCHEMA,
        conf=LOCAL_SPARK_CONF,
        **catalog.operator_args(),
    ).execute(context={})


def assert_no_backlog(admin: PulsarAdmin, topic: str) -> None:
    """The subscription's backlog counts no message: the acknowledgement covered every one a
    consumer can receive (given a moment for the cursor's stats to show it)."""
    wait_until(lambda: admin.message_backlog(topic, SUBSCRIPTION).messages == 0, "an empty backlog", timeout=5)


def test_ingest_stops_before_an_open_transaction_and_takes_it_once_committed(
    transaction_broker: Any, monkeypatch: pytest.MonkeyPatch, catalog: Catalog, topic_name: str
) -> None:
    conn = {"conn_type": "pulsar", "host": transaction_broker.service_url, "extra": {"admin_url": transaction_broker.web_url}}
    monkeypatch.setenv("AIRFLOW_CONN_PULSAR_DEFAULT", json.dumps(conn))
    with Client(transaction_broker.service_url, enable_transaction=True) as client, PulsarAdmin(transaction_broker.web_url) as admin:
        client.subscribe(topic_name, SUBSCRIPTION).close()
        topic = transactional_topic(client, topic_name)

        first = ingest(catalog, topic_name)

        assert first["total_rows"] == len(topic.visible)
        assert_exactly_once(catalog.rows("events"), range(len(topic.visible)))
        (planned,) = first["ranges"]
        ledger = planned["after"].split(":")[0]
        # Through the max read position: past the last message received, the trailing aborted
        # message and its marker, but not into the open transaction.
        assert planned["through"] == f"{ledger}:{MAX_READ_ENTRY}"
        assert admin.internal_stats(topic_name)["cursors"][SUBSCRIPTION]["markDeletePosition"] == planned["through"]
        assert_no_backlog(admin, topic_name)
        # What Pulsar still counts as backlog is the open transaction's entry and the one behind it.
        assert admin.backlog(topic_name, SUBSCRIPTION).msg_backlog == len(TRANSACTIONAL_LOG) - MAX_READ_ENTRY - 1

        topic.open_transaction.commit()
        assert admin.message_backlog(topic_name, SUBSCRIPTION).messages == len(topic.after_commit)
        second = ingest(catalog, topic_name)

        assert second["total_rows"] == len(topic.after_commit)
        assert second["ranges"][0]["after"] == planned["through"]
        assert_exactly_once(catalog.rows("events"), range(len(topic.visible) + len(topic.after_commit)))
        assert_no_backlog(admin, topic_name)


@pytest.mark.parametrize(
    ("after", "last", "entries"),
    [
        (-1, MAX_READ_ENTRY, [0, 1, 3, 6]),  # ends with an aborted message and its marker
        (1, 5, [3]),  # ends with two markers: the next message, 6, is past the range
        (6, MAX_READ_ENTRY, []),  # nothing but an aborted message and its marker
    ],
)
def test_a_range_ending_with_entries_no_reader_is_given_still_ends(
    transaction_broker: Any, topic_name: str, after: int, last: int, entries: list[int]
) -> None:
    with Client(transaction_broker.service_url, enable_transaction=True) as client:
        transactional_topic(client, topic_name)
        (partition_last,) = (ids[0] for ids in client.subscribe(topic_name, "look").get_last_message_ids().values())
        ledger, last_message = partition_last.ledger_id(), Position.of(partition_last)
        assert last_message == Position(ledger, 6)  # both brokers: the last message a reader is given
        with PulsarAdmin(transaction_broker.web_url) as admin:
            partition = f"persistent://public/default/{topic_name}"
            assert max_read_positions(admin, [partition]) == {partition: Position(ledger, MAX_READ_ENTRY)}
        read_range = ReadRange(topic_name, -1, Position(ledger, after), Position(ledger, last), None, last_message)
        builder = RowBatchBuilder(arrow_schema(BYTES_ROWS), "bytes", topic_name, -1, "b")
        # A short timeout: a range that waited for entries never given would fail.
        batches = list(read_range_batches(client, read_range, builder, 2))
    read = [row["message_id"]["entry_id"] for batch in batches for row in batch.to_pylist()]
    assert read == entries
