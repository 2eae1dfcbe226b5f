"""Helpers of the transaction tests (tests/integration/test_transactions*.py)."""

from __future__ import annotations

from typing import Any

from airflow_pulsar.client import Client, InitialPosition
from tests.support.consumer_checks import receive_all


def sent_and_received(client: Client, topic: str, count: int, consumer_type: Any) -> tuple[Any, list[Any]]:
    """``m-0``..``m-{count-1}`` sent one entry each, and a consumer of ``consumer_type`` that received them all."""
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(count):
        producer.send(f"m-{i}".encode())
    consumer = client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest, consumer_type=consumer_type)
    return consumer, receive_all(consumer, count)
