"""The asyncio API, as the official ``pulsar.asyncio`` module has it, over the same core as the sync API.

Names, parameters (in their positional order) and defaults follow ``pulsar.asyncio`` (the
factories' options are declared once for both APIs, in ``factory_options``); so do its
errors: whatever fails inside the client is raised as :class:`PulsarException` carrying the
:class:`Result`, and bad arguments the official module checks itself raise ``ValueError``.

No thread is parked per call on the hot paths. ``Producer.send`` hands the message to the core
and awaits a future that the send-receipt callback completes through ``call_soon_threadsafe``;
``receive`` and ``read_next`` await a future that the connection's reader thread completes when
an entry arrives, then unpack it on the loop's thread. Setting up (lookups, PRODUCER, SUBSCRIBE),
flush, close, acknowledgements that wait for the broker's receipt, and sends, acknowledgements,
commits and aborts in a transaction (each a round trip to the coordinator or broker) run in the
default executor.

Beyond the official module: ``receive`` and ``read_next`` take ``timeout_millis`` (the error then
carries ``Result.Timeout``), ``Consumer.batch_receive`` follows the batch receive policy, the
factories take this client's extra settings as keywords, and the client is an async context manager.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from . import exceptions
from .client import Client as SyncClient
from .consumer import (
    InitialPosition,
    Message,
    RegexSubscriptionMode,
)
from .consumer.consumer import Consumer as SyncConsumer
from .consumer.reader import Reader as SyncReader
from .consumer.reader import mark_read
from .crypto import ConsumerCryptoFailureAction
from .exceptions import Result
from .factories import open_consumer, open_reader
from .factory_options import Api, ProducerOptions, ReaderOptions, SubscribeOptions
from .factory_signature import factory
from .producer import BatchingType, CompressionType, PartitionsRoutingMode, ProducerAccessMode, create_producer
from .producer import Producer as SyncProducer
from .protocol.message_id import MessageId
from .transaction import Transaction as SyncTransaction
from .transaction import TransactionState, TxnId

__all__ = [
    "BatchingType",
    "Client",
    "CompressionType",
    "Consumer",
    "ConsumerCryptoFailureAction",
    "InitialPosition",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerAccessMode",
    "PulsarException",
    "Reader",
    "RegexSubscriptionMode",
    "Transaction",
]

R = TypeVar("R")


class PulsarException(exceptions.PulsarException):
    """What every asyncio call raises when the client fails; ``error()`` is the :class:`Result`.

    A subclass of the sync API's ``PulsarException``, so one ``except`` covers both APIs.
    """

    def __init__(self, result: Result, msg: str | None = None) -> None:
        self.result = result
        self._msg = msg
        super().__init__(msg or "")

    def error(self) -> Result:
        """The error code."""
        return self.result

    def __str__(self) -> str:
        return f"{self.result.value} {self.result.name}: {self._msg}" if self._msg else f"{self.result.value} {self.result.name}"


def _wrap(error: exceptions.PulsarException) -> PulsarException:
    if isinstance(error, PulsarException):
        return error
    message = str(error)
    wrapped = PulsarException(error.result, None if message == error.result.name else message)
    wrapped.__cause__ = error
    return wrapped


async def _blocking(function: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """Run a blocking core call in the default executor, its errors raised as PulsarException."""
    try:
        return await asyncio.get_running_loop().run_in_executor(None, functools.partial(function, *args, **kwargs))
    except exceptions.PulsarException as exc:
        raise _wrap(exc) from exc


def _now(function: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """Run a core call that never blocks, its errors raised as PulsarException."""
    try:
        return function(*args, **kwargs)
    except exceptions.PulsarException as exc:
        raise _wrap(exc) from exc


@functools.cache
def _defaults(method: Callable[..., Any]) -> dict[str, Any]:
    parameters = inspect.signature(method).parameters.values()
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def _given(method: Callable[..., Any], arguments: dict[str, Any], *consumed: str) -> dict[str, Any]:
    """The arguments given values other than the official defaults (the core defaults the rest alike)."""
    defaults = _defaults(method)
    return {
        name: value
        for name, value in arguments.items()
        if name in defaults and name not in consumed and value is not defaults[name] and value != defaults[name]
    }


def _message_id(messageid: Any) -> MessageId | int:
    if isinstance(messageid, bool) or not isinstance(messageid, (MessageId, int)):
        raise ValueError(f"invalid messageid type {type(messageid)}")
    return messageid


class _Receipt:
    """The send callback: completes the awaiting future on its loop, from the thread the receipt came on."""

    __slots__ = ("_future", "_loop")

    def __init__(self, future: asyncio.Future[MessageId]):
        self._future = future
        self._loop = future.get_loop()

    def __call__(self, result: Result, message_id: MessageId | None) -> None:
        if result is Result.Ok:
            self._complete(_resolve, message_id)
        else:
            self._complete(_reject, PulsarException(result))

    def fail(self, error: exceptions.PulsarException) -> None:
        """The core's way to report a failure with its message."""
        self._complete(_reject, _wrap(error))

    def _complete(self, how: Callable[[asyncio.Future[Any], Any], None], value: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(how, self._future, value)
        except RuntimeError:
            pass  # the loop is closed: nobody awaits the send any more


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _reject(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


class Transaction:
    """A transaction of the asyncio client (from ``Client.new_transaction``): the sync API's
    :class:`~.transaction.Transaction` with ``commit`` and ``abort`` to await."""

    def __init__(self, transaction: SyncTransaction) -> None:
        self.core = transaction

    @property
    def id(self) -> TxnId:
        """The transaction's id (most and least significant bits)."""
        return self.core.id

    @property
    def state(self) -> TransactionState:
        """The transaction's state."""
        return self.core.state

    async def commit(self) -> None:
        """Commit, as the sync ``Transaction.commit``."""
        await _blocking(self.core.commit)

    async def abort(self) -> None:
        """Abort, as the sync ``Transaction.abort``."""
        await _blocking(self.core.abort)


class Producer:
    """Publishes to a topic; mirrors ``pulsar.asyncio.Producer``. Create it with ``Client.create_producer``."""

    def __init__(self, producer: SyncProducer) -> None:
        self._producer = producer

    async def send(
        self,
        content: Any,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool | None = None,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
        *,
        transaction: Transaction | None = None,
    ) -> MessageId:
        """Send a message (batched with the others in flight) and return its id once the broker has it;
        with ``transaction``, as part of it (the first send to a partition registers it with the
        transaction's coordinator, in the default executor)."""
        fields = _given(Producer.send, locals(), "content", "transaction")
        if transaction is not None:
            return await _blocking(self._producer.send, content, transaction=transaction.core, **fields)
        future: asyncio.Future[MessageId] = asyncio.get_running_loop().create_future()
        # The receipt comes on the connection's thread; the message is queued in call order.
        _now(self._producer.send_async, content, _Receipt(future), **fields)
        return await future

    async def flush(self) -> None:
        """Send every batch now and wait until all messages sent so far are acknowledged (or AlreadyClosed)."""
        _now(self._producer.check_open)
        await _blocking(self._producer.flush)

    async def close(self) -> None:
        """Flush, then close the producer; PulsarException(AlreadyClosed) when it was closed already."""
        _now(self._producer.check_open)
        await _blocking(self._producer.close)

    def topic(self) -> str:
        """The topic published to."""
        return self._producer.topic()

    def producer_name(self) -> str:
        """The producer name, given or assigned by the broker."""
        return self._producer.producer_name()

    def last_sequence_id(self) -> int:
        """The last sequence id the broker acknowledged; -1 if none."""
        return self._producer.last_sequence_id()

    def last_sequence_ids(self) -> dict[str, int]:
        """The last sequence id the broker stored from this producer on each partition (see the sync
        ``Producer.last_sequence_ids``)."""
        return self._producer.last_sequence_ids()

    def is_connected(self) -> bool:
        """Whether the producer is connected."""
        return self._producer.is_connected()


async def _take(consumer: SyncConsumer, deadline: float | None) -> Message | None:
    """The next message, or None once the loop's clock passes ``deadline``."""
    _now(consumer.check_open)
    queue, loop = consumer.receiver_queue, asyncio.get_running_loop()
    while True:
        got_lock, message = queue.try_take_nowait()
        if not got_lock:
            # A thread is blocked in the sync receive() on the same consumer: wait behind it off the loop.
            wait_ms = None if deadline is None else max(int((deadline - loop.time()) * 1000), 0)
            try:
                return await _blocking(consumer.receive, wait_ms)
            except PulsarException as exc:
                if exc.result is not Result.Timeout:
                    raise
                return None
        if message is not None:
            return message
        _now(consumer.check_open)
        remaining = None if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            return None
        hook = consumer.wait_hook
        if hook is not None:
            hook()
        waiter = queue.wait_async(loop)
        try:
            await asyncio.wait_for(waiter, remaining)
        except asyncio.TimeoutError:
            return None


async def _receive(consumer: SyncConsumer, timeout_millis: int | None) -> Message:
    if timeout_millis is not None and (isinstance(timeout_millis, bool) or not isinstance(timeout_millis, int) or timeout_millis < 0):
        raise ValueError(f"timeout_millis must be None or an int >= 0, got {timeout_millis!r}")
    deadline = None if timeout_millis is None else asyncio.get_running_loop().time() + timeout_millis / 1000
    message = await _take(consumer, deadline)
    if message is None:
        raise PulsarException(Result.Timeout, f"no message within {timeout_millis} ms")
    return message


class Consumer:
    """Receives from a subscription; mirrors ``pulsar.asyncio.Consumer``. Create it with ``Client.subscribe``."""

    def __init__(self, consumer: SyncConsumer) -> None:
        self._consumer = consumer

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; with ``timeout_millis``, PulsarException(Result.Timeout) when none comes in time."""
        return await _receive(self._consumer, timeout_millis)

    async def batch_receive(self) -> list[Message]:
        """The messages that arrive until the batch receive policy's message or byte limit is reached
        or its timeout runs out, whichever comes first: possibly none."""
        max_messages, max_bytes, timeout = self._consumer.settings.batch_receive_limits()
        deadline = asyncio.get_running_loop().time() + timeout
        batch: list[Message] = []
        size = 0
        while (max_messages <= 0 or len(batch) < max_messages) and (max_bytes <= 0 or size < max_bytes):
            message = await _take(self._consumer, deadline)
            if message is None:
                break
            batch.append(message)
            size += len(message.data())
        return batch

    async def acknowledge(self, message: Message | MessageId, *, transaction: Transaction | None = None) -> None:
        """Acknowledge one message (grouped; with ack receipts, once the broker confirmed); with
        ``transaction``, as part of it, once the broker accepted it."""
        if transaction is not None:
            await _blocking(self._consumer.acknowledge, message, transaction=transaction.core)
            return
        await self._settle(self._consumer.acknowledge, message)

    async def acknowledge_cumulative(self, message: Message | MessageId, *, transaction: Transaction | None = None) -> None:
        """Acknowledge every message up to and including this one; with ``transaction``, as in :meth:`acknowledge`."""
        if transaction is not None:
            await _blocking(self._consumer.acknowledge_cumulative, message, transaction=transaction.core)
            return
        await self._settle(self._consumer.acknowledge_cumulative, message)

    async def _settle(self, acknowledge: Callable[[Message | MessageId], None], message: Message | MessageId) -> None:
        if self._consumer.settings.ack_receipt_enabled:
            await _blocking(acknowledge, message)
        else:
            _now(acknowledge, message)

    async def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Have the message redelivered after the negative-ack delay."""
        _now(self._consumer.negative_acknowledge, message)

    async def unsubscribe(self) -> None:
        """Delete the subscription and close the consumer."""
        await _blocking(self._consumer.unsubscribe)

    async def seek(self, messageid: MessageId | int) -> None:
        """Reset the subscription to a message id or a publish timestamp (ms)."""
        await _blocking(self._consumer.seek, _message_id(messageid))

    async def close(self) -> None:
        """Flush pending acknowledgements and close."""
        await _blocking(self._consumer.close)

    async def get_last_message_id(self) -> MessageId:
        """The id of the topic's last message."""
        return await _blocking(self._consumer.get_last_message_id)

    def redeliver_unacknowledged_messages(self) -> None:
        """Have every unacknowledged message delivered again."""
        _now(self._consumer.redeliver_unacknowledged_messages)

    def topic(self) -> str:
        """The topic subscribed to."""
        return self._consumer.topic()

    def subscription_name(self) -> str:
        """The subscription name."""
        return self._consumer.subscription_name()

    def consumer_name(self) -> str:
        """The consumer name."""
        return self._consumer.consumer_name()


class Reader:
    """Reads a topic from a chosen message id; mirrors ``pulsar.asyncio.Reader``. Create it with ``Client.create_reader``."""

    def __init__(self, reader: SyncReader) -> None:
        self._reader = reader

    async def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message; with ``timeout_millis``, PulsarException(Result.Timeout) when none comes in time."""
        message = await _receive(self._reader.consumer, timeout_millis)
        mark_read(message)
        return message

    async def has_message_available(self) -> bool:
        """Whether there is more to read from the current position (asks the broker)."""
        return await _blocking(self._reader.has_message_available)

    async def seek(self, messageid: MessageId | int) -> None:
        """Read from a message id or a publish timestamp (ms) next."""
        await _blocking(self._reader.seek, _message_id(messageid))

    async def close(self) -> None:
        """Close the reader."""
        await _blocking(self._reader.close)

    def topic(self) -> str:
        """The topic read."""
        return self._reader.topic()

    def is_connected(self) -> bool:
        """Whether the reader is connected."""
        return self._reader.is_connected()


class Client:
    """The asyncio client: ``pulsar.asyncio.Client``; takes ``Client``'s settings."""

    def __init__(self, service_url: str, **kwargs: Any) -> None:
        self._client = SyncClient(service_url, **kwargs)

    @factory(ProducerOptions, Api.ASYNCIO)
    async def create_producer(self, topic: str, options: ProducerOptions) -> Producer:
        """A producer on ``topic``, batching by default; the options are :class:`ProducerOptions`."""
        if options.batching_enabled and options.chunking_enabled:
            raise ValueError("Batching and chunking of messages can't be enabled together.")
        return Producer(await _blocking(create_producer, self._client, topic, options.config()))

    @factory(SubscribeOptions, Api.ASYNCIO)
    async def subscribe(self, topic: str | list[str], subscription_name: str, options: SubscribeOptions) -> Consumer:
        """A consumer on a topic, a list of topics, or (``is_pattern_topic``) a regex of topic names;
        the options are :class:`~.factory_options.SubscribeOptions`."""
        topics: str | list[str] | re.Pattern[str]
        if isinstance(topic, str):
            topics = re.compile(topic) if options.is_pattern_topic else topic
        elif isinstance(topic, list):
            if options.is_pattern_topic:
                raise ValueError(
                    "Argument 'topic' must be a string when 'is_pattern_topic' is True; "
                    "lists of topics do not support pattern subscriptions"
                )
            topics = topic
        else:
            raise ValueError("Argument 'topic' is expected to be of type 'str' or 'list'")
        return Consumer(await _blocking(open_consumer, self._client, topics, subscription_name, options))

    @factory(ReaderOptions, Api.ASYNCIO)
    async def create_reader(self, topic: str, start_message_id: MessageId, options: ReaderOptions) -> Reader:
        """A reader of ``topic`` from ``start_message_id`` (``MessageId.earliest``, ``latest`` or an id);
        the options are those of ``Client.create_reader``."""
        if not isinstance(start_message_id, MessageId):
            raise ValueError(f"Argument start_message_id is expected to be of type 'MessageId' and not '{type(start_message_id).__name__}'")
        return Reader(await _blocking(open_reader, self._client, topic, start_message_id, options))

    async def new_transaction(self, transaction_timeout_ms: int = 60_000) -> Transaction:
        """Open a transaction, as the sync ``Client.new_transaction`` (the client needs ``enable_transaction=True``)."""
        return Transaction(await _blocking(self._client.new_transaction, transaction_timeout_ms))

    async def get_topic_partitions(self, topic: str) -> list[str]:
        """The partition names of ``topic``, or ``[topic]`` if it is not partitioned."""
        if not isinstance(topic, str):
            raise ValueError(f"Argument topic is expected to be of type 'str' and not '{type(topic).__name__}'")
        return await _blocking(self._client.get_topic_partitions, topic)

    def shutdown(self) -> None:
        """Close everything at once, as the sync ``shutdown``: no flush, pending sends fail with AlreadyClosed."""
        _now(self._client.shutdown)

    async def close(self) -> None:
        """Close every producer (flushing it), consumer and reader, then the connections."""
        await _blocking(self._client.close)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
