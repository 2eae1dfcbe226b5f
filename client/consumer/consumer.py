"""The consumer of one topic partition, and the user-facing Consumer over one or more of them.

A :class:`PartitionConsumer` owns the protocol conversation with the broker for one partition:
SUBSCRIBE, FLOW, MESSAGE, ACK, REDELIVER, SEEK, reconnects. Its connection's reader thread only
queues whole entries; the thread calling ``receive`` unpacks them (batches with their ack_set,
chunks, compression) and takes the messages, returning permits as it goes.

:class:`Consumer` is what ``subscribe`` returns. It merges the partition consumers of one or more
topics through a single receiver queue, so a partitioned or multi-topic consumer costs no extra
thread and no extra copy.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any

from ..backoff import Backoff
from ..exceptions import (
    AlreadyClosed,
    ConnectError,
    CumulativeAcknowledgementNotAllowedError,
    InvalidConfiguration,
    PulsarException,
    Result,
    Timeout,
)
from ..protocol import commands
from ..protocol.batch import BatchFormatError, read_batch, unacked_mask
from ..protocol.compression import CompressionError, decompress
from ..protocol.frames import FrameError, encode_command, split_entry
from ..protocol.message_id import MessageId
from ..protocol.PulsarApi_pb2 import BaseCommand, CommandAck, CommandSubscribe, KeyValue, MessageIdData
from .ack_grouping import AckGroupingTracker, PendingAcks, id_data
from .chunks import ChunkedMessageCollector
from .dead_letter import DeadLetterProcessor
from .message import Delivery, Message, UnackedIndexes
from .negative_acks import NegativeAcksTracker
from .receiver_queue import Permits, QueuedEntry, ReceiverQueue
from .settings import ConsumerSettings, ConsumerType
from .stats import ConsumerStats
from .unacked_tracker import UnackedMessageTracker

log = logging.getLogger(__name__)

# Command types read off the message class: the same ints, without the enum wrapper's slow lookup.
T = BaseCommand
_U64 = (1 << 64) - 1
_consumer_ids = itertools.count(1)
# A resubscribe refused for one of these will be refused again: the consumer fails instead of retrying.
_RESUBSCRIBE_FATAL = frozenset(
    {
        Result.AuthenticationError,
        Result.AuthorizationError,
        Result.TopicNotFound,
        Result.SubscriptionNotFound,
        Result.InvalidTopicName,
        Result.NotAllowedError,
    }
)


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


class PartitionConsumer:
    """The subscription of one consumer on one topic partition (or non-partitioned topic)."""

    def __init__(
        self,
        client: Any,
        topic: str,
        partition: int,
        settings: ConsumerSettings,
        queue: ReceiverQueue,
        queue_size: int,
        start_message_id: MessageId | None = None,
        message_topic: str | None = None,
    ):
        self.client = client
        self.topic = topic
        self.partition = partition
        self.settings = settings
        self.queue = queue
        self.consumer_id = next(_consumer_ids)
        self.consumer_name = settings.consumer_name or f"consumer-{self.consumer_id}"
        # Entries queued under an older epoch are dropped unread (reconnect, seek, redeliver-all).
        self.epoch = 0
        self._connection_epoch = 0
        # Set on the ids of a multi-topic consumer's messages, so acks by id find their partition.
        self._id_topic = message_topic
        self.permits = Permits(queue_size, self._send_flow)
        self.zero_queue = queue_size == 0
        self._zero_queue_asked = False
        timer = client.timer
        self.acks = AckGroupingTracker(self._send_acks, timer, settings.ack_group_time_ms / 1000, settings.ack_group_max_size)
        self.nacks = NegativeAcksTracker(settings.negative_ack_redelivery_delay_ms, timer, self.redeliver)
        timeout = settings.unacked_messages_timeout_ms
        self.unacked = UnackedMessageTracker(timeout, timer, self._redeliver_timed_out) if timeout else None
        self.chunks = ChunkedMessageCollector(settings.max_pending_chunked_message, settings.auto_ack_oldest_chunked_message_on_queue_full)
        self.dead_letter = (
            DeadLetterProcessor(
                settings.dead_letter_policy,
                topic,
                settings.subscription_name,
                lambda dlq: client.create_producer(dlq, batching_enabled=False),
                self._create_initial_subscription,
                self.acknowledge,
            )
            if settings.dead_letter_policy is not None
            else None
        )
        self._ack_lock = threading.Lock()
        self._batch_unacked: dict[tuple[int, int], UnackedIndexes] = {}  # batch entry -> indexes still unacked
        self._chunk_ids: dict[tuple[int, int], list[MessageId]] = {}  # last chunk -> every chunk
        # Start filter: messages before it (or at it, unless inclusive) are dropped (readers, seek).
        self._start_id = start_message_id
        self._start_inclusive = settings.start_message_id_inclusive
        self._seek_pending = False
        self._seek_by_time = False
        self._last_taken: Message | None = None
        self._connection: Any = None
        self._ready = threading.Event()
        # One (re)subscribe at a time: a second one on the same connection would bump the epoch and
        # drop messages the broker counts as delivered, which it then never sends again.
        self._state_lock = threading.Lock()
        self._reconnecting = False
        self._closing = False
        self._closed_event = threading.Event()
        # Set when a resubscribe was refused for good; receive() then raises it.
        self.failure: PulsarException | None = None
        self.is_active: bool | None = None
        self.reached_end_of_topic = False
        self.reconnects = 0
        self.redeliveries = 0
        self.received = 0

    # ---- subscribing ----

    def connect(self) -> None:
        """The first subscribe: retried while its errors are retryable, until the operation timeout."""
        self._reconnecting = True  # a loss meanwhile is retried here, not by a second subscriber
        try:
            self.client.with_retries(f"subscribe to {self.topic}", self._subscribe_once)
        except BaseException:
            self._reconnecting = False
            raise
        if not self._settled():
            self._start_reconnect()

    def _subscribe_once(self, reconnect: bool = False) -> None:
        connection = self.client.lookup(self.topic)
        self.epoch += 1
        self._connection_epoch = self.epoch
        self.chunks.clear()
        self._zero_queue_asked = False
        connection.consumers[self.consumer_id] = self
        try:
            connection.call(T.SUBSCRIBE, self.client.operation_timeout, **self._subscribe_fields())
        except BaseException as exc:
            connection.consumers.pop(self.consumer_id, None)
            if isinstance(exc, Timeout):
                # The broker may have made the consumer after all; unclosed, it would hold the
                # subscription (an Exclusive one would refuse every later subscribe).
                connection.request(T.CLOSE_CONSUMER, consumer_id=self.consumer_id)
            raise
        with self._state_lock:
            if connection.closed:  # closed before it could tell us: subscribe again elsewhere
                raise ConnectError(f"connection to {connection.address} closed while subscribing to {self.topic}")
            self._connection = connection
            if reconnect:  # counted before permits go out, so it precedes any redelivered message
                self.reconnects += 1
            self._ready.set()
        self.permits.grant_initial()
        self.acks.flush()

    def _subscribe_fields(self) -> dict[str, Any]:
        settings = self.settings
        fields: dict[str, Any] = {
            "topic": self.topic,
            "subscription": settings.subscription_name,
            "subType": settings.consumer_type.wire,
            "consumer_id": self.consumer_id,
            "consumer_name": self.consumer_name,
            "durable": settings.durable,
            "read_compacted": settings.is_read_compacted or None,
            "initialPosition": CommandSubscribe.Earliest if settings.initial_position else CommandSubscribe.Latest,
            "metadata": [KeyValue(key=k, value=v) for k, v in (settings.properties or {}).items()] or None,
        }
        if settings.key_shared_policy is not None and settings.consumer_type == ConsumerType.KeyShared:
            fields["keySharedMeta"] = settings.key_shared_policy.to_wire()
        start = self._resubscribe_start()
        if start is not None:
            fields["start_message_id"] = MessageIdData(ledgerId=start.ledger_id() & _U64, entryId=start.entry_id() & _U64)
        return fields

    def _resubscribe_start(self) -> MessageId | None:
        """Where the broker should start: readers resume after their last message, seeks at the target."""
        if self._seek_pending:
            self._seek_pending = False
            return None if self._seek_by_time else self._start_id
        if self.settings.durable:
            self._start_id = None  # the durable cursor knows; a seek's filter ends with its reconnect
            return None
        last = self.last_dequeued
        if last is not None:
            self._start_id = last
            self._start_inclusive = False
        return self._start_id

    def _create_initial_subscription(self, topic: str, name: str) -> None:
        from . import subscribe

        subscribe(self.client, topic, name, initial_position=1).close()

    # ---- what the connection calls (reader thread) ----

    def handle_message(self, body: Any, frame: Any) -> None:
        """Queue the entry as it is; the receiving thread unpacks it."""
        self._zero_queue_asked = False
        self.queue.put(QueuedEntry(self, self.epoch, body, frame.entry))

    def handle_active_change(self, is_active: bool) -> None:
        """Failover: the broker says whether this consumer now receives the partition's messages."""
        self.is_active = is_active
        log.info("consumer %s on %s is now %s", self.consumer_name, self.topic, "active" if is_active else "inactive")

    def handle_end_of_topic(self) -> None:
        """The topic was terminated and everything was delivered."""
        self.reached_end_of_topic = True

    def handle_broker_close(self) -> None:
        """The broker closed this consumer (seek, unload): subscribe again."""
        self._lost()

    def connection_lost(self, connection: Any) -> None:
        """The connection dropped: subscribe again once a broker answers."""
        self._lost()

    def _lost(self) -> None:
        with self._state_lock:
            self._ready.clear()
            self._connection = None
            if self._closing or self._reconnecting:
                return  # the running (re)subscribe sees the loss and goes round again
            self._reconnecting = True
        self._start_reconnect()

    def _start_reconnect(self) -> None:
        threading.Thread(target=self._reconnect, name=f"pulsar-reconnect-{self.consumer_id}", daemon=True).start()

    def _settled(self) -> bool:
        """After a subscribe: end the reconnect, unless the connection was lost meanwhile."""
        with self._state_lock:
            if self._connection is None:
                return False
            self._reconnecting = False
            return True

    def _reconnect(self) -> None:
        backoff = Backoff()
        while not self._closing:
            try:
                self._subscribe_once(reconnect=True)
                if self._settled():
                    log.info("consumer %s resubscribed to %s", self.consumer_name, self.topic)
                    return
                reason = "connection lost again"
            except PulsarException as exc:
                if exc.result in _RESUBSCRIBE_FATAL:
                    log.error("consumer %s cannot resubscribe to %s: %s", self.consumer_name, self.topic, exc)
                    self.failure = exc
                    self.queue.close()  # wakes receivers, who then raise the failure
                    break
                reason = str(exc)
            delay = backoff.next()
            log.info("resubscribing %s to %s failed (%s); retrying in %.1f s", self.consumer_name, self.topic, reason, delay)
            if self._closed_event.wait(delay):
                break
        with self._state_lock:
            self._reconnecting = False

    # ---- flow ----

    def _send_flow(self, permits: int) -> bool:
        connection = self._connection
        if connection is None:
            return False
        log.debug("FLOW %d for %s", permits, self.topic)
        return connection.send_command(commands.make(T.FLOW, consumer_id=self.consumer_id, messagePermits=permits))

    def ask_one(self) -> None:
        """Zero queue: before waiting, ask the broker for exactly one message (once)."""
        if not self._zero_queue_asked and self._connection is not None:
            self._zero_queue_asked = True
            self.permits.request_one()

    # ---- unpacking (the receiving thread) ----

    def unpack(self, item: QueuedEntry) -> list[Message]:
        """Turn one queued entry into the messages the application should see."""
        body = item.command
        ledger = _signed(body.message_id.ledgerId)
        entry = _signed(body.message_id.entryId)
        try:
            metadata, payload = split_entry(item.entry)
        except FrameError as exc:
            log.error("discarding a malformed entry %d:%d of %s: %s", ledger, entry, self.topic, exc)
            self.permits.returned(1)
            return []
        count = metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else 0
        if self.acks.is_duplicate(ledger, entry):
            self.permits.returned(max(count, 1))
            return []
        chunk_ids = None
        if metadata.num_chunks_from_msg > 1:
            completed = self.chunks.add(metadata, bytes(payload), MessageId(self.partition, ledger, entry))
            self._ack_dropped_chunks()
            if completed is None:
                self.permits.returned(1)  # a chunk is not a message: ask for the next one
                return []
            metadata, payload, chunk_ids = completed.metadata, completed.payload, completed.chunk_ids
        try:
            payload = decompress(metadata.compression, payload, metadata.uncompressed_size)
        except CompressionError as exc:
            log.error("discarding entry %d:%d of %s: %s", ledger, entry, self.topic, exc)
            self.permits.returned(max(count, 1))
            return []
        redelivery_count = body.redelivery_count
        delivery = Delivery(
            self, self.epoch, ledger, entry, self.partition, count, metadata, self.topic, redelivery_count, self._id_topic
        )
        if not count:
            if self._is_prior(ledger, entry, -1):
                self.permits.returned(1)
                return []
            if chunk_ids is not None:
                delivery.chunk_ids = chunk_ids
                with self._ack_lock:
                    self._chunk_ids[(ledger, entry)] = chunk_ids
            messages = [Message(delivery, -1, bytes(payload), None)]
        else:
            ack_set = body.ack_set
            mask = unacked_mask(ack_set, count) if ack_set else None
            bits = (1 << count) - 1 if mask is None else mask
            with self._ack_lock:
                pending = self._batch_unacked.get((ledger, entry))
                if pending is None:
                    pending = self._batch_unacked[(ledger, entry)] = UnackedIndexes(bits)
                else:  # a redelivery: acks of messages from either delivery count
                    pending.bits = bits
            delivery.unacked = pending
            messages = []
            try:
                read_batch(payload, count, Message, delivery, mask, messages)
            except BatchFormatError as exc:
                log.error("discarding the rest of batch %d:%d of %s: %s", ledger, entry, self.topic, exc)
            # Only the start entry itself can hold messages before the start id: test it once per entry.
            start = self._start_id
            if start is not None and ledger == start.ledger_id() and entry <= start.entry_id():
                messages = [m for m in messages if not self._is_prior(ledger, entry, m._index)]
            if len(messages) < count:
                self.permits.returned(count - len(messages))
        if self.dead_letter is not None:
            self.dead_letter.remember(ledger, entry, messages, redelivery_count)
        self.received += len(messages)
        return messages

    def _id(self, message_id: MessageId) -> MessageId:
        if self._id_topic is None:
            return message_id
        from ..protocol.message_id import _with_topic

        return _with_topic(message_id, self._id_topic)

    def _is_prior(self, ledger: int, entry: int, index: int) -> bool:
        start = self._start_id
        # Only ids of the same ledger compare; earliest and latest are of none.
        if start is None or ledger != start.ledger_id() or entry > start.entry_id():
            return False
        if entry < start.entry_id():
            return True
        start_index = start.batch_index()
        if index < 0 or start_index < 0:
            return index < 0 and not self._start_inclusive
        return index < start_index or (index == start_index and not self._start_inclusive)

    def _ack_dropped_chunks(self) -> None:
        dropped = self.chunks.dropped
        while dropped:
            chunk = dropped.pop()
            self.acks.add_entry(chunk.ledger_id(), chunk.entry_id())

    def taken(self, message: Message) -> None:
        """The application took a message: a permit comes back, and the ack-timeout clock starts."""
        self.permits.returned(1)
        if self.unacked is not None:
            self.unacked.add(message.message_id())
        self._last_taken = message

    def taken_many(self, messages: list[Message]) -> None:
        """The application took several messages at once (``batch_receive``)."""
        self.permits.returned(len(messages))
        if self.unacked is not None:
            for message in messages:
                self.unacked.add(message.message_id())
        self._last_taken = messages[-1]

    @property
    def last_dequeued(self) -> MessageId | None:
        """The id of the last message the application took, None before the first."""
        last = self._last_taken
        return None if last is None else last.message_id()

    # ---- acknowledgement ----

    def acknowledge(self, target: Message | MessageId) -> None:
        """Individual ack; a batch entry is acked once all its messages are (or per index if enabled)."""
        # The hot path: fields are read directly, a method call per field costs too much.
        if type(target) is Message:
            delivery = target._delivery
            ledger, entry, index, size = delivery.ledger_id, delivery.entry_id, target._index, delivery.batch_size
            pending = delivery.unacked
        else:
            ledger, entry, index, size = target._ledger_id, target._entry_id, target._batch_index, target._batch_size
            pending = None
        if self.unacked is not None:
            self.unacked.remove(target.message_id() if type(target) is Message else target)
        if self.dead_letter is not None:
            self.dead_letter.forget(ledger, entry)
        chunk_ids = None
        lock = self._ack_lock
        lock.acquire()  # cheaper than ``with`` on this path
        try:
            if self._chunk_ids:
                chunk_ids = self._chunk_ids.pop((ledger, entry), None)
            if index >= 0 and size > 0:
                if pending is None:
                    pending = self._batch_unacked.get((ledger, entry))
                    if pending is None:
                        pending = self._batch_unacked[(ledger, entry)] = UnackedIndexes((1 << size) - 1)
                remaining = pending.bits & ~(1 << index)
                pending.bits = remaining
                if remaining:
                    if self.settings.batch_index_ack_enabled:
                        self.acks.add_batch_indexes(ledger, entry, remaining, size)
                        self._maybe_flush_for_receipt()
                    return
                self._batch_unacked.pop((ledger, entry), None)
        finally:
            lock.release()
        for chunk in chunk_ids or ():
            self.acks.add_entry(chunk.ledger_id(), chunk.entry_id())
        self.acks.add_entry(ledger, entry)
        self._maybe_flush_for_receipt()

    def acknowledge_cumulative(self, target: Message | MessageId) -> None:
        """Ack everything up to this message (Exclusive and Failover only)."""
        if self.settings.shared:
            raise CumulativeAcknowledgementNotAllowedError(
                f"acknowledge_cumulative is not allowed on a {self.settings.consumer_type.name} subscription"
            )
        message_id = target.message_id() if type(target) is Message else target
        ledger, entry, index, size = message_id.ledger_id(), message_id.entry_id(), message_id.batch_index(), message_id.batch_size()
        partial = 0 <= index < size - 1
        with self._ack_lock:
            for key in [k for k in self._batch_unacked if k[1] < entry or (k[1] == entry and not partial)]:
                del self._batch_unacked[key]
        if self.unacked is not None:
            self.unacked.remove_up_to(message_id)
        if not partial:
            self.acks.add_cumulative(ledger, entry)
        elif self.settings.batch_index_ack_enabled:
            # Everything after ``index`` stays unacknowledged in this entry.
            self.acks.add_cumulative(ledger, entry, ((1 << size) - 1) & ~((1 << (index + 1)) - 1), size)
        else:
            self.acks.add_cumulative(ledger, entry - 1)
        self._maybe_flush_for_receipt()

    def _maybe_flush_for_receipt(self) -> None:
        if self.settings.ack_receipt_enabled:
            self.flush_acks(receipt=True)

    def flush_acks(self, receipt: bool = False) -> None:
        """Send pending acks now; with ``receipt``, wait until the broker confirms them."""
        if not receipt:
            self.acks.flush()
            return
        pending = self.acks.take()
        if not pending:
            return
        connection = self._connection_or_wait()
        try:
            for ack_type, ids in self._ack_groups(pending):
                connection.call(T.ACK, self.client.operation_timeout, consumer_id=self.consumer_id, ack_type=ack_type, message_id=ids)
        except PulsarException:
            self.acks.restore(pending)
            raise

    @staticmethod
    def _ack_groups(pending: PendingAcks) -> list[tuple[int, list[MessageIdData]]]:
        groups = []
        if pending.individual:
            groups.append((CommandAck.Individual, pending.individual))
        if pending.cumulative is not None:
            groups.append((CommandAck.Cumulative, [pending.cumulative]))
        return groups

    def _send_acks(self, pending: PendingAcks) -> bool:
        connection = self._connection
        if connection is None:
            return False
        frames = b"".join(
            encode_command(commands.make(T.ACK, consumer_id=self.consumer_id, ack_type=ack_type, message_id=ids))
            for ack_type, ids in self._ack_groups(pending)
        )
        return connection.send(frames)

    def negative_acknowledge(self, target: Message | MessageId) -> None:
        """Redeliver this message after the negative-ack delay."""
        message_id = target.message_id() if type(target) is Message else target
        if self.unacked is not None:
            self.unacked.remove(message_id)
        self.nacks.add(message_id.ledger_id(), message_id.entry_id())

    # ---- redelivery ----

    def _redeliver_timed_out(self, message_ids: list[MessageId]) -> None:
        self.redeliver(sorted({(m.ledger_id(), m.entry_id()) for m in message_ids}))

    def redeliver(self, entries: list[tuple[int, int]]) -> None:
        """Ask for some entries again (Shared, Key_Shared); other types rewind everything unacked."""
        if self.dead_letter is not None:
            entries, doomed = self.dead_letter.split(entries)
            if doomed:
                # Publishing blocks; the timer thread that got us here must not.
                threading.Thread(target=self.dead_letter.divert, args=(doomed,), daemon=True).start()
            if not entries:
                return
        if not self.settings.shared:
            self.redeliver_all()
            return
        connection = self._connection
        if connection is not None:
            ids = [MessageIdData(ledgerId=ledger & _U64, entryId=entry & _U64) for ledger, entry in entries]
            self.redeliveries += len(ids)
            connection.send_command(
                commands.make(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=self.consumer_id, message_ids=ids)
            )

    def redeliver_all(self) -> None:
        """Rewind every unacknowledged message: drop what is queued, and the broker sends it again."""
        self.epoch += 1
        if self.unacked is not None:
            self.unacked.clear()
        connection = self._connection
        if connection is not None:
            self.redeliveries += 1
            connection.send_command(commands.make(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=self.consumer_id))

    def stale_entry(self, item: QueuedEntry) -> None:
        """A queued entry of an older epoch was dropped unread: return its permits if still owed."""
        if item.epoch >= self._connection_epoch:
            try:
                metadata, _ = split_entry(item.entry)
            except FrameError:
                self.permits.returned(1)
                return
            self.permits.returned(max(metadata.num_messages_in_batch, 1))

    def stale_messages(self, delivery: Delivery, count: int) -> None:
        """``count`` unpacked messages of an older epoch were dropped: return their permits if still owed."""
        if delivery.epoch >= self._connection_epoch:
            self.permits.returned(count)

    # ---- seek, last message id ----

    def seek(self, target: MessageId | int) -> None:
        """Move the subscription to a message id or a publish time (ms); the broker reconnects us."""
        self.acks.flush()
        connection = self._connection_or_wait()
        if isinstance(target, MessageId):
            fields = {"message_id": MessageIdData(ledgerId=target.ledger_id() & _U64, entryId=target.entry_id() & _U64)}
            self._start_id, self._seek_by_time = target, False
        else:
            fields = {"message_publish_time": int(target)}
            self._start_id, self._seek_by_time = None, True
        self._start_inclusive = self.settings.start_message_id_inclusive
        self._last_taken = None
        self._seek_pending = True
        self.epoch += 1
        try:
            connection.call(T.SEEK, self.client.operation_timeout, consumer_id=self.consumer_id, **fields)
        except PulsarException:
            self._seek_pending = False
            raise
        self._connection_or_wait()

    def get_last_message_id(self) -> tuple[MessageId, MessageId | None]:
        """(last message id of the partition, the subscription's mark-delete position or None)."""
        connection = self._connection_or_wait()
        response = connection.call(T.GET_LAST_MESSAGE_ID, self.client.operation_timeout, consumer_id=self.consumer_id)
        last = MessageId.from_proto(response.last_message_id)
        last = MessageId(self.partition, last.ledger_id(), last.entry_id(), last.batch_index())
        mark_delete = None
        if response.HasField("consumer_mark_delete_position"):
            position = MessageId.from_proto(response.consumer_mark_delete_position)
            mark_delete = MessageId(self.partition, position.ledger_id(), position.entry_id())
        return self._id(last), mark_delete

    def _connection_or_wait(self) -> Any:
        if self._closing:
            raise AlreadyClosed(f"consumer on {self.topic} is closed")
        if not self._ready.wait(self.client.operation_timeout) or self._connection is None:
            raise Timeout(f"consumer on {self.topic} could not reconnect within {self.client.operation_timeout:g} s")
        return self._connection

    # ---- closing ----

    def unsubscribe(self) -> None:
        """Delete the subscription on the broker, then close locally."""
        connection = self._connection_or_wait()
        connection.call(T.UNSUBSCRIBE, self.client.operation_timeout, consumer_id=self.consumer_id)
        connection.consumers.pop(self.consumer_id, None)
        self._shutdown()

    def close(self) -> None:
        """Flush acks, close the consumer on the broker, and stop the trackers."""
        if self._closing:
            return
        self.acks.flush()
        connection = self._connection
        self._closing = True
        if connection is not None:
            connection.consumers.pop(self.consumer_id, None)
            try:
                connection.call(T.CLOSE_CONSUMER, self.client.operation_timeout, consumer_id=self.consumer_id)
            except PulsarException as exc:
                log.info("closing consumer %s on %s: %s", self.consumer_name, self.topic, exc)
        self._shutdown()

    def _shutdown(self) -> None:
        self._closing = True
        self._closed_event.set()
        self._ready.clear()
        self._connection = None
        self.epoch += 1
        self.acks.close()
        self.nacks.close()
        if self.unacked is not None:
            self.unacked.close()
        if self.dead_letter is not None:
            self.dead_letter.close()

    @property
    def connected(self) -> bool:
        """Whether the consumer is subscribed right now."""
        return self._connection is not None and not self._closing

    def stats(self) -> ConsumerStats:
        """A snapshot of this partition consumer's counters."""
        entries, ready = self.queue.counts(self)
        return ConsumerStats(
            topic=self.topic,
            connected=self.connected,
            receiver_queue_size=self.permits.queue_size,
            available_permits=self.permits.available,
            flows_sent=self.flows_sent,
            permits_sent=self.permits.permits_sent,
            queued_entries=entries,
            queued_messages=ready,
            received=self.received,
            pending_acks=self.acks.pending,
            acks_sent=self.acks.acks_sent,
            pending_nacks=self.nacks.pending,
            nacked=self.nacks.nacked,
            unacked_tracked=self.unacked.pending if self.unacked is not None else 0,
            ack_timeouts=self.unacked.timeouts if self.unacked is not None else 0,
            redeliveries=self.redeliveries,
            reconnects=self.reconnects,
            dead_lettered=self.dead_letter.diverted if self.dead_letter is not None else 0,
            is_active=self.is_active,
        )

    @property
    def flows_sent(self) -> int:
        """FLOW commands sent so far."""
        return self.permits.flows_sent


class Consumer:
    """What ``subscribe`` returns: mirrors ``pulsar.Consumer`` over one or more partition consumers."""

    def __init__(self, client: Any, topic_label: str, settings: ConsumerSettings, queue: ReceiverQueue):
        self._client = client
        self._topic_label = topic_label
        self._settings = settings
        self._queue = queue
        self._children: dict[str, PartitionConsumer] = {}
        self._closed = False
        self._listener_thread: threading.Thread | None = None
        self._listener_paused = threading.Event()
        self._wait_hook: Any = None
        self._listener = settings.message_listener
        self._max_messages, self._max_bytes, self._batch_timeout = settings.batch_receive_limits()

    # ---- children ----

    def _add_child(self, child: PartitionConsumer) -> None:
        child.connect()
        self._children[child.topic] = child

    def _start(self) -> None:
        """Called once the children are subscribed: register with the client, start any listener."""
        self._client.register(self)
        # Zero queue (one partition only): ask the broker for one message before each wait.
        children = list(self._children.values())
        if len(children) == 1 and children[0].zero_queue:
            self._wait_hook = children[0].ask_one
        if self._settings.message_listener is not None:
            self._listener_thread = threading.Thread(target=self._run_listener, name=f"pulsar-listener-{self._topic_label}", daemon=True)
            self._listener_thread.start()

    def _child_for(self, target: Message | MessageId) -> PartitionConsumer:
        if isinstance(target, Message):
            owner = target._delivery.owner
            if owner is None or owner.topic not in self._children:
                raise InvalidConfiguration("the message was not received by this consumer")
            return owner
        if not isinstance(target, MessageId):
            raise InvalidConfiguration(f"expected a Message or a MessageId, got {type(target).__name__}")
        if len(self._children) == 1:
            return next(iter(self._children.values()))
        topic = target.topic_name()
        if topic is not None and topic in self._children:
            return self._children[topic]
        matches = [c for c in self._children.values() if c.partition == target.partition() and c.partition >= 0]
        if len(matches) == 1:
            return matches[0]
        raise InvalidConfiguration(f"cannot tell which topic message id {target} belongs to; pass the Message")

    # ---- receiving ----

    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; raises Timeout after ``timeout_millis`` (None: wait forever)."""
        if self._listener is not None:
            raise InvalidConfiguration("receive() cannot be used with a message_listener")
        if self._closed:
            self._check_open()
        if timeout_millis is not None and (not isinstance(timeout_millis, int) or timeout_millis < 0):
            raise InvalidConfiguration(f"timeout_millis must be None or an int >= 0, got {timeout_millis!r}")
        message = self._queue.take(None if timeout_millis is None else timeout_millis / 1000, self._wait_hook)
        if message is None:
            self._check_open()
            raise Timeout(f"no message within {timeout_millis} ms")
        return message


    def batch_receive(self) -> list[Message]:
        """Pull mode: the messages available within the batch receive policy (possibly none)."""
        self._check_open()
        return self._queue.take_many(self._max_messages, self._max_bytes, self._batch_timeout)

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed(f"consumer on {self._topic_label} is closed")
        for child in self._children.values():
            if child.failure is not None:
                raise child.failure

    # ---- listener ----

    def _run_listener(self) -> None:
        listener = self._settings.message_listener
        while not self._closed:
            if self._listener_paused.is_set():
                time.sleep(0.05)
                continue
            message = self._queue.take(0.1, self._wait_hook)
            if message is None:
                continue
            try:
                listener(self, message)
            except Exception:  # a failing listener must not stop delivery of the next messages
                log.exception("message listener failed on %s", message)

    def pause_message_listener(self) -> None:
        """Stop calling the listener until resumed (messages stay queued)."""
        self._listener_paused.set()

    def resume_message_listener(self) -> None:
        """Call the listener again."""
        self._listener_paused.clear()

    # ---- acknowledgement ----

    def acknowledge(self, message: Message | MessageId) -> None:
        """Acknowledge one message (grouped; with ack receipts, returns once the broker confirmed)."""
        if self._closed:
            self._check_open()
        if type(message) is Message:  # the hot path: the message knows its partition consumer
            owner = message._delivery.owner
            if owner is not None and owner.topic in self._children:
                owner.acknowledge(message)
                return
        self._child_for(message).acknowledge(message)

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge every message up to this one in its partition; refused on Shared and Key_Shared."""
        self._check_open()
        if self._settings.shared:
            raise CumulativeAcknowledgementNotAllowedError(
                f"acknowledge_cumulative is not allowed on a {self._settings.consumer_type.name} subscription"
            )
        self._child_for(message).acknowledge_cumulative(message)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Have the message redelivered after ``negative_ack_redelivery_delay_ms``."""
        self._check_open()
        self._child_for(message).negative_acknowledge(message)

    def redeliver_unacknowledged_messages(self) -> None:
        """Have every unacknowledged message delivered again."""
        self._check_open()
        for child in self._children.values():
            child.redeliver_all()

    # ---- positions ----

    def seek(self, messageid: MessageId | int) -> None:
        """Reset the subscription to a message id or a publish timestamp (ms since the epoch)."""
        self._check_open()
        if not isinstance(messageid, (MessageId, int)) or isinstance(messageid, bool):
            raise InvalidConfiguration(f"messageid must be a MessageId or an int timestamp, got {messageid!r}")
        if isinstance(messageid, MessageId) and len(self._children) > 1:
            if messageid not in (MessageId.earliest, MessageId.latest):
                self._child_for(messageid).seek(messageid)
                return
        for child in self._children.values():
            child.seek(messageid)

    def get_last_message_id(self) -> MessageId:
        """The id of the last message in the topic (one partition only; see get_last_message_ids)."""
        self._check_open()
        if len(self._children) != 1:
            raise InvalidConfiguration("get_last_message_id needs a single partition; use get_last_message_ids()")
        return next(iter(self._children.values())).get_last_message_id()[0]

    def get_last_message_ids(self) -> dict[str, tuple[MessageId, MessageId | None]]:
        """Per partition: (last message id, the subscription's mark-delete position)."""
        self._check_open()
        return {topic: child.get_last_message_id() for topic, child in self._children.items()}

    # ---- identity ----

    def topic(self) -> str:
        """The topic (or topics, or pattern) subscribed to."""
        return self._topic_label

    def subscription_name(self) -> str:
        """The subscription name."""
        return self._settings.subscription_name

    def consumer_name(self) -> str:
        """This consumer's name (of its first partition consumer)."""
        return next(iter(self._children.values())).consumer_name if self._children else (self._settings.consumer_name or "")

    def is_connected(self) -> bool:
        """Whether every partition consumer is subscribed right now."""
        return not self._closed and all(child.connected for child in self._children.values())

    def stats(self) -> ConsumerStats:
        """Counters summed over the partitions (see ConsumerStats; str() gives one log line)."""
        return ConsumerStats.combine(self._topic_label, [child.stats() for child in self._children.values()])

    # ---- closing ----

    def unsubscribe(self) -> None:
        """Delete the subscription on the broker and close this consumer."""
        self._check_open()
        for child in list(self._children.values()):
            child.unsubscribe()
        self._finish_close()

    def close(self) -> None:
        """Flush pending acks and close (idempotent)."""
        if self._closed:
            return
        for child in list(self._children.values()):
            child.close()
        self._finish_close()

    def _finish_close(self) -> None:
        self._closed = True
        self._queue.close()
        self._client.unregister(self)
        if self._listener_thread is not None and self._listener_thread is not threading.current_thread():
            self._listener_thread.join(timeout=5)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Consumer(topic={self._topic_label!r}, subscription={self._settings.subscription_name!r})"


