"""The consumer commands of one client connection: SUBSCRIBE, FLOW, ACK, redelivery, SEEK,
last message id, consumer stats, UNSUBSCRIBE and CLOSE_CONSUMER; and the MESSAGE frames the
subscriptions send back through it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any

from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.frames import encode_payload_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    BaseCommand,
    CommandAck,
    CommandCloseConsumer,
    CommandConsumerStats,
    CommandFlow,
    CommandGetLastMessageId,
    CommandRedeliverUnacknowledgedMessages,
    CommandSeek,
    CommandSubscribe,
    CommandUnsubscribe,
    MessageIdData,
    ServerError,
)
from airflow_pulsar.client.protocol.wire import U64_MASK, encode_message, signed64
from airflow_pulsar.client.schema.info import SchemaType
from airflow_pulsar.client.topic_name import TopicName

from .authorization import TopicOperation
from .channel import Channel, InProgress, Rejected, not_authorized, topic_refusal
from .consumer import ServerConsumer
from .ledger import Ledger
from .non_persistent import NonPersistentSubscription, NonPersistentTopic
from .schema_registry import schema_from_wire
from .storage import StoredEntry
from .subscription import Subscription
from .subscription_rules import SUB_TYPE_NAMES, SubscriptionError
from .topic import Topic
from .topic_stats import subscription_backlog
from .transactions.commands import acknowledge_in_transaction

log = logging.getLogger(__name__)

T = BaseCommand
# Both fields of Pulsar's MessageId.latest: the position after the last entry.
_LATEST = 0x7FFFFFFFFFFFFFFF
# A consumer's subscription and topic, of either domain.
Subscribed = tuple[ServerConsumer, Subscription | NonPersistentSubscription, Topic | NonPersistentTopic]


class ConsumerCommands:
    """Serves the consumers of one connection, and is their ``MessageSink``."""

    def __init__(self, channel: Channel):
        self.channel = channel
        self.consumers: dict[int, Subscribed] = {}
        self._in_progress = InProgress(T.SUBSCRIBE)
        # Bound once: every MESSAGE frame goes out through it.
        self._write = channel.write
        # False while the connection's socket has more waiting than its high water mark.
        self.writable = True

    @property
    def remote_address(self) -> str:
        """The client's address, for the consumer's stats."""
        return self.channel.remote_address

    def _open(self, consumer_id: int) -> Subscribed:
        """The consumer a command names, or Pulsar's refusal when this connection has none by that id."""
        found = self.consumers.get(consumer_id)
        if found is None:
            raise Rejected(ServerError.ConsumerNotFound, f"consumer {consumer_id} is not open")
        return found

    def _open_persistent(self, consumer_id: int, refusal: str) -> tuple[ServerConsumer, Subscription, Topic]:
        """The consumer a command names on a persistent topic; on a non-persistent one, ``refusal``."""
        consumer, subscription, topic = self._open(consumer_id)
        if not isinstance(subscription, Subscription) or not isinstance(topic, Topic):
            raise Rejected(ServerError.NotAllowedError, refusal)
        return consumer, subscription, topic

    # ---- subscribing ----

    def on_subscribe(self, body: CommandSubscribe) -> Coroutine[Any, Any, None]:
        """SUBSCRIBE: attach a consumer to its subscription, once per consumer id at a time."""
        return self._in_progress.once(body.consumer_id, self._subscribe(body))

    async def _subscribe(self, body: CommandSubscribe) -> None:
        channel = self.channel
        if body.consumer_id in self.consumers:
            channel.send(T.SUCCESS, request_id=body.request_id)
            return
        name = TopicName.parse(body.topic, strict=False)
        refusal = topic_refusal(channel, name, TopicOperation.CONSUME, body.subscription)
        if refusal is not None:
            raise not_authorized("subscribe", refusal)
        topic = await channel.service.open_topic(name, create=body.force_topic_creation)
        if body.read_compacted and isinstance(topic, NonPersistentTopic):
            raise Rejected(ServerError.NotAllowedError, "readCompacted only valid on persistent topics")  # Pulsar's words
        if body.read_compacted and body.subType not in (CommandSubscribe.Exclusive, CommandSubscribe.Failover):
            raise Rejected(
                ServerError.NotAllowedError, "Read compacted can only be used with exclusive or failover persistent subscriptions"
            )
        if body.HasField("schema"):
            schema = schema_from_wire(body.schema)
            if schema.schema_type != SchemaType.AUTO_CONSUME:  # it reads whatever the topic has
                await channel.service.add_consumer_schema(topic, schema)
        durable = body.durable
        sub_type = body.subType
        existing = topic.subscriptions.get(body.subscription)
        subscription: Subscription | NonPersistentSubscription
        if existing is not None:
            existing.check_can_add(sub_type)
            subscription = existing
        elif isinstance(topic, NonPersistentTopic):
            subscription = topic.subscription(body.subscription, sub_type)
        else:
            subscription = topic.subscription(body.subscription, sub_type, durable, _start_entry(topic.ledger, body))
        # Only a new subscription is saved: a consumer rejoins an existing one while writes fail.
        saved = subscription.persist() if durable and existing is None else None
        if saved is not None:
            try:
                await saved
            except Exception:
                topic.subscriptions.pop(body.subscription, None)  # not stored: not created
                raise
        if channel.closed:
            return
        if subscription.consumers:
            subscription.check_can_add(sub_type)  # another consumer may have joined meanwhile
        consumer = ServerConsumer(
            subscription,
            self,
            body.consumer_id,
            body.consumer_name or f"consumer-{body.consumer_id}",
            body.priority_level,
            body.keySharedMeta if body.HasField("keySharedMeta") else None,
            body.read_compacted,
        )
        self.consumers[body.consumer_id] = (consumer, subscription, topic)
        channel.send(T.SUCCESS, request_id=body.request_id)
        subscription.add_consumer(consumer, sub_type)

    # ---- delivery and acknowledgement ----

    def on_flow(self, body: CommandFlow) -> None:
        """FLOW: the client grants the consumer more permits."""
        found = self.consumers.get(body.consumer_id)
        if found is not None:
            consumer, subscription, _ = found
            subscription.flow(consumer, body.messagePermits)

    def on_ack(self, body: CommandAck) -> None:
        """ACK: individual or cumulative, with a batch's ack_set; answered only when it has a request id."""
        has_request = body.HasField("request_id")
        try:
            consumer, subscription, topic = self._open(body.consumer_id)
        except Rejected as exc:
            if has_request:
                self._ack_response(body, exc.error, str(exc))
            return
        if not isinstance(subscription, Subscription):  # a non-persistent topic's: nothing to acknowledge
            if has_request:
                self._ack_response(body)
            return
        if body.HasField("txnid_most_bits"):
            self._ack_in_transaction(body, subscription)
            return
        ledger = subscription.ledger
        ledger_id = ledger.ledger_id
        last_entry = ledger.last_entry_id
        changed = False
        try:
            for message_id in body.message_id:
                entry_id = signed64(message_id.entryId)
                # A cumulative ack of the entry before the first one arrives as entry -1; as Pulsar,
                # acks past the last committed entry are ignored (they would skip messages to come).
                if message_id.ledgerId != ledger_id or not 0 <= entry_id <= last_entry:
                    continue
                ack_set = list(message_id.ack_set) or None
                # Never more indexes than the entry holds: the bitset is sized by it.
                batch_size = min(message_id.batch_size, ledger.entry_messages(entry_id))
                if body.ack_type == CommandAck.Cumulative:
                    changed = subscription.ack_cumulative(entry_id, ack_set, batch_size) or changed
                else:
                    changed = subscription.ack(entry_id, ack_set, batch_size) or changed
        except SubscriptionError as exc:
            log.warning("consumer %s on %s: %s", consumer.name, topic.name, exc)
            if has_request:
                self._ack_response(body, ServerError.Value(exc.code), str(exc))
            return
        saved = subscription.persist() if changed else None
        if has_request:
            if saved is None:
                self._ack_response(body)
            else:
                saved.add_done_callback(lambda f: self._ack_response(body, *_storage_error(f)))

    def _ack_in_transaction(self, body: CommandAck, subscription: Subscription) -> None:
        """An ACK in a transaction: held by the subscription's pending acknowledgements, answered once saved."""
        try:
            saved = acknowledge_in_transaction(self.channel, subscription, body)
        except Rejected as exc:
            self._ack_response(body, exc.error, str(exc))
            return
        except SubscriptionError as exc:
            self._ack_response(body, ServerError.Value(exc.code), str(exc))
            return
        if saved is None:
            self._ack_response(body)
        else:
            asyncio.ensure_future(saved).add_done_callback(lambda f: self._ack_response(body, *_storage_error(f)))

    def _ack_response(self, body: CommandAck, error: int | None = None, message: str | None = None) -> None:
        self.channel.send(
            T.ACK_RESPONSE, consumer_id=body.consumer_id, request_id=body.request_id, error=error, message=message
        )

    def on_redeliver(self, body: CommandRedeliverUnacknowledgedMessages) -> None:
        """REDELIVER_UNACKNOWLEDGED_MESSAGES: take back the entries named, or all the consumer holds."""
        found = self.consumers.get(body.consumer_id)
        if found is None:
            return
        consumer, subscription, _ = found
        if isinstance(subscription, Subscription):
            ledger_id = subscription.ledger.ledger_id
            ids = sorted({signed64(m.entryId) for m in body.message_ids if m.ledgerId == ledger_id})
            subscription.redeliver(consumer, ids if body.message_ids else None)

    async def on_seek(self, body: CommandSeek) -> None:
        """SEEK: move the subscription's cursor to a message id or a publish time; on a
        non-persistent topic, which keeps nothing to go back to, it succeeds doing nothing (as Pulsar)."""
        _, any_subscription, _ = self._open(body.consumer_id)
        if not isinstance(any_subscription, Subscription):
            self.channel.send(T.SUCCESS, request_id=body.request_id)
            return
        _, subscription, topic = self._open_persistent(body.consumer_id, "")
        ledger = subscription.ledger
        if body.HasField("message_publish_time"):
            entry = ledger.entry_at_or_after(body.message_publish_time)
        elif body.HasField("message_id"):
            entry = _entry_of(ledger, body.message_id)
        else:
            raise Rejected(ServerError.MetadataError, "SEEK needs a message id or a publish time")
        subscription.reset(entry)
        # A reader's subscription went with its consumer; Pulsar keeps a reset cursor under its name,
        # and the reader needs it: after a seek by time it resubscribes without a start id.
        topic.subscriptions.setdefault(subscription.name, subscription)
        saved = subscription.persist()
        if saved is not None:
            await saved
        self.channel.send(T.SUCCESS, request_id=body.request_id)

    # ---- queries ----

    def on_get_last_message_id(self, body: CommandGetLastMessageId) -> None:
        """GET_LAST_MESSAGE_ID: the topic's last message id and the subscription's mark-delete."""
        _, subscription, topic = self._open_persistent(
            body.consumer_id,
            "getLastMessageId is not supported on non-persistent topic",  # Pulsar's words
        )
        ledger = topic.ledger
        partition = topic.name.partition
        # As Pulsar: the last entry a reader may be given (not past an open transaction, nor a
        # marker or an aborted entry), with the last index of a batch (clients compare batch indexes).
        last_entry = topic.transactions.last_dispatchable_entry()
        size = ledger.entry_messages(last_entry) if last_entry >= 0 else 0
        last = _message_id(ledger.ledger_id, last_entry, partition, size - 1 if size > 1 else -1)
        mark_delete = _message_id(ledger.ledger_id, subscription.cursor.mark_delete, partition)
        self.channel.send(
            T.GET_LAST_MESSAGE_ID_RESPONSE,
            request_id=body.request_id,
            last_message_id=last,
            consumer_mark_delete_position=mark_delete,
        )

    def on_consumer_stats(self, body: CommandConsumerStats) -> None:
        """CONSUMER_STATS: the consumer's rates, permits and backlog, refusals in the response itself."""
        try:
            consumer, subscription, _ = self._open(body.consumer_id)
        except Rejected as exc:
            self.channel.send(
                T.CONSUMER_STATS_RESPONSE, request_id=body.request_id, error_code=exc.error, error_message=str(exc)
            )
            return
        stats = consumer.stats()
        self.channel.send(
            T.CONSUMER_STATS_RESPONSE,
            request_id=body.request_id,
            msgRateOut=stats["msgRateOut"],
            msgThroughputOut=stats["msgThroughputOut"],
            msgRateRedeliver=subscription.redeliver_rate.rates()[0],
            consumerName=consumer.name,
            # Permits run below zero when a batch outgrows them; the wire field is unsigned.
            availablePermits=max(consumer.permits, 0),
            unackedMessages=consumer.reported_unacked,
            blockedConsumerOnUnackedMsgs=consumer.blocked,
            address=self.channel.remote_address,
            connectedSince=stats["connectedSince"],
            type=SUB_TYPE_NAMES.get(subscription.sub_type, "Exclusive"),
            msgRateExpired=0.0,
            msgBacklog=(subscription_backlog(subscription) if isinstance(subscription, Subscription) else subscription.backlog())[0],
        )

    # ---- leaving ----

    async def on_unsubscribe(self, body: CommandUnsubscribe) -> None:
        """UNSUBSCRIBE: delete the subscription, refused while other consumers are on it unless forced."""
        consumer, subscription, topic = self._open(body.consumer_id)
        others = [c for c in subscription.consumers if c is not consumer]
        if others and not body.force:
            raise Rejected(
                ServerError.NotAllowedError,
                f"subscription {subscription.name} has {len(others)} other connected consumer(s)",
            )
        for other in others:
            other.sink.close_consumer(other.consumer_id)
        _detach(consumer, subscription, topic)
        self.consumers.pop(body.consumer_id, None)
        saved = topic.remove_subscription(subscription.name)
        if saved is not None:
            await saved
        self.channel.send(T.SUCCESS, request_id=body.request_id)

    def on_close_consumer(self, body: CommandCloseConsumer) -> None:
        """CLOSE_CONSUMER: the client closes a consumer."""
        found = self.consumers.pop(body.consumer_id, None)
        if found is not None:
            _detach(*found)
        self.channel.send(T.SUCCESS, request_id=body.request_id)

    def detach_all(self) -> None:
        """The connection is gone: take every consumer off its subscription."""
        for found in list(self.consumers.values()):
            _detach(*found)
        self.consumers.clear()

    # ---- MessageSink ----

    def send_message(
        self,
        consumer_id: int,
        ledger_id: int,
        partition: int,
        entry: StoredEntry,
        redelivery_count: int,
        ack_set: list[int] | None,
    ) -> None:
        """Deliver one entry to a consumer on this connection."""
        # Clients take the partition of a received id from here (-1 when not a partition).
        if ack_set is None:
            command: Any = encode_message(consumer_id, ledger_id, entry.entry_id, partition, redelivery_count or None)
        else:
            command = commands.make(
                T.MESSAGE,
                consumer_id=consumer_id,
                message_id=MessageIdData(ledgerId=ledger_id, entryId=entry.entry_id, partition=partition),
                redelivery_count=redelivery_count or None,
                ack_set=ack_set,
            )
        self._write(encode_payload_command(command, entry.data, entry.checksum))

    def flush(self) -> None:
        """Write the MESSAGEs queued so far now: a read block leaves as it is dispatched."""
        self.channel.flush()

    def pause_dispatch(self) -> None:
        """The connection's socket is backed up: its consumers are sent nothing until it drains."""
        self.writable = False

    def resume_dispatch(self) -> None:
        """The socket drained: dispatch again to every subscription with a consumer here (a
        non-persistent one has nothing waiting: what came meanwhile was dropped)."""
        self.writable = True
        for subscription in {id(s): s for _, s, _ in self.consumers.values()}.values():
            if isinstance(subscription, Subscription):
                subscription.dispatch()

    def close_consumer(self, consumer_id: int) -> None:
        """The broker closes a consumer (seek, unsubscribe by another): tell the client."""
        found = self.consumers.pop(consumer_id, None)
        if found is not None:
            _detach(*found)
            self.channel.send(T.CLOSE_CONSUMER, consumer_id=consumer_id, request_id=self.channel.next_request_id())

    def active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        """Tell a Failover consumer whether it is now the active one."""
        self.channel.send(T.ACTIVE_CONSUMER_CHANGE, consumer_id=consumer_id, is_active=is_active)


def _detach(consumer: ServerConsumer, subscription: Subscription | NonPersistentSubscription, topic: Topic | NonPersistentTopic) -> None:
    subscription.remove_consumer(consumer)
    if isinstance(subscription, Subscription) and not subscription.cursor.durable and not subscription.consumers:
        # A reader's subscription lives only as long as its consumer.
        topic.remove_subscription(subscription.name)


def _entry_of(ledger: Ledger, message_id: MessageIdData) -> int:
    """The entry a start or seek message id names. Delivery starts at that entry itself; the
    client drops what precedes its start id (inclusive or not, batch index included), as with Pulsar."""
    if message_id.ledgerId == _LATEST and message_id.entryId == _LATEST:
        return ledger.last_entry_id + 1
    return max(signed64(message_id.entryId), 0)


def _start_entry(ledger: Ledger, body: CommandSubscribe) -> int:
    """Where a new subscription starts: the next entry it will deliver."""
    if body.HasField("start_message_id"):
        entry = _entry_of(ledger, body.start_message_id)
    elif body.initialPosition == CommandSubscribe.Earliest:
        entry = 0
    else:
        entry = ledger.last_entry_id + 1
    if body.HasField("start_message_rollback_duration_sec") and body.start_message_rollback_duration_sec > 0:
        since = int(time.time() * 1000) - body.start_message_rollback_duration_sec * 1000
        entry = min(entry, ledger.entry_at_or_after(since))
    return entry


def _message_id(ledger_id: int, entry_id: int, partition: int = -1, batch_index: int = -1) -> MessageIdData:
    """A MessageIdData; a negative ledger or entry (-1: none yet, or a duplicate) goes out as uint64."""
    message_id = MessageIdData(ledgerId=ledger_id & U64_MASK, entryId=entry_id & U64_MASK)
    if partition >= 0:
        message_id.partition = partition
    if batch_index >= 0:
        message_id.batch_index = batch_index
    return message_id


def _storage_error(future: asyncio.Future[None]) -> tuple[int | None, str | None]:
    error = future.exception()
    return (None, None) if error is None else (ServerError.PersistenceError, f"could not store the ack: {error}")
