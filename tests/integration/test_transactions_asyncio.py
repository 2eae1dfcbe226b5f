"""Transactions through the asyncio API (``airflow_pulsar.client.asyncio``), against a broker with
transaction coordinators (``transaction_broker``: ours or Apache Pulsar, each with coordinators)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.client import ConsumerType, TransactionState
from airflow_pulsar.client import asyncio as pulsar_asyncio
from airflow_pulsar.client.exceptions import InvalidTxnStatusError, Result

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "transactions"


async def receive_or_none(consumer: pulsar_asyncio.Consumer, timeout_ms: int) -> bytes | None:
    try:
        return (await consumer.receive(timeout_ms)).data()
    except pulsar_asyncio.PulsarException as exc:
        assert exc.error() is Result.Timeout
        return None


def test_commit_and_abort(transaction_broker: Any, topic_name: str) -> None:
    async def scenario() -> None:
        client = pulsar_asyncio.Client(transaction_broker.service_url, operation_timeout_seconds=10, enable_transaction=True)
        producer = await client.create_producer(topic_name)
        consumer = await client.subscribe(
            topic_name, "sub", initial_position=pulsar_asyncio.InitialPosition.Earliest, consumer_type=ConsumerType.Shared
        )
        aborted = await client.new_transaction()
        await producer.send(b"aborted", transaction=aborted)
        await aborted.abort()
        committed = await client.new_transaction()
        await asyncio.gather(*(producer.send(f"m-{i}".encode(), transaction=committed) for i in range(3)))
        assert await receive_or_none(consumer, 1000) is None
        await committed.commit()
        assert (aborted.state, committed.state) == (TransactionState.ABORTED, TransactionState.COMMITTED)
        received = sorted([(await consumer.receive(10_000)).data() for _ in range(3)])
        assert received == [b"m-0", b"m-1", b"m-2"]
        with pytest.raises(pulsar_asyncio.PulsarException) as raised:
            await producer.send(b"late", transaction=committed)
        assert isinstance(raised.value.__cause__, InvalidTxnStatusError)
        await client.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_acknowledgements(transaction_broker: Any, topic_name: str) -> None:
    async def scenario() -> None:
        client = pulsar_asyncio.Client(transaction_broker.service_url, operation_timeout_seconds=10, enable_transaction=True)
        producer = await client.create_producer(topic_name, batching_enabled=False)
        for i in range(3):
            await producer.send(f"m-{i}".encode())
        consumer = await client.subscribe(topic_name, "sub", initial_position=pulsar_asyncio.InitialPosition.Earliest)
        messages = [await consumer.receive(10_000) for _ in range(3)]
        released = await client.new_transaction()
        await consumer.acknowledge_cumulative(messages[2], transaction=released)
        await released.abort()
        assert [(await consumer.receive(10_000)).data() for _ in range(3)] == [b"m-0", b"m-1", b"m-2"]
        kept = await client.new_transaction()
        await consumer.acknowledge(messages[0], transaction=kept)
        await kept.commit()
        await consumer.close()
        again = await client.subscribe(topic_name, "sub")
        assert [(await again.receive(10_000)).data() for _ in range(2)] == [b"m-1", b"m-2"]
        await client.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


@pytest.mark.parametrize("script", sorted(path.name for path in EXAMPLES.glob("*.py")))
def test_docs_example_runs(transaction_broker: Any, script: str) -> None:
    """The examples docs/transactions.md includes, run as scripts as a reader would run them."""
    result = subprocess.run(
        [sys.executable, EXAMPLES / script],
        env={**os.environ, "PULSAR_SERVICE_URL": transaction_broker.service_url},
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    expected = {
        "consume_transform_produce.py": "['ORDER-0', 'ORDER-1', 'ORDER-2']",
        "asyncio_transaction.py": "COMMITTED [b'debit', b'credit']",
    }
    assert expected[script] in result.stdout
