"""The asyncio API: receive, batch receive, ack and read on the event loop."""

from __future__ import annotations

import asyncio

import pulsar
import pytest

from airflow_pulsar.client import aio
from airflow_pulsar.client.consumer import ConsumerBatchReceivePolicy, InitialPosition, MessageId
from airflow_pulsar.client.exceptions import Timeout
from consumer_helpers import backlog, produce
from polling import wait_until


def test_async_consumer_and_reader(broker, official: pulsar.Client, topic_name: str) -> None:
    async def scenario() -> None:
        async with aio.Client(broker.service_url, operation_timeout_seconds=10) as client:
            consumer = await client.subscribe(
                topic_name, "sub", initial_position=InitialPosition.Earliest, batch_receive_policy=ConsumerBatchReceivePolicy(4, -1, 3000)
            )
            # Nothing yet: the receive waits on the loop while the producer (another thread) sends.
            waiting = asyncio.ensure_future(consumer.receive(5000))
            await asyncio.sleep(0.1)
            assert not waiting.done()
            await asyncio.get_running_loop().run_in_executor(None, lambda: produce(official, topic_name, 9, batch=3))
            first = await waiting
            assert first.data() == b"m0"
            await consumer.acknowledge(first)
            batch = await consumer.batch_receive()
            assert [m.data() for m in batch] == [b"m1", b"m2", b"m3", b"m4"]
            for message in batch:
                await consumer.acknowledge(message)
            rest = [await consumer.receive(5000) for _ in range(4)]
            await consumer.acknowledge_cumulative(rest[-1])
            with pytest.raises(Timeout):
                await consumer.receive(200)
            await consumer.close()

            reader = await client.create_reader(topic_name, MessageId.earliest)
            assert await reader.has_message_available()
            assert [(await reader.read_next(5000)).data() for _ in range(9)] == [f"m{i}".encode() for i in range(9)]
            assert not await reader.has_message_available()
            await reader.close()

    asyncio.run(asyncio.wait_for(scenario(), 30))
    wait_until(lambda: backlog(broker, topic_name, "sub") == 0)
