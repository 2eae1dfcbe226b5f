"""The consumer of one topic partition: the protocol conversation and the subscription's state.

A :class:`PartitionConsumer` owns the conversation with the broker for one partition: SUBSCRIBE
(again after a lost connection, see ``connection_handler``), FLOW, MESSAGE, ACK, REDELIVER, SEEK.
Its connection's reader thread only queues whole entries; the thread calling ``receive`` has them
unpacked (see ``unpacker``) and takes the messages, returning permits as it goes (see
``permits``). Acks are grouped, and batch-index ack state kept, by the ack-grouping tracker.

The *epoch* counts (re)subscribes, seeks and redeliver-alls: what was queued under an older one
is dropped unread, and its permits are returned only if the broker still counts them.
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import TYPE_CHECKING, Any

from ..connection import Connection
from ..exceptions import PulsarException, Timeout
from ..protocol import commands
from ..protocol.frames import MessageFrame
from ..protocol.message_id import MessageId, with_topic
from ..protocol.PulsarApi_pb2 import BaseCommand, CommandSubscribe, KeyValue
from .ack_grouping import AckGroupingTracker, PendingAcks, id_data
from .chunks import ChunkedMessageCollector
from .connection_handler import ConnectionHandler
from .dead_letter_processor import DeadLetterProcessor
from .message import Message
from .negative_acks import NegativeAcksTracker
from .permits import Permits
from .receiver_queue import QueuedRun, ReceiverQueue
from .seek import PendingSeek
from .settings import ConsumerSettings, ConsumerType, InitialPosition
from .stats import ConsumerStats
from .unacked_tracker import UnackedMessageTracker
from .unpacker import EntryUnpacker, ReceivedEntry, StartFilter, entry_permits

if TYPE_CHECKING:
    from ..services import ClientServices

log = logging.getLogger(__name__)

# Command types read off the message class: the same ints, without the enum wrapper's slow lookup.
T = BaseCommand
_consumer_ids = itertools.count(1)


class PartitionConsumer:
    """The subscription of one consumer on one topic partition (or non-partitioned topic).

    ``message_topic`` is set on the ids of a multi-topic consumer's messages, so acks by id find
    their partition.
    """

    def __init__(
        self,
        client: ClientServices,
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
        self._id_topic = message_topic
        self.permits = Permits(queue_size, self._send_flow)
        timer = client.timer
        self.acks = AckGroupingTracker(
            self._send_acks, timer, settings.ack_group_time_ms / 1000, settings.ack_group_max_size, settings.batch_index_ack_enabled
        )
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
                lambda dlq, name: client.subscribe(dlq, name, initial_position=InitialPosition.Earliest).close(),
                self.acknowledge,
            )
            if settings.dead_letter_policy is not None
            else None
        )
        # Messages before the start (or at it, unless inclusive) are dropped: readers, seeks.
        self.start = StartFilter(start_message_id, settings.start_message_id_inclusive)
        self.unpacker = EntryUnpacker(topic, partition, self.acks, self.chunks, self.start, message_topic, settings, self.unacked)
        self._seek = PendingSeek()
        self._last_taken: Message | MessageId | None = None  # a message taken, or the last id of entries taken
        self.connection_handler = ConnectionHandler(self.consumer_id, self.consumer_name, topic, self._subscribe_once, self._fail)
        # Set when a resubscribe was refused for good; receive() then raises it.
        self.failure: PulsarException | None = None
        self.is_active: bool | None = None
        self.redeliveries = 0
        self.received = 0

    # ---- subscribing ----

    def connect(self) -> None:
        """The first subscribe: retried while its errors are retryable, until the operation timeout."""
        self.connection_handler.connect(self.client.with_retries)

    def _subscribe_once(self, reconnect: bool) -> None:
        if reconnect:
            self._seek.wait_answer(self.client.operation_timeout)
        connection = self.client.lookup(self.topic)
        self.epoch += 1
        self._connection_epoch = self.epoch
        self.chunks.clear()
        self.permits.clear_request()
        connection.consumers[self.consumer_id] = self
        try:
            start = self._resubscribe_start()
            fields = _subscribe_fields(self.settings, self.topic, self.consumer_id, self.consumer_name, start)
            connection.call(T.SUBSCRIBE, self.client.operation_timeout, **fields)
        except BaseException as exc:
            connection.consumers.pop(self.consumer_id, None)
            if isinstance(exc, Timeout):
                # The broker may have made the consumer after all; unclosed, it would hold the
                # subscription (an Exclusive one would refuse every later subscribe).
                connection.request(T.CLOSE_CONSUMER, consumer_id=self.consumer_id)
            raise
        self.connection_handler.attach(connection, reconnect)
        self.permits.grant_initial()
        self.acks.flush()

    def _resubscribe_start(self) -> MessageId | None:
        """Where the broker should start: readers resume after their last message, seeks at the target."""
        start = self.start
        if self._seek.take():
            return None if self._seek.by_time else start.message_id
        if self.settings.durable:
            start.message_id = None  # the durable cursor knows; a seek's filter ends with its reconnect
            return None
        last = self.last_dequeued
        if last is not None:
            start.message_id = last
            start.inclusive = False
        return start.message_id

    # ---- what the connection calls (reader thread) ----

    def handle_messages(self, messages: list[MessageFrame]) -> None:
        """MESSAGEs in arrival order: queued as they are, the receiving thread unpacks them."""
        self.permits.clear_request()
        self.queue.put_many(self, self.epoch, messages)

    def handle_active_change(self, is_active: bool) -> None:
        """Failover: the broker says whether this consumer now receives the partition's messages."""
        self.is_active = is_active
        log.info("consumer %s on %s is now %s", self.consumer_name, self.topic, "active" if is_active else "inactive")

    def handle_end_of_topic(self) -> None:
        """The topic was terminated and everything was delivered; the official Python API exposes
        no such state, so it is only logged."""
        log.info("consumer %s on %s reached the end of the terminated topic", self.consumer_name, self.topic)

    def handle_broker_close(self) -> None:
        """The broker closed this consumer (seek, unload): subscribe again."""
        self.connection_handler.lost(broker_closed=True)

    def connection_lost(self, connection: Connection) -> None:
        """The connection dropped: subscribe again once a broker answers."""
        self.connection_handler.lost()

    def _fail(self, error: PulsarException) -> None:
        self.failure = error
        self.queue.close()  # wakes receivers, who then raise the failure

    def _send_flow(self, permits: int) -> bool:
        connection = self.connection_handler.connection
        if connection is None:
            return False
        log.debug("FLOW %d for %s", permits, self.topic)
        return connection.send_command(commands.make(T.FLOW, consumer_id=self.consumer_id, messagePermits=permits))

    # ---- what the receiver queue calls (the receiving thread) ----

    def unpack(self, item: QueuedRun) -> list[Message]:
        """Turn a queued run of entries into the messages the application should see."""
        dead_letter = self.dead_letter
        if dead_letter is None:
            messages, permits = self.unpacker.unpack_run(self, self.epoch, item.frames)
        else:  # each entry meets the redelivery limit on its own
            unpacked = [self.unpacker.unpack(self, self.epoch, frame) for frame in item.frames]
            messages = [message for delivered, _ in unpacked for message in dead_letter.admit(delivered)]
            permits = sum(taken for _, taken in unpacked)
        if permits > len(messages):
            self.permits.returned(permits - len(messages))
        self.received += len(messages)
        return messages

    def unpack_entries(self, item: QueuedRun) -> list[ReceivedEntry]:
        """Open a queued run of entries for a bulk reader, without making messages of them."""
        entries, permits = self.unpacker.unpack_entries(item.frames)
        self.permits.returned(permits - sum(entry.message_count() for entry in entries))
        return entries

    def entries_taken(self, entries: list[ReceivedEntry]) -> None:
        """A bulk reader took whole entries: their permits come back."""
        self.permits.returned(sum(entry.message_count() for entry in entries))
        self._last_taken = entries[-1].last_message_id()

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

    def stale_run(self, item: QueuedRun) -> None:
        """A queued run of an older epoch was dropped unread: return its permits if still owed."""
        if item.epoch >= self._connection_epoch:
            self.permits.returned(sum(entry_permits(frame.entry) for frame in item.frames))

    def stale_messages(self, epoch: int, count: int) -> None:
        """``count`` messages (or opened entries' permits) of an older ``epoch`` were dropped: return the permits if still owed."""
        if epoch >= self._connection_epoch:
            self.permits.returned(count)

    @property
    def last_dequeued(self) -> MessageId | None:
        """The id of the last message the application took, None before the first."""
        last = self._last_taken
        return last.message_id() if type(last) is Message else last

    # ---- acknowledgement ----

    def acknowledge(self, target: Message | MessageId) -> None:
        """Individual ack; a batch entry is acked once all its messages are (or per index if enabled)."""
        # The hot path: fields are read directly, a method call per field costs too much.
        if type(target) is Message:
            delivery = target.delivery
            ledger, entry, size, state = delivery.ledger_id, delivery.entry_id, delivery.batch_size, delivery.unacked
            index = target.batch_index
        else:
            ledger, entry, index, size = target.ledger_id(), target.entry_id(), target.batch_index(), target.batch_size()
            state = None
        if self.unacked is not None:
            self.unacked.remove(target.message_id() if type(target) is Message else target)
        if self.dead_letter is not None:
            self.dead_letter.forget(ledger, entry)
        if self.acks.add_message(ledger, entry, index, size, state) and self.settings.ack_receipt_enabled:
            self.flush_acks(receipt=True)

    def acknowledge_cumulative(self, target: Message | MessageId) -> None:
        """Ack everything up to this message (Exclusive and Failover only: the caller checks)."""
        message_id = target.message_id() if type(target) is Message else target
        if self.unacked is not None:
            self.unacked.remove_up_to(message_id)
        self.acks.add_cumulative_message(message_id.ledger_id(), message_id.entry_id(), message_id.batch_index(), message_id.batch_size())
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
            for ack_type, ids in pending.commands():
                connection.call(T.ACK, self.client.operation_timeout, consumer_id=self.consumer_id, ack_type=ack_type, message_id=ids)
        except PulsarException:
            self.acks.restore(pending)
            raise

    def _send_acks(self, pending: PendingAcks) -> bool:
        connection = self.connection_handler.connection
        if connection is None:
            return False
        sent = connection.send(pending.frames(self.consumer_id))
        connection.write_due()
        return sent

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
        connection = self.connection_handler.connection
        if connection is not None:
            ids = [id_data(ledger, entry) for ledger, entry in entries]
            self.redeliveries += len(ids)
            connection.send_command(
                commands.make(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=self.consumer_id, message_ids=ids)
            )

    def redeliver_all(self) -> None:
        """Rewind every unacknowledged message: drop what is queued, and the broker sends it again."""
        self.epoch += 1
        if self.unacked is not None:
            self.unacked.clear()
        connection = self.connection_handler.connection
        if connection is not None:
            self.redeliveries += 1
            connection.send_command(commands.make(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=self.consumer_id))

    # ---- seek, last message id ----

    def seek(self, target: MessageId | int) -> None:
        """Move the subscription to a message id or a publish time (ms); the broker reconnects us."""
        self.acks.flush()
        connection = self._connection_or_wait()
        fields = self._seek.begin(target)
        self.start.message_id = target if isinstance(target, MessageId) else None
        self.start.inclusive = self.settings.start_message_id_inclusive
        self._last_taken = None
        self.epoch += 1
        ok = False
        try:
            connection.call(T.SEEK, self.client.operation_timeout, consumer_id=self.consumer_id, **fields)
            ok = True
        finally:
            self._seek.answered(ok)
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
        return (last if self._id_topic is None else with_topic(last, self._id_topic)), mark_delete

    def _connection_or_wait(self) -> Connection:
        return self.connection_handler.wait(self.client.operation_timeout)

    # ---- closing ----

    def unsubscribe(self) -> None:
        """Delete the subscription on the broker, then close locally."""
        connection = self._connection_or_wait()
        connection.call(T.UNSUBSCRIBE, self.client.operation_timeout, consumer_id=self.consumer_id)
        connection.consumers.pop(self.consumer_id, None)
        self._shutdown()

    def close(self, graceful: bool = True) -> None:
        """Flush acks, close the consumer on the broker, and stop the trackers (``graceful`` False: only stop)."""
        if self.connection_handler.closing:
            return
        if graceful:
            self.acks.flush()
        connection = self.connection_handler.connection
        self.connection_handler.closing = True
        if connection is not None:
            connection.consumers.pop(self.consumer_id, None)
            try:
                if graceful:
                    connection.call(T.CLOSE_CONSUMER, self.client.operation_timeout, consumer_id=self.consumer_id)
            except PulsarException as exc:
                log.info("closing consumer %s on %s: %s", self.consumer_name, self.topic, exc)
        self._shutdown()

    def _shutdown(self) -> None:
        self.connection_handler.close()
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
        return self.connection_handler.connected

    def stats(self) -> ConsumerStats:
        """A snapshot of this partition consumer's counters."""
        entries, ready = self.queue.counts(self)
        return ConsumerStats(
            topic=self.topic,
            connected=self.connected,
            receiver_queue_size=self.permits.queue_size,
            available_permits=self.permits.available,
            flows_sent=self.permits.flows_sent,
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
            reconnects=self.connection_handler.reconnects,
            dead_lettered=self.dead_letter.diverted if self.dead_letter is not None else 0,
            is_active=self.is_active,
        )


def _subscribe_fields(
    settings: ConsumerSettings, topic: str, consumer_id: int, consumer_name: str, start: MessageId | None
) -> dict[str, Any]:
    """The fields of a SUBSCRIBE command."""
    fields: dict[str, Any] = {
        "topic": topic,
        "subscription": settings.subscription_name,
        "subType": settings.consumer_type.wire,
        "consumer_id": consumer_id,
        "consumer_name": consumer_name,
        "durable": settings.durable,
        "read_compacted": settings.is_read_compacted or None,
        "replicate_subscription_state": settings.replicate_subscription_state_enabled or None,
        "initialPosition": CommandSubscribe.Earliest if settings.initial_position else CommandSubscribe.Latest,
        "metadata": [KeyValue(key=k, value=v) for k, v in (settings.properties or {}).items()] or None,
    }
    if settings.key_shared_policy is not None and settings.consumer_type == ConsumerType.KeyShared:
        fields["keySharedMeta"] = settings.key_shared_policy.to_wire()
    if start is not None:
        fields["start_message_id"] = id_data(start.ledger_id(), start.entry_id())
    schema_info = settings.schema.schema_info()
    if schema_info.declared_to_broker:
        fields["schema"] = schema_info.to_proto()
    return fields
