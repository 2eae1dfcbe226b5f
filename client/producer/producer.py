"""The user-facing Producer: one partition producer per partition, a router in front.

Mirrors ``pulsar.Producer``: ``send``, ``send_async(content, callback)``, ``flush``, ``close``,
``topic``, ``producer_name``, ``last_sequence_id``, ``is_connected``; plus ``send_future`` (a
``concurrent.futures.Future``, awaitable through ``asyncio.wrap_future``), ``last_sequence_ids``
(per partition) and ``stats``.
A non-partitioned topic has a single partition producer and no router. Each send becomes one
:class:`~.message.OutgoingMessage` here, which routing, interceptors, the partition producer and
batching take as it is; its delivery arguments (delayed delivery, replication clusters) are one
:class:`~.delivery.Delivery` in it, None for the messages that use none of them.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..arguments import check_type
from ..exceptions import AlreadyClosed, Interrupted, PulsarException, Result, exception_for
from ..forks import inherited_message
from ..protocol.message_id import MessageId
from ..schema import BytesSchema, KeyValueSchema
from ..topic_name import InvalidTopicNameError, TopicName
from ..transaction import Transaction
from .config import ProducerConfig
from .delivery import delivery_of
from .limits import PendingLimit
from .message import OutgoingMessage
from .partition_producer import PartitionProducer, SendCallback
from .pending import fail_callback
from .routers import (
    CustomRouter,
    KeyHashRouter,
    MessageRouter,
    PartitionsRoutingMode,
    RoundRobinRouter,
    SinglePartitionRouter,
)
from .stats import ProducerStats
from .transactional import joined
from .waiter import SendWaiter

if TYPE_CHECKING:
    from ..services import ClientServices

__all__ = ["Producer", "create_producer"]

log = logging.getLogger(__name__)


def create_producer(client: ClientServices, topic: str, config: ProducerConfig) -> Producer:
    """A connected producer on ``topic`` (``create_producer`` of either API, with the options checked)."""
    check_type(str, topic, "topic")
    return Producer(client, topic, config)


class Producer:
    """Publishes to a topic, partitioned or not."""

    def __init__(self, client: ClientServices, topic: str, config: ProducerConfig):
        try:
            name = TopicName.parse(topic)
        except InvalidTopicNameError as exc:
            raise exception_for(Result.InvalidTopicName, str(exc)) from None
        self._topic = str(name)
        self._config = config
        self._schema = config.schema
        # Bytes under the default schema need no encoding: the send fast path takes them as they are.
        self._plain = type(config.schema) is BytesSchema
        self._client = client
        self._stats = ProducerStats()
        count = client.partition_count(self._topic)
        if count:
            per_partition = max(1, min(config.max_pending_messages, config.max_pending_messages_across_partitions // count))
            targets = [(str(name.partition_name(i)), i) for i in range(count)]
        else:
            per_partition = config.max_pending_messages
            targets = [(self._topic, -1)]
        self._partitions = [
            PartitionProducer(client, target, index, config, PendingLimit(per_partition), self._stats)
            for target, index in targets
        ]
        self._num_partitions = count
        router = self._router = self._make_router() if count else None
        # Unkeyed messages skip building a message object for the router, unless it is the user's.
        self._route_unkeyed = router.choose_unkeyed if isinstance(router, KeyHashRouter) else None
        self._interceptors = config.interceptors
        self._closed = False
        self._closed_because = f"producer on {self._topic} is closed"
        # Held to close, and to add the partitions the topic gained: neither misses the other's.
        self._lock = threading.Lock()
        _start_all(self._partitions)
        self._stats_handle = (
            client.timer.call_every(config.stats_log_interval_seconds, self.log_stats)
            if config.stats_log_interval_seconds
            else None
        )
        client.register(self)
        if count:
            client.partition_watch.watch(self)

    def _make_router(self) -> MessageRouter:
        config = self._config
        if config.message_router is not None:
            return CustomRouter(config.message_router)
        is_full = (lambda i: self._partitions[i].is_full()) if config.skip_full_partitions else None
        if config.message_routing_mode == PartitionsRoutingMode.UseSinglePartition:
            return SinglePartitionRouter(config.hashing_scheme, self._num_partitions, is_full)
        return RoundRobinRouter(
            config.hashing_scheme,
            config.batching_enabled,
            config.batching_max_publish_delay_ms * config.batching_partition_switch_frequency_by_publish_delay,
            is_full,
        )

    # ---- sending ----

    def send_async(
        self,
        content: Any,
        callback: Callable[[Result, MessageId | None], None] | None,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
        *,
        transaction: Transaction | None = None,
    ) -> None:
        """Queue a message; ``callback(result, message_id)`` runs on the IO thread when it completes.

        Errors known at once (queue or memory full with ``block_if_queue_full=False``, a closed
        producer, a message too big) are reported through the callback before this returns.
        ``None`` ignores the outcome, as the official client allows.
        """
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable(result, message_id), got {callback!r}")
        if self._closed:
            fail_callback(callback, AlreadyClosed(self._closed_because))
            return
        if (
            self._plain
            and type(content) is bytes
            and properties is None
            and partition_key is None
            and ordering_key is None
            and sequence_id is None
            and event_timestamp is None
            and deliver_after is None
            and deliver_at is None
            and replication_clusters is None
            and disable_replication is False
            and transaction is None
            and not self._interceptors
        ):
            # The common case, with nothing to check or convert, goes down as its bytes (see message.Outgoing);
            # a custom router goes through _dispatch.
            if self._router is None:
                self._partitions[0].send_async(content, callback)
                return
            if self._route_unkeyed is not None:
                self._partitions[self._route_unkeyed(self._num_partitions)].send_async(content, callback)
                return
        message = self._outgoing(
            content, properties, partition_key, ordering_key, sequence_id,
            replication_clusters, disable_replication, event_timestamp, deliver_at, deliver_after, transaction,
        )
        self._dispatch(message, callback, False)

    def send(
        self,
        content: Any,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
        *,
        transaction: Transaction | None = None,
    ) -> MessageId:
        """Publish a message and wait for the broker's receipt; returns its MessageId.

        ``deliver_at`` (ms since the epoch) or ``deliver_after`` delays its delivery to Shared and
        Key_Shared subscriptions; ``replication_clusters`` overrides the namespace's clusters for it,
        ``disable_replication`` keeps it in this cluster.
        """
        message = self._outgoing(
            content, properties, partition_key, ordering_key, sequence_id,
            replication_clusters, disable_replication, event_timestamp, deliver_at, deliver_after, transaction,
        )
        waiter = SendWaiter()
        self._dispatch(message, waiter, True)
        try:
            return waiter.wait()
        except KeyboardInterrupt as exc:  # Ctrl-C while waiting, reported as the official client reports it
            raise Interrupted(f"send on {self._topic} was interrupted") from exc

    def send_future(
        self,
        content: Any,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
        *,
        transaction: Transaction | None = None,
    ) -> Future[MessageId]:
        """Queue a message; the future resolves to its MessageId (``await asyncio.wrap_future(f)``)."""
        message = self._outgoing(
            content, properties, partition_key, ordering_key, sequence_id,
            replication_clusters, disable_replication, event_timestamp, deliver_at, deliver_after, transaction,
        )
        waiter = SendWaiter()
        self._dispatch(message, waiter, False)
        return waiter.future

    def _outgoing(
        self,
        content: Any,
        properties: Mapping[str, str] | None,
        partition_key: str | None,
        ordering_key: str | None,
        sequence_id: int | None,
        replication_clusters: list[str] | None,
        disable_replication: bool,
        event_timestamp: int | None,
        deliver_at: int | None,
        deliver_after: timedelta | None,
        transaction: Transaction | None,
    ) -> OutgoingMessage:
        """The message a send's arguments make: its value encoded by the schema, every field checked."""
        if content is None:
            pass  # a null value (a tombstone for compaction), as the official client sends it
        elif self._config.key_value_separated:
            # The key travels as the message key, base64, as the Java client sends it.
            assert isinstance(self._schema, KeyValueSchema)
            key, value = self._schema.encode_parts(content)
            content = value or b""
            partition_key = None if key is None else base64.b64encode(key).decode("ascii")
        elif not self._plain:
            content = self._schema.encode(content)  # a value of the wrong type raises here, as the official client's
        if content is not None:
            if not isinstance(content, (bytes, bytearray, memoryview)):
                raise TypeError(f"content must be bytes or None, got {type(content).__name__}")
            content = bytes(content) if not isinstance(content, bytes) else content
        _check_fields(properties, partition_key, ordering_key, sequence_id, event_timestamp)
        delivery = (
            None
            if deliver_after is None and deliver_at is None and replication_clusters is None and disable_replication is False
            and transaction is None
            else delivery_of(replication_clusters, disable_replication, deliver_at, deliver_after, transaction)
        )
        return OutgoingMessage(content, properties, partition_key, ordering_key, event_timestamp, sequence_id, delivery)

    def _dispatch(self, message: OutgoingMessage, callback: SendCallback | None, flush: bool) -> None:
        """Pass ``message`` through the interceptors, route it and queue it on its partition's producer;
        ``flush`` sends its batch at once (a sync send has nothing to wait for)."""
        if self._closed:
            fail_callback(callback, AlreadyClosed(self._closed_because))
            return
        if self._interceptors:
            delivery = message.delivery
            for interceptor in self._interceptors:
                message = interceptor.before_send(self, message)
            # A replacement keeps the send's delivery fields: they are the send's arguments, not content.
            message.delivery = delivery
            callback = self._intercepted(callback if callback is not None else _ignore, message)
        if self._router is None:
            target = self._partitions[0]
        else:
            target = self._partitions[self._router.choose_partition(message, self._num_partitions)]
        transaction = message.delivery.transaction if message.delivery is not None else None
        if transaction is not None:
            try:
                callback = joined(transaction, target.topic, callback)
            except PulsarException as exc:
                fail_callback(callback, exc)
                return
        target.send_async(message, callback, flush)

    def _intercepted(self, callback: SendCallback, message: OutgoingMessage) -> SendCallback:
        """Wrap a callback so every interceptor hears of the acknowledgement first."""
        interceptors = self._interceptors

        def notify(result: Result, message_id: MessageId | None) -> None:
            for interceptor in interceptors:
                try:
                    interceptor.on_send_acknowledgement(self, message, message_id, result)
                except Exception:  # an interceptor's failure must not lose the user's callback
                    log.exception("producer interceptor failed")

        if isinstance(callback, SendWaiter):
            return callback.after(notify)

        def acknowledged(result: Result, message_id: MessageId | None) -> None:
            notify(result, message_id)
            callback(result, message_id)

        return acknowledged

    # ---- flush, close, state ----

    def check_open(self) -> None:
        """Raise AlreadyClosed once the producer is closed (or shut down)."""
        if self._closed:
            raise AlreadyClosed(self._closed_because)

    def flush(self) -> None:
        """Send every batch now and wait until all messages sent so far are acknowledged or failed;
        AlreadyClosed once the producer is closed, as in the official client."""
        self.check_open()
        for partition in self._partitions:
            partition.flush_batch()
        for partition in self._partitions:
            partition.flush()

    def close(self) -> None:
        """Flush, then close every partition producer."""
        if not self._mark_closed():
            return
        try:
            for partition in self._partitions:
                partition.close()
        finally:
            self._client.unregister(self)

    def shutdown(self) -> None:
        """Close at once, as ``Client.shutdown`` does: pending messages fail with AlreadyClosed, unflushed."""
        if not self._mark_closed():
            return
        for partition in self._partitions:
            partition.close(graceful=False)
        self._client.unregister(self)

    def _mark_closed(self) -> bool:
        """Turn closed, stopping the stats line and the partition watch; False if it already was."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
        if self._stats_handle is not None:
            self._stats_handle.cancel()
        self._client.partition_watch.unwatch(self)
        return True

    def forked(self, parent_pid: int) -> None:
        """This process was forked from ``parent_pid``, whose producer this is: closed here, nothing
        sent to the broker (see ``forks``)."""
        self._lock = threading.Lock()
        self._closed_because = inherited_message(f"producer on {self._topic}", parent_pid)
        self._closed = True

    # ---- partitions added to the topic ----

    def partition_counts(self) -> dict[str, int]:
        """The partitioned topic and the partitions produced to, for the client's partition watch."""
        return {self._topic: self._num_partitions} if self._num_partitions and not self._closed else {}

    def add_partitions(self, topic: str, partitions: int) -> None:
        """Start a partition producer on each partition the topic gained; messages are routed over
        them once all are connected (as the official producers add them)."""
        config = self._config
        name = TopicName.parse(self._topic)
        per_partition = max(1, min(config.max_pending_messages, config.max_pending_messages_across_partitions // partitions))
        added = [
            PartitionProducer(self._client, str(name.partition_name(i)), i, config, PendingLimit(per_partition), self._stats)
            for i in range(self._num_partitions, partitions)
        ]
        _start_all(added)
        with self._lock:
            if not self._closed:
                # The list grows before the count: a send reading the count finds its partition.
                self._partitions.extend(added)
                self._num_partitions = partitions
                return
        for partition in added:
            partition.close(graceful=False)

    def topic(self) -> str:
        """The topic (the partitioned topic's name, not a partition's)."""
        return self._topic

    def producer_name(self) -> str:
        """The producer name (of the first partition for a partitioned topic)."""
        return self._partitions[0].producer_name

    def last_sequence_id(self) -> int:
        """The highest sequence id acknowledged by the broker, across partitions; -1 if none."""
        return max(partition.last_sequence_id for partition in self._partitions)

    def last_sequence_ids(self) -> dict[str, int]:
        """The highest sequence id the broker has stored from this producer on each partition: the
        partition's topic name (the topic's own for a non-partitioned topic) to the id, -1 for none.

        Where the broker deduplicates, it tells a producer that connects under a name it knows the
        last sequence id it stored under that name on the partition, and the id rises with each
        receipt. So a producer that comes back under an earlier one's name (a retried task, say)
        reads here how far the earlier one got on each partition, and can skip what is stored there.
        """
        return {partition.topic: partition.last_sequence_id for partition in self._partitions}

    def is_connected(self) -> bool:
        """Whether every partition producer is connected."""
        return not self._closed and all(partition.is_connected() for partition in self._partitions)

    def stats(self) -> dict[str, Any]:
        """Messages, bytes, batches, mean batch size, compression ratio, pending, latency percentiles."""
        return self._stats.snapshot(sum(partition.pending_messages() for partition in self._partitions))

    def log_stats(self) -> None:
        """Log one line of this producer's statistics."""
        ProducerStats.log_line(self._topic, self.stats())

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Producer({self._topic!r}, partitions={self._num_partitions})"


def _start_all(partitions: list[PartitionProducer]) -> None:
    """Connect each partition producer; if one fails, close those started and raise."""
    started: list[PartitionProducer] = []
    try:
        for partition in partitions:
            partition.start()
            started.append(partition)
    except BaseException:
        for partition in started:
            partition.close()
        raise


def _ignore(result: Result, message_id: MessageId | None) -> None:
    """What interceptors wrap for a ``send_async(content, None)`` (elsewhere None stays None)."""


def _check_fields(
    properties: Mapping[str, str] | None,
    partition_key: str | None,
    ordering_key: str | None,
    sequence_id: int | None,
    event_timestamp: int | None,
) -> None:
    """Check the per-message arguments: ``ValueError`` for an argument of the wrong type, ``TypeError``
    for a property that is not str to str (the official client's errors). The checks run inline and
    call :func:`check_type` only to raise: this is on every keyed send's path (a dict passes without
    the abstract Mapping check, the costliest of them)."""
    if properties is not None:
        if type(properties) is not dict and not isinstance(properties, Mapping):
            check_type(Mapping, properties, "properties")
        for key, value in properties.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"properties must be a dict of str to str, got {properties!r}")
    if partition_key is not None and not isinstance(partition_key, str):
        check_type(str, partition_key, "partition_key")
    if ordering_key is not None and not isinstance(ordering_key, str):
        check_type(str, ordering_key, "ordering_key")
    if sequence_id is not None:
        _check_count(sequence_id, "sequence_id")
    if event_timestamp is not None:
        _check_count(event_timestamp, "event_timestamp")


def _check_count(value: int, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
