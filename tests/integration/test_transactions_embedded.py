"""Transactions on our broker alone: what its own option changes, which Apache Pulsar sets otherwise
(its coordinator count lives in the cluster's metadata, not in a broker option)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_pulsar.client import Client, ConsumerType, InitialPosition
from tests.support.consumer_checks import data, receive_all


@pytest.mark.embedded_only
def test_a_coordinator_dropped_at_a_restart_still_aborts_what_it_left_open(broker_factory: Any, topic_name: str) -> None:
    """Restarted with fewer ``--transaction-coordinators``, the broker still times out the open
    transactions its log holds for a coordinator it no longer runs, so they block no topic."""
    broker = broker_factory("--transaction-coordinators", "2")
    with Client(broker.service_url, operation_timeout_seconds=10, enable_transaction=True) as client:
        producer = client.create_producer(topic_name, batching_enabled=False)
        client.subscribe(topic_name, "sub", initial_position=InitialPosition.Earliest, consumer_type=ConsumerType.Shared).close()
        on_second = [client.new_transaction(transaction_timeout_ms=3000) for _ in range(2)][1]
        assert on_second.id.coordinator_id == 1
        producer.send(b"left open", transaction=on_second)
    broker.extra_args = ["--transaction-coordinators", "1"]
    broker.restart()
    with Client(broker.service_url, operation_timeout_seconds=10, enable_transaction=True) as client:
        consumer = client.subscribe(topic_name, "sub", consumer_type=ConsumerType.Shared)
        client.create_producer(topic_name).send(b"after")
        assert data(receive_all(consumer, 1, timeout_ms=20_000)) == [b"after"]
