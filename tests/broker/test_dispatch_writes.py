"""The broker writes a consumer's entries a read block at a time, as Pulsar writes each read batch.

A FLOW of many permits used to make the broker encode every entry it allowed and write them all
at the end of its loop iteration, so the consumer waited for the whole lot. The broker runs in
this process (on real sockets, with our client) only so that its writes can be counted: where one
write ends does not survive TCP, so a client could not see it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_pulsar.broker.config import BrokerConfig
from airflow_pulsar.broker.connection import ServerConnection
from airflow_pulsar.broker.server import StandaloneBroker
from airflow_pulsar.client import Client
from airflow_pulsar.client.consumer import InitialPosition
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand

ENTRIES = 250
READ_BLOCK = 100  # the broker's read batch, as Pulsar's dispatcherMaxReadBatchSize


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[StandaloneBroker]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    broker = StandaloneBroker(BrokerConfig(data_dir=tmp_path, port=0, http_port=0, fsync=False))
    asyncio.run_coroutine_threadsafe(broker.start(), loop).result(30)
    yield broker
    asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_entries_leave_a_read_block_per_write(broker: StandaloneBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    messages_per_write: list[int] = []
    flush = ServerConnection.flush

    def counting_flush(connection: ServerConnection) -> None:
        # A frame's type is its tenth byte while the type is below 128 (BaseCommand's first field).
        messages = sum(1 for frame in connection._out if len(frame) > 9 and frame[9] == BaseCommand.MESSAGE)
        if messages and connection.transport is not None and not connection._closed:
            messages_per_write.append(messages)
        flush(connection)

    monkeypatch.setattr(ServerConnection, "flush", counting_flush)
    with Client(broker.service.service_url) as client:
        producer = client.create_producer("dispatch-writes", batching_enabled=False)
        for i in range(ENTRIES):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        consumer = client.subscribe("dispatch-writes", "sub", receiver_queue_size=1000, initial_position=InitialPosition.Earliest)
        received = [consumer.receive(5000).data() for _ in range(ENTRIES)]
    assert received == [f"m{i}".encode() for i in range(ENTRIES)]
    assert sum(messages_per_write) == ENTRIES
    assert max(messages_per_write) <= READ_BLOCK, messages_per_write
