"""One client connection to the standalone broker: the binary protocol's server side.

Frames are decoded as they arrive and handled in order on the event loop. Replies are gathered
and written once per loop iteration, so a burst of receipts or messages costs one system call.
A malformed frame or an unknown command ends this connection only; a SEND whose checksum fails
is answered with a SEND_ERROR and the connection carries on, as with Pulsar.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from ..protocol import commands
from ..protocol.checksum import crc32c
from ..protocol.commands import PROTOCOL_VERSION, encode_message, encode_send_receipt
from ..protocol.frames import FRAME_OVERHEAD, Frame, FrameDecoder, FrameError, encode_command, encode_payload_command
from ..protocol.PulsarApi_pb2 import (
    AuthData,
    BaseCommand,
    CommandAck,
    CommandGetTopicsOfNamespace,
    CommandLookupTopicResponse,
    CommandPartitionedTopicMetadataResponse,
    CommandSubscribe,
    FeatureFlags,
    MessageIdData,
    ServerError,
)
from ..topic_name import InvalidTopicNameError, TopicName
from .authentication import METHOD_NAME, REFRESH_CHALLENGE, AuthenticationFailed, TokenAuthenticator, TokenSession
from .consumer import ServerConsumer
from .service import BrokerService, TopicNotFoundError
from .storage import StoredEntry
from .subscription import SUB_TYPE_NAMES, Subscription, SubscriptionError
from .topic import ServerProducer, Topic

log = logging.getLogger(__name__)

SERVER_VERSION = "airflow-pulsar-standalone"
NON_PERSISTENT_REFUSED = "the embedded broker keeps every topic persistent; non-persistent topics are not served"
# Command types read off the message class: the same ints, without the enum wrapper's slow lookup.
T = BaseCommand
_LATEST = 0x7FFFFFFFFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF


def _signed(value: int) -> int:
    """Message id fields are uint64 on the wire but signed in clients: -1 arrives as 2**64 - 1."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _message_id(ledger_id: int, entry_id: int, partition: int = -1, batch_index: int = -1) -> MessageIdData:
    """A MessageIdData; a negative ledger or entry (-1: none yet, or a duplicate) goes out as uint64."""
    message_id = MessageIdData(ledgerId=ledger_id & _U64, entryId=entry_id & _U64)
    if partition >= 0:
        message_id.partition = partition
    if batch_index >= 0:
        message_id.batch_index = batch_index
    return message_id


class _Rejected(Exception):
    """A request refused with a Pulsar ServerError."""

    def __init__(self, error: int, message: str):
        super().__init__(message)
        self.error = error


class ServerConnection(asyncio.Protocol):
    """Serves one client connection."""

    def __init__(self, service: BrokerService, authenticator: TokenAuthenticator | None = None):
        self.service = service
        self.authenticator = authenticator
        self._auth: TokenSession | None = None
        # Checksums are checked per SEND, which a bad one fails alone (the connection stays), as Pulsar does.
        self.decoder = FrameDecoder(service.config.max_message_size + FRAME_OVERHEAD, verify_checksum=False)
        self.transport: asyncio.Transport | None = None
        self.connected = False
        self.remote_address = ""
        self.producers: dict[int, tuple[ServerProducer, Topic]] = {}
        self.consumers: dict[int, tuple[ServerConsumer, Subscription]] = {}
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._last_received = time.monotonic()
        self._keepalive: asyncio.TimerHandle | None = None
        self._request_ids = 0
        self._closed = False
        # (command, id) of the PRODUCER and SUBSCRIBE requests being served right now.
        self._creating: set[tuple[int, int]] = set()
        self._handlers: dict[int, Callable[[Any], Any]] = {
            T.CONNECT: self._on_connect,
            T.PING: self._on_ping,
            T.PONG: lambda body: None,
            T.LOOKUP: self._on_lookup,
            T.PARTITIONED_METADATA: self._on_partitioned_metadata,
            T.PRODUCER: self._on_producer,
            T.CLOSE_PRODUCER: self._on_close_producer,
            T.SUBSCRIBE: self._on_subscribe,
            T.FLOW: self._on_flow,
            T.ACK: self._on_ack,
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES: self._on_redeliver,
            T.SEEK: self._on_seek,
            T.GET_LAST_MESSAGE_ID: self._on_get_last_message_id,
            T.CONSUMER_STATS: self._on_consumer_stats,
            T.UNSUBSCRIBE: self._on_unsubscribe,
            T.CLOSE_CONSUMER: self._on_close_consumer,
            T.GET_TOPICS_OF_NAMESPACE: self._on_get_topics_of_namespace,
            T.GET_SCHEMA: self._on_get_schema,
            T.AUTH_RESPONSE: self._on_auth_response,
        }

    # ---- transport ----

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.remote_address = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        self._schedule_keepalive()

    def data_received(self, data: bytes) -> None:
        self._last_received = time.monotonic()
        try:
            frames = self.decoder.feed(data)
        except FrameError as exc:
            self._protocol_error(f"malformed frame: {exc}")
            return
        for frame in frames:
            if self._closed:
                return
            self._handle(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._keepalive is not None:
            self._keepalive.cancel()
        if self._auth is not None:
            self._auth.cancel()
        for producer, topic in self.producers.values():
            topic.remove_producer(producer)
        self.producers.clear()
        for consumer, subscription in list(self.consumers.values()):
            self._detach(consumer, subscription)
        self.consumers.clear()

    def _write(self, data: bytes) -> None:
        if self._closed:
            return
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._out and self.transport is not None and not self._closed:
            self.transport.write(b"".join(self._out))
        self._out.clear()

    def _send(self, command_type: int, **fields: Any) -> None:
        self._write(encode_command(commands.make(command_type, **fields)))

    def close(self) -> None:
        """Flush what is queued and close the connection."""
        if self.transport is not None and not self._closed:
            self._flush()
            self._closed = True
            self.transport.close()

    def _protocol_error(self, reason: str) -> None:
        log.warning("closing connection from %s: %s", self.remote_address, reason)
        self._send(T.ERROR, request_id=0, error=ServerError.NotAllowedError, message=reason)
        self.close()

    def _schedule_keepalive(self) -> None:
        interval = self.service.config.keepalive_seconds
        self._keepalive = asyncio.get_running_loop().call_later(interval, self._check_alive)

    def _check_alive(self) -> None:
        interval = self.service.config.keepalive_seconds
        if time.monotonic() - self._last_received > 2 * interval:
            log.info("closing connection from %s: no traffic for %.0f s", self.remote_address, 2 * interval)
            self.close()
            return
        self._send(T.PING)
        self._schedule_keepalive()

    # ---- dispatch ----

    def _handle(self, frame: Frame) -> None:
        command = frame.command
        if command.type == T.SEND and self.connected:
            # The hot path: it needs the frame's entry, not just the command body.
            self._on_send(command.send, frame)
            return
        handler = self._handlers.get(command.type)
        if handler is None:
            self._protocol_error(f"unsupported command {commands.type_name(command.type)}")
            return
        if not self.connected and command.type != T.CONNECT:
            self._protocol_error(f"{commands.type_name(command.type)} before CONNECT")
            return
        body = commands.body(command)
        bad_text = commands.text_fault(body)
        if bad_text is not None:
            self._protocol_error(f"{commands.type_name(command.type)} field {bad_text} is not UTF-8 text")
            return
        result = handler(body)
        if asyncio.iscoroutine(result):
            task = asyncio.ensure_future(self._run_request(result, getattr(body, "request_id", 0)))
            task.add_done_callback(_log_task_error)

    async def _run_request(self, coro: Any, request_id: int) -> None:
        try:
            await coro
        except _Rejected as exc:
            self._send(T.ERROR, request_id=request_id, error=exc.error, message=str(exc))
        except SubscriptionError as exc:
            self._send(T.ERROR, request_id=request_id, error=ServerError.Value(exc.code), message=str(exc))
        except InvalidTopicNameError as exc:
            self._send(T.ERROR, request_id=request_id, error=ServerError.InvalidTopicName, message=str(exc))
        except TopicNotFoundError as exc:
            self._send(T.ERROR, request_id=request_id, error=ServerError.TopicNotFound, message=str(exc))

    # ---- connection-level commands ----

    def _on_connect(self, body: Any) -> None:
        if self.connected:
            self._protocol_error("second CONNECT on one connection")
            return
        if self.authenticator is not None:
            self._auth = TokenSession(
                self.authenticator,
                can_refresh=body.feature_flags.supports_auth_refresh,
                challenge=self._send_auth_challenge,
                refuse=self._refuse_authentication,
                grace=self.service.config.keepalive_seconds,
            )
            try:
                self._auth.authenticate(body.auth_method_name, body.auth_data)
            except AuthenticationFailed as exc:
                self._refuse_authentication(str(exc))
                return
        self.connected = True
        version = min(body.protocol_version, PROTOCOL_VERSION)
        self._send(
            T.CONNECTED,
            server_version=SERVER_VERSION,
            protocol_version=version,
            max_message_size=self.service.config.max_message_size,
            feature_flags=FeatureFlags(supports_partial_producer=True),
        )

    def _on_auth_response(self, body: Any) -> None:
        if self._auth is None:
            self._protocol_error("AUTH_RESPONSE on a broker without authentication")
            return
        try:
            self._auth.authenticate(body.response.auth_method_name, body.response.auth_data)
        except AuthenticationFailed as exc:
            self._refuse_authentication(str(exc))

    def _send_auth_challenge(self) -> None:
        self._send(
            T.AUTH_CHALLENGE,
            server_version=SERVER_VERSION,
            protocol_version=PROTOCOL_VERSION,
            challenge=AuthData(auth_method_name=METHOD_NAME, auth_data=REFRESH_CHALLENGE),
        )

    def _refuse_authentication(self, reason: str) -> None:
        log.warning("refusing connection from %s: %s", self.remote_address, reason)
        # request id -1, as Pulsar answers refused credentials
        self._send(T.ERROR, request_id=_U64, error=ServerError.AuthenticationError, message=reason)
        self.close()

    def _on_ping(self, body: Any) -> None:
        self._send(T.PONG)

    def _topic_or_refuse(self, body: Any, response_type: int, failed: int) -> TopicName | None:
        """Parse a lookup's topic; a bad name, or one in a namespace that does not exist, is
        answered in the response's own error fields, which is where the official client looks for
        it (not in an ERROR frame)."""
        try:
            name = TopicName.parse(body.topic, strict=False)
            self.service.check_namespace(name)
            if name.persistent:
                return name
            # Refused for good (clients do not retry NotAllowedError), where Pulsar serves them.
            error, message = ServerError.NotAllowedError, f"{NON_PERSISTENT_REFUSED}: {name}"
        except InvalidTopicNameError as exc:
            error, message = ServerError.InvalidTopicName, str(exc)
        except TopicNotFoundError as exc:
            error, message = ServerError.TopicNotFound, str(exc)
        self._send(response_type, request_id=body.request_id, response=failed, error=error, message=message)
        return None

    def _on_lookup(self, body: Any) -> None:
        if self._topic_or_refuse(body, T.LOOKUP_RESPONSE, CommandLookupTopicResponse.Failed) is None:
            return
        if body.advertised_listener_name:
            # This broker advertises no named listeners; Pulsar fails such a lookup, and clients retry it.
            self._send(
                T.LOOKUP_RESPONSE,
                request_id=body.request_id,
                response=CommandLookupTopicResponse.Failed,
                error=ServerError.ServiceNotReady,
                message=f"the broker do not have {body.advertised_listener_name} listener",
            )
            return
        # A TLS broker serves pulsar+ssl:// only, which clients read from the Tls field.
        url_field = "brokerServiceUrlTls" if self.service.config.tls else "brokerServiceUrl"
        self._send(
            T.LOOKUP_RESPONSE,
            request_id=body.request_id,
            **{url_field: self.service.service_url},
            response=CommandLookupTopicResponse.Connect,
            authoritative=True,
            proxy_through_service_url=False,
        )

    def _on_partitioned_metadata(self, body: Any) -> None:
        name = self._topic_or_refuse(
            body, T.PARTITIONED_METADATA_RESPONSE, CommandPartitionedTopicMetadataResponse.Failed
        )
        if name is None:
            return
        self._send(
            T.PARTITIONED_METADATA_RESPONSE,
            request_id=body.request_id,
            partitions=self.service.partitions_of(name),
            response=CommandPartitionedTopicMetadataResponse.Success,
        )

    def _on_get_topics_of_namespace(self, body: Any) -> None:
        tenant, _, namespace = body.namespace.partition("/")
        topics = self.service.list_topics(tenant, namespace)
        if body.mode == CommandGetTopicsOfNamespace.NON_PERSISTENT:
            topics = []
        self._send(T.GET_TOPICS_OF_NAMESPACE_RESPONSE, request_id=body.request_id, topics=topics, filtered=False)

    def _on_get_schema(self, body: Any) -> None:
        # Topics here carry raw bytes; Pulsar answers "no schema" the same way.
        self._send(
            T.GET_SCHEMA_RESPONSE,
            request_id=body.request_id,
            error_code=ServerError.TopicNotFound,
            error_message=f"no schema for topic {body.topic}",
        )

    # ---- producers ----

    async def _once(self, command_type: int, entity_id: int, request: Coroutine[Any, Any, None]) -> None:
        """Serve a PRODUCER or SUBSCRIBE unless one for the same id is still being served: as with
        Pulsar, a second one is refused, or it would leave behind an entity the connection forgot."""
        key = (command_type, entity_id)
        if key in self._creating:
            request.close()
            raise _Rejected(
                ServerError.ServiceNotReady, f"{commands.type_name(command_type)} {entity_id} is already in progress"
            )
        self._creating.add(key)
        try:
            await request
        finally:
            self._creating.discard(key)

    def _on_producer(self, body: Any) -> Coroutine[Any, Any, None]:
        return self._once(T.PRODUCER, body.producer_id, self._create_producer(body))

    async def _create_producer(self, body: Any) -> None:
        if body.producer_id in self.producers:
            producer, _ = self.producers[body.producer_id]
            self._send(T.PRODUCER_SUCCESS, request_id=body.request_id, producer_name=producer.name, producer_ready=True)
            return
        name = TopicName.parse(body.topic, strict=False)
        topic = await self.service.get_topic(name)
        producer_name = body.producer_name if body.HasField("producer_name") and body.producer_name else None
        producer = ServerProducer(
            self,
            body.producer_id,
            producer_name or self.service.new_producer_name(),
            body.producer_access_mode,
        )

        def queued() -> None:
            # As Pulsar: a WaitForExclusive producer hears at once that it is queued (not ready),
            # so its client waits for the topic rather than timing the request out.
            self._send(T.PRODUCER_SUCCESS, request_id=body.request_id, producer_name=producer.name, producer_ready=False)

        # A reconnecting producer names the topic epoch it had, so a fenced one stays fenced
        # (a Java long in Pulsar: taken signed, sent back as uint64).
        epoch = _signed(body.topic_epoch) if body.HasField("topic_epoch") else None
        await topic.add_producer(producer, epoch, queued)
        if self._closed:
            topic.remove_producer(producer)
            return
        self.producers[body.producer_id] = (producer, topic)
        self._send(
            T.PRODUCER_SUCCESS,
            request_id=body.request_id,
            producer_name=producer.name,
            last_sequence_id=topic.last_sequence_id(producer.name),
            # Left out until an exclusive producer came.
            topic_epoch=None if topic.topic_epoch is None else topic.topic_epoch & _U64,
            producer_ready=True,
        )

    def _on_send(self, body: Any, frame: Frame) -> None:
        if frame.entry is None or frame.checksum is None:
            self._protocol_error("SEND without a payload")
            return
        entry = self.producers.get(body.producer_id)
        sequence_id = body.sequence_id
        if entry is None:
            self._send(
                T.SEND_ERROR,
                producer_id=body.producer_id,
                sequence_id=sequence_id,
                error=ServerError.NotAllowedError,
                message=f"producer {body.producer_id} is not open on this connection",
            )
            return
        producer, topic = entry
        if crc32c(frame.entry) != frame.checksum:
            self._send(
                T.SEND_ERROR,
                producer_id=body.producer_id,
                sequence_id=sequence_id,
                error=ServerError.ChecksumError,
                message="Checksum failed on the broker",
            )
            return
        highest = body.highest_sequence_id if body.HasField("highest_sequence_id") else sequence_id
        producer_id = body.producer_id

        def done(position: tuple[int, int] | None, error: BaseException | None) -> None:
            if position is None:
                self._send(
                    T.SEND_ERROR,
                    producer_id=producer_id,
                    sequence_id=sequence_id,
                    error=ServerError.PersistenceError,
                    message=f"could not store the entry: {error}",
                )
                return
            # A duplicate's (-1, -1) wraps: the fields are uint64.
            self._write(encode_command(encode_send_receipt(producer_id, sequence_id, position[0], position[1], highest)))

        try:
            # Sequence ids are Java longs in Pulsar: dedup and storage take them signed (the receipt echoes them as sent).
            topic.publish(producer, _signed(sequence_id), _signed(highest), body.num_messages, frame.checksum, frame.entry, done)
        except FrameError as exc:
            self._send(
                T.SEND_ERROR,
                producer_id=producer_id,
                sequence_id=sequence_id,
                error=ServerError.UnknownError,
                message=f"malformed message: {exc}",
            )

    def _on_close_producer(self, body: Any) -> None:
        entry = self.producers.pop(body.producer_id, None)
        if entry is not None:
            producer, topic = entry
            topic.remove_producer(producer)
        self._send(T.SUCCESS, request_id=body.request_id)

    def close_producer(self, producer_id: int) -> None:
        """The broker closes a producer (fenced by an exclusive one): tell the client."""
        if self.producers.pop(producer_id, None) is not None:
            self._send(T.CLOSE_PRODUCER, producer_id=producer_id, request_id=self._next_request_id())

    def _next_request_id(self) -> int:
        self._request_ids += 1
        return self._request_ids

    # ---- consumers ----

    def _on_subscribe(self, body: Any) -> Coroutine[Any, Any, None]:
        return self._once(T.SUBSCRIBE, body.consumer_id, self._subscribe(body))

    async def _subscribe(self, body: Any) -> None:
        if body.consumer_id in self.consumers:
            self._send(T.SUCCESS, request_id=body.request_id)
            return
        name = TopicName.parse(body.topic, strict=False)
        topic = await self.service.get_topic(name, create=body.force_topic_creation)
        durable = body.durable
        sub_type = body.subType
        existing = topic.subscriptions.get(body.subscription)
        if existing is not None:
            existing.check_can_add(sub_type)
            subscription = existing
        else:
            subscription = topic.subscription(body.subscription, sub_type, durable, self._start_entry(topic, body))
        if durable and subscription.cursor.durable:
            await subscription.persist()
        if self._closed:
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
        )
        self.consumers[body.consumer_id] = (consumer, subscription)
        self._send(T.SUCCESS, request_id=body.request_id)
        subscription.add_consumer(consumer, sub_type)

    def _start_entry(self, topic: Topic, body: Any) -> int:
        """Where a new subscription starts: the next entry it will deliver."""
        ledger = topic.ledger
        if body.HasField("start_message_id"):
            start = body.start_message_id
            if start.ledgerId == _LATEST and start.entryId == _LATEST:
                entry = ledger.last_entry_id + 1
            else:
                # Delivery starts at the start entry itself; the client drops what precedes
                # its start id (inclusive or not, batch index included), as with Pulsar.
                entry = max(_signed(start.entryId), 0)
        elif body.initialPosition == CommandSubscribe.Earliest:
            entry = 0
        else:
            entry = ledger.last_entry_id + 1
        if body.HasField("start_message_rollback_duration_sec") and body.start_message_rollback_duration_sec > 0:
            since = int(time.time() * 1000) - body.start_message_rollback_duration_sec * 1000
            entry = min(entry, ledger.entry_at_or_after(since))
        return entry

    def _consumer(self, consumer_id: int) -> tuple[ServerConsumer, Subscription] | None:
        return self.consumers.get(consumer_id)

    def _on_flow(self, body: Any) -> None:
        found = self._consumer(body.consumer_id)
        if found is not None:
            consumer, subscription = found
            subscription.flow(consumer, body.messagePermits)

    def _on_ack(self, body: Any) -> None:
        found = self._consumer(body.consumer_id)
        has_request = body.HasField("request_id")
        if found is None:
            if has_request:
                self._ack_response(body, ServerError.ConsumerNotFound, f"consumer {body.consumer_id} is not open")
            return
        consumer, subscription = found
        ledger_id = subscription.ledger.ledger_id
        last_entry = subscription.ledger.last_entry_id
        changed = False
        try:
            for message_id in body.message_id:
                entry_id = _signed(message_id.entryId)
                # A cumulative ack of the entry before the first one arrives as entry -1; as Pulsar,
                # acks past the last committed entry are ignored (they would skip messages to come).
                if message_id.ledgerId != ledger_id or not 0 <= entry_id <= last_entry:
                    continue
                ack_set = list(message_id.ack_set) or None
                # Never more indexes than the entry holds: the bitset is sized by it.
                batch_size = min(message_id.batch_size, subscription.ledger.entry_messages(entry_id))
                if body.ack_type == CommandAck.Cumulative:
                    changed = subscription.ack_cumulative(entry_id, ack_set, batch_size) or changed
                else:
                    changed = subscription.ack(entry_id, ack_set, batch_size) or changed
        except SubscriptionError as exc:
            log.warning("consumer %s on %s: %s", consumer.name, subscription.topic.name, exc)
            if has_request:
                self._ack_response(body, ServerError.Value(exc.code), str(exc))
            return
        saved = subscription.persist() if changed else None
        if has_request:
            if saved is None:
                self._ack_response(body)
            else:
                saved.add_done_callback(lambda f: self._ack_response(body, *_storage_error(f)))

    def _ack_response(self, body: Any, error: int | None = None, message: str | None = None) -> None:
        self._send(
            T.ACK_RESPONSE, consumer_id=body.consumer_id, request_id=body.request_id, error=error, message=message
        )

    def _on_redeliver(self, body: Any) -> None:
        found = self._consumer(body.consumer_id)
        if found is None:
            return
        consumer, subscription = found
        ids = sorted({_signed(m.entryId) for m in body.message_ids if m.ledgerId == subscription.ledger.ledger_id})
        subscription.redeliver(consumer, ids if body.message_ids else None)

    async def _on_seek(self, body: Any) -> None:
        found = self._consumer(body.consumer_id)
        if found is None:
            raise _Rejected(ServerError.ConsumerNotFound, f"consumer {body.consumer_id} is not open")
        _, subscription = found
        ledger = subscription.ledger
        if body.HasField("message_publish_time"):
            entry = ledger.entry_at_or_after(body.message_publish_time)
        elif body.HasField("message_id"):
            target = body.message_id
            if target.ledgerId == _LATEST and target.entryId == _LATEST:
                entry = ledger.last_entry_id + 1
            else:
                entry = max(_signed(target.entryId), 0)
        else:
            raise _Rejected(ServerError.MetadataError, "SEEK needs a message id or a publish time")
        # As Pulsar does: disconnect every consumer first (they resubscribe at the new position),
        # then move the cursor, then answer.
        for consumer in list(subscription.consumers):
            consumer.sink.close_consumer(consumer.consumer_id)
        subscription.seek(entry)
        # A reader's subscription went with its consumer; Pulsar keeps a reset cursor under its name,
        # and the reader needs it: after a seek by time it resubscribes without a start id.
        subscription.topic.subscriptions.setdefault(subscription.name, subscription)
        saved = subscription.persist()
        if saved is not None:
            await saved
        self._send(T.SUCCESS, request_id=body.request_id)

    def _on_get_last_message_id(self, body: Any) -> None:
        found = self._consumer(body.consumer_id)
        if found is None:
            self._send(
                T.ERROR,
                request_id=body.request_id,
                error=ServerError.ConsumerNotFound,
                message=f"consumer {body.consumer_id} is not open",
            )
            return
        _, subscription = found
        topic = subscription.topic
        ledger = topic.ledger
        partition = topic.name.partition
        size = topic.last_entry_batch_size()
        # As Pulsar: the last index of a batch (clients compare batch indexes), -1 otherwise.
        last = _message_id(ledger.ledger_id, ledger.last_entry_id, partition, size - 1 if size > 1 else -1)
        mark_delete = _message_id(ledger.ledger_id, subscription.cursor.mark_delete, partition)
        self._send(
            T.GET_LAST_MESSAGE_ID_RESPONSE,
            request_id=body.request_id,
            last_message_id=last,
            consumer_mark_delete_position=mark_delete,
        )

    def _on_consumer_stats(self, body: Any) -> None:
        found = self._consumer(body.consumer_id)
        if found is None:
            self._send(
                T.CONSUMER_STATS_RESPONSE,
                request_id=body.request_id,
                error_code=ServerError.ConsumerNotFound,
                error_message=f"consumer {body.consumer_id} is not open",
            )
            return
        consumer, subscription = found
        stats = consumer.stats()
        self._send(
            T.CONSUMER_STATS_RESPONSE,
            request_id=body.request_id,
            msgRateOut=stats["msgRateOut"],
            msgThroughputOut=stats["msgThroughputOut"],
            msgRateRedeliver=subscription.redeliver_rate.rates()[0],
            consumerName=consumer.name,
            # Permits run below zero when a batch outgrows them; the wire field is unsigned.
            availablePermits=max(consumer.permits, 0),
            unackedMessages=consumer.reported_unacked,
            blockedConsumerOnUnackedMsgs=False,
            address=self.remote_address,
            connectedSince=stats["connectedSince"],
            type=SUB_TYPE_NAMES.get(subscription.sub_type, "Exclusive"),
            msgRateExpired=0.0,
            msgBacklog=subscription.backlog()[0],
        )

    async def _on_unsubscribe(self, body: Any) -> None:
        found = self._consumer(body.consumer_id)
        if found is None:
            raise _Rejected(ServerError.ConsumerNotFound, f"consumer {body.consumer_id} is not open")
        consumer, subscription = found
        others = [c for c in subscription.consumers if c is not consumer]
        if others and not body.force:
            raise _Rejected(
                ServerError.NotAllowedError,
                f"subscription {subscription.name} has {len(others)} other connected consumer(s)",
            )
        for other in others:
            other.sink.close_consumer(other.consumer_id)
        self._detach(consumer, subscription)
        self.consumers.pop(body.consumer_id, None)
        saved = subscription.topic.remove_subscription(subscription.name)
        if saved is not None:
            await saved
        self._send(T.SUCCESS, request_id=body.request_id)

    def _on_close_consumer(self, body: Any) -> None:
        found = self.consumers.pop(body.consumer_id, None)
        if found is not None:
            self._detach(*found)
        self._send(T.SUCCESS, request_id=body.request_id)

    def _detach(self, consumer: ServerConsumer, subscription: Subscription) -> None:
        subscription.remove_consumer(consumer)
        if not subscription.cursor.durable and not subscription.consumers:
            # A reader's subscription lives only as long as its consumer.
            subscription.topic.remove_subscription(subscription.name)

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

    def close_consumer(self, consumer_id: int) -> None:
        """The broker closes a consumer (seek, unsubscribe by another): tell the client."""
        found = self.consumers.pop(consumer_id, None)
        if found is not None:
            self._detach(*found)
            self._send(T.CLOSE_CONSUMER, consumer_id=consumer_id, request_id=self._next_request_id())

    def active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        """Tell a Failover consumer whether it is now the active one."""
        self._send(T.ACTIVE_CONSUMER_CHANGE, consumer_id=consumer_id, is_active=is_active)


def _storage_error(future: asyncio.Future[None]) -> tuple[int | None, str | None]:
    error = future.exception()
    return (None, None) if error is None else (ServerError.PersistenceError, f"could not store the ack: {error}")


def _log_task_error(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("request failed", exc_info=task.exception())
