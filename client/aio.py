"""asyncio API over the same core, for Airflow triggers.

Receiving never parks a thread per call: when the receiver queue is empty the coroutine awaits a
future that the connection's reader thread completes when the next entry arrives, and the
unpacking then runs on the event loop's thread, as ``receive`` does on the caller's thread.
Setting up (lookups, SUBSCRIBE) and other blocking requests run in the default executor.

The async producer belongs next to these classes (``Client.create_producer`` returning an
``AsyncProducer`` whose ``send`` awaits the send receipt); it is left to the producer side.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .client import Client as SyncClient
from .consumer import Consumer, ConsumerType, Message, MessageId, Reader
from .consumer.reader import mark_read
from .exceptions import Timeout
from .schema import Schema

R = TypeVar("R")


async def _blocking(function: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    return await asyncio.get_running_loop().run_in_executor(None, lambda: function(*args, **kwargs))


async def _receive(consumer: Consumer, timeout_millis: int | None) -> Message:
    consumer.check_open()
    queue = consumer.receiver_queue
    loop = asyncio.get_running_loop()
    deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
    while True:
        got_lock, message = queue.try_take_nowait()
        if not got_lock:
            # A thread is blocked in receive() on the same consumer; wait behind it off the loop.
            return await _blocking(consumer.receive, None if deadline is None else max(int((deadline - time.monotonic()) * 1000), 0))
        if message is not None:
            return message
        waiter = queue.wait_async(loop)
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            waiter.cancel()
            raise Timeout(f"no message within {timeout_millis} ms")
        try:
            await asyncio.wait_for(waiter, remaining)
        except asyncio.TimeoutError:
            raise Timeout(f"no message within {timeout_millis} ms") from None


class AsyncConsumer:
    """``await consumer.receive()``, ``batch_receive``, ``acknowledge``... over a sync Consumer."""

    def __init__(self, consumer: Consumer):
        self.consumer = consumer

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; raises Timeout after ``timeout_millis``."""
        return await _receive(self.consumer, timeout_millis)

    async def batch_receive(self) -> list[Message]:
        """The messages that arrive within the batch receive policy: until its message or byte
        limit is reached or its timeout runs out (possibly none), as the blocking call does."""
        max_messages, max_bytes, timeout = self.consumer.settings.batch_receive_limits()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        batch: list[Message] = []
        size = 0
        while (max_messages <= 0 or len(batch) < max_messages) and (max_bytes <= 0 or size < max_bytes):
            left_ms = int((deadline - loop.time()) * 1000)
            if left_ms <= 0:
                break
            try:
                message = await self.receive(left_ms)
            except Timeout:
                break
            batch.append(message)
            size += len(message.data())
        return batch

    async def acknowledge(self, message: Message | MessageId) -> None:
        """Acknowledge (grouped; with ack receipts enabled this waits for the broker off the loop)."""
        if self.consumer.settings.ack_receipt_enabled:
            await _blocking(self.consumer.acknowledge, message)
        else:
            self.consumer.acknowledge(message)

    async def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge everything up to this message."""
        if self.consumer.settings.ack_receipt_enabled:
            await _blocking(self.consumer.acknowledge_cumulative, message)
        else:
            self.consumer.acknowledge_cumulative(message)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Redeliver after the negative-ack delay (never blocks)."""
        self.consumer.negative_acknowledge(message)

    async def seek(self, messageid: MessageId | int) -> None:
        """Reset the subscription to a message id or publish time."""
        await _blocking(self.consumer.seek, messageid)

    async def get_last_message_ids(self) -> dict[str, tuple[MessageId, MessageId | None]]:
        """Per partition: (last message id, mark-delete position)."""
        return await _blocking(self.consumer.get_last_message_ids)

    async def unsubscribe(self) -> None:
        """Delete the subscription and close."""
        await _blocking(self.consumer.unsubscribe)

    async def close(self) -> None:
        """Flush acks and close."""
        await _blocking(self.consumer.close)


class AsyncReader:
    """``await reader.read_next()`` and friends over a sync Reader."""

    def __init__(self, reader: Reader):
        self.reader = reader

    async def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message; raises Timeout after ``timeout_millis``."""
        message = await _receive(self.reader.consumer, timeout_millis)
        mark_read(message)
        return message

    async def has_message_available(self) -> bool:
        """Whether there is more to read (asks the broker)."""
        return await _blocking(self.reader.has_message_available)

    async def seek(self, messageid: MessageId | int) -> None:
        """Read from a message id or publish time next."""
        await _blocking(self.reader.seek, messageid)

    async def close(self) -> None:
        """Close the reader."""
        await _blocking(self.reader.close)


class Client:
    """An asyncio client: ``async with Client(url) as client: consumer = await client.subscribe(...)``."""

    def __init__(self, service_url: str, **settings: Any):
        self.sync = SyncClient(service_url, **settings)

    async def subscribe(
        self,
        topic: str | list[str] | re.Pattern[str],
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        schema: Schema[Any] | None = None,
        **settings: Any,
    ) -> AsyncConsumer:
        """As ``pulsar.asyncio.Client.subscribe``: ``value()`` of its messages decodes with ``schema``."""
        consumer = await _blocking(self.sync.subscribe, topic, subscription_name, consumer_type, schema, **settings)
        return AsyncConsumer(consumer)

    async def create_reader(
        self, topic: str, start_message_id: MessageId, schema: Schema[Any] | None = None, **settings: Any
    ) -> AsyncReader:
        """As ``pulsar.asyncio.Client.create_reader``: ``value()`` of its messages decodes with ``schema``."""
        return AsyncReader(await _blocking(self.sync.create_reader, topic, start_message_id, schema, **settings))

    # create_producer(...) -> AsyncProducer goes here (producer side).

    async def close(self) -> None:
        """Close every consumer, reader and connection."""
        await _blocking(self.sync.close)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
