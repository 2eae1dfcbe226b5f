"""A client made before ``os.fork()``: the child reconnects, the parent carries on undisturbed.

What the parent opened on the client (producers, consumers, readers) is the parent's: in the child
each refuses with AlreadyClosed naming the fix, and closing it there says nothing to the broker, so
the parent's producer and consumer keep working. The children are plain ``os.fork()`` children and
the workers of a ``multiprocessing`` pool with the fork start method (as Celery's prefork pool and
Airflow's LocalExecutor make them); a child that hangs is killed and fails the test.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.client import AlreadyClosed, Client, ConsumerType, MessageId, Result
from airflow_pulsar.client import asyncio as pulsar_asyncio
from tests.support.forked import run_forked
from tests.support.polling import wait_until

pytestmark = pytest.mark.timeout(300)


def _topic() -> str:
    return f"persistent://public/default/forks-{uuid.uuid4().hex[:10]}"


def _receive_all(consumer: Any, count: int) -> list[bytes]:
    received = []
    for _ in range(count):
        message = consumer.receive(10_000)
        consumer.acknowledge(message)
        received.append(message.data())
    return received


@pytest.fixture
def client(broker: Any) -> Any:
    client = Client(broker.service_url, operation_timeout_seconds=10, connection_timeout_ms=3000)
    yield client
    client.close()


def _parent_connections(client: Client) -> list[Any]:
    return list(client._pool.values())


def test_the_child_sends_on_the_inherited_client_and_the_parent_keeps_its_sessions(client: Client) -> None:
    topic = _topic()
    consumer = client.subscribe(topic, "forks", consumer_type=ConsumerType.Shared)
    producer = client.create_producer(topic)
    producer.send(b"parent-before")
    connections = _parent_connections(client)

    def child() -> list[str]:
        with client.create_producer(topic) as own:
            return [str(own.send(f"child-{i}".encode())) for i in range(5)]

    sent_by_child = run_forked(child)

    assert len(sent_by_child) == 5
    # The parent's connections are the ones it had: the child neither closed nor used them.
    assert _parent_connections(client) == connections and not any(c.closed for c in connections)
    assert producer.is_connected() and consumer.is_connected()
    producer.send(b"parent-after")
    received = _receive_all(consumer, 7)
    assert sorted(received) == sorted([b"parent-before", b"parent-after", *(f"child-{i}".encode() for i in range(5))])


def test_inherited_producer_consumer_reader_and_table_view_refuse_in_the_child_and_stay_the_parents(client: Client) -> None:
    topic = _topic()
    consumer = client.subscribe(topic, "forks", consumer_type=ConsumerType.Exclusive)
    producer = client.create_producer(topic)
    reader = client.create_reader(topic, MessageId.earliest)
    table = client.create_table_view(topic)
    producer.send(b"before", partition_key="k")

    def child() -> dict[str, Any]:
        refusals: dict[str, Any] = {}
        for name, call in (
            ("send", lambda: producer.send(b"from-child")),
            ("flush", producer.flush),
            ("receive", lambda: consumer.receive(1000)),
            ("acknowledge", lambda: consumer.acknowledge(MessageId.earliest)),
            ("read_next", lambda: reader.read_next(1000)),
            ("has_message_available", reader.has_message_available),
            ("table get", lambda: table.get("k")),
            ("table for_each", lambda: table.for_each(lambda key, value: None)),
        ):
            try:
                call()
                refusals[name] = None
            except AlreadyClosed as exc:
                refusals[name] = str(exc)
        results: list[str] = []
        producer.send_async(b"from-child", lambda result, _id: results.append(result.name))
        refusals["send_async callback"] = results
        # Closing them here says nothing to the broker: the parent's sessions stay open.
        producer.close()
        consumer.close()
        reader.close()
        table.close()
        return refusals

    refusals = run_forked(child)

    assert refusals.pop("send_async callback") == [Result.AlreadyClosed.name]
    for name, message in refusals.items():
        assert message is not None, f"{name} did not refuse in the child"
        assert "forked" in message and "Open it again in this process" in message, message
    producer.send(b"after", partition_key="k")
    assert _receive_all(consumer, 2) == [b"before", b"after"]
    assert [reader.read_next(10_000).data() for _ in range(2)] == [b"before", b"after"]
    wait_until(lambda: table.get("k") == b"after", "the parent's table view to see the update", 10)
    table.close()


def test_the_asyncio_client_reconnects_in_the_child(broker: Any) -> None:
    topic = _topic()

    async def open_in_parent() -> tuple[Any, Any]:
        client = pulsar_asyncio.Client(broker.service_url, operation_timeout_seconds=10)
        producer = await client.create_producer(topic)
        await producer.send(b"parent")
        return client, producer

    client, producer = asyncio.run(open_in_parent())

    def child() -> dict[str, Any]:
        async def use() -> dict[str, Any]:
            try:
                await producer.send(b"inherited")
                refused = None
            except pulsar_asyncio.PulsarException as exc:
                refused = [exc.error().name, str(exc)]
            own = await client.create_producer(topic)
            sent = str(await own.send(b"child"))
            await own.close()
            return {"refused": refused, "sent": sent}

        return asyncio.run(use())

    try:
        outcome = run_forked(child)
        assert outcome["refused"][0] == "AlreadyClosed" and "forked" in outcome["refused"][1]
        assert outcome["sent"]

        async def read_back() -> list[bytes]:
            await producer.send(b"parent-after")
            reader = await client.create_reader(topic, MessageId.earliest)
            return [(await reader.read_next(10_000)).data() for _ in range(3)]

        assert asyncio.run(read_back()) == [b"parent", b"child", b"parent-after"]
    finally:
        asyncio.run(client.close())


# The pool's workers find the client here, as a Celery task finds one made at import.
_POOL_CLIENT: dict[str, Any] = {}


def _send_from_worker(index: int) -> str:
    client, topic = _POOL_CLIENT["client"], _POOL_CLIENT["topic"]
    producer = client.create_producer(topic)
    try:
        return str(producer.send(f"worker-{index}".encode()))
    finally:
        producer.close()


def test_a_fork_pool_of_workers_sends_on_the_client_made_before_it(client: Client) -> None:
    topic = _topic()
    consumer = client.subscribe(topic, "forks")
    producer = client.create_producer(topic)
    producer.send(b"parent-before")
    _POOL_CLIENT.update(client=client, topic=topic)
    # The pool's exit ends its workers with SIGTERM. Forked from this test process, they would
    # inherit whatever handler an earlier test left in it (Airflow's task runner installs one);
    # they get the default, as workers of a fresh process have.
    inherited = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            ids = pool.map_async(_send_from_worker, range(6)).get(timeout=120)
    finally:
        signal.signal(signal.SIGTERM, inherited)
        _POOL_CLIENT.clear()
    assert len(set(ids)) == 6
    producer.send(b"parent-after")
    received = _receive_all(consumer, 8)
    assert sorted(received) == sorted([b"parent-before", b"parent-after", *(f"worker-{i}".encode() for i in range(6))])


def test_the_prefork_example_publishes_from_each_worker_and_the_parent_reads_back(broker: Any) -> None:
    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "forks" / "prefork_workers.py"
    env = {**os.environ, "PULSAR_SERVICE_URL": broker.service_url, "PULSAR_TOPIC": _topic()}
    done = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    orders = ", ".join(f"order-{n}" for n in range(6))
    assert done.stdout.strip() == f"published 6 from the workers; received {orders}"
