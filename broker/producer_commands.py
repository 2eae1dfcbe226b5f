"""The producer commands of one client connection: PRODUCER (its schema registered or refused
first), SEND and CLOSE_PRODUCER.

A SEND whose checksum fails is answered with a SEND_ERROR and the connection carries on, as
with Pulsar; so is a SEND for a producer this connection does not have open. As Pulsar's
``maxPendingPublishRequestsPerConnection``, once that many SENDs await their receipts the
connection is not read until half of them are answered.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from airflow_pulsar.client.protocol import checksum
from airflow_pulsar.client.protocol.frames import Frame, FrameError, encode_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    BaseCommand,
    CommandCloseProducer,
    CommandProducer,
    CommandSend,
    ServerError,
)
from airflow_pulsar.client.protocol.wire import U64_MASK, encode_send_receipt, signed64
from airflow_pulsar.client.topic_name import TopicName

from .authorization import TopicOperation
from .channel import Channel, InProgress, Rejected, not_authorized, topic_refusal
from .non_persistent import NonPersistentTopic
from .producer_access import ServerProducer
from .read_pauses import PauseReason
from .schema_registry import schema_from_wire, version_bytes
from .topic import Topic
from .transactions.commands import open_transaction

T = BaseCommand


class ProducerCommands:
    """Serves the producers of one connection, and is their ``ProducerSink``."""

    def __init__(self, channel: Channel):
        self.channel = channel
        self.producers: dict[int, tuple[ServerProducer, Topic | NonPersistentTopic]] = {}
        self._in_progress = InProgress(T.PRODUCER)
        self._pending_sends = 0
        self._max_pending_sends = channel.service.config.limits.max_pending_publish_requests_per_connection
        self._holding_reads = False

    @property
    def remote_address(self) -> str:
        """The client's address, for the producer's stats."""
        return self.channel.remote_address

    def on_producer(self, body: CommandProducer) -> Coroutine[Any, Any, None]:
        """PRODUCER: attach a producer to its topic, once per producer id at a time."""
        return self._in_progress.once(body.producer_id, self._create_producer(body))

    async def _create_producer(self, body: CommandProducer) -> None:
        channel = self.channel
        if body.producer_id in self.producers:
            producer, _ = self.producers[body.producer_id]
            channel.send(
                T.PRODUCER_SUCCESS,
                request_id=body.request_id,
                producer_name=producer.name,
                schema_version=producer.schema_version or None,
                producer_ready=True,
            )
            return
        name = TopicName.parse(body.topic, strict=False)
        # As Pulsar: produce permission, and consume permission for a subscription the producer creates.
        refusal = topic_refusal(channel, name, TopicOperation.PRODUCE)
        if refusal is None and body.initial_subscription_name:
            refusal = topic_refusal(channel, name, TopicOperation.SUBSCRIBE, body.initial_subscription_name)
        if refusal is not None:
            raise not_authorized("Produce", refusal)
        topic = await channel.service.open_topic(name)
        topic.check_producer_room()  # as Pulsar: before the schema, which a refused producer would not need
        # As Pulsar: the schema is registered (or refused) before the producer joins the topic.
        schema_version = b""
        if body.HasField("schema"):
            schema_version = version_bytes(await channel.service.add_schema(name, schema_from_wire(body.schema)))
        producer_name = body.producer_name if body.HasField("producer_name") and body.producer_name else None
        producer = ServerProducer(
            self,
            body.producer_id,
            producer_name or channel.service.new_producer_name(),
            body.producer_access_mode,
            schema_version,
        )

        def queued() -> None:
            # As Pulsar: a WaitForExclusive producer hears at once that it is queued (not ready),
            # so its client waits for the topic rather than timing the request out.
            channel.send(
                T.PRODUCER_SUCCESS, request_id=body.request_id, producer_name=producer.name, producer_ready=False
            )

        # A reconnecting producer names the topic epoch it had, so a fenced one stays fenced
        # (a Java long in Pulsar: taken signed, sent back as uint64).
        epoch = signed64(body.topic_epoch) if body.HasField("topic_epoch") else None
        await topic.add_producer(producer, epoch, queued)
        if channel.closed:
            topic.remove_producer(producer)
            return
        self.producers[body.producer_id] = (producer, topic)
        channel.send(
            T.PRODUCER_SUCCESS,
            request_id=body.request_id,
            producer_name=producer.name,
            last_sequence_id=topic.last_sequence_id(producer.name),
            # Left out until an exclusive producer came.
            topic_epoch=None if topic.topic_epoch is None else topic.topic_epoch & U64_MASK,
            schema_version=schema_version or None,
            producer_ready=True,
        )

    def on_send(self, body: CommandSend, frame: Frame) -> None:
        """SEND: publish the frame's entry and answer with a receipt once it is stored."""
        if frame.entry is None or frame.checksum is None:
            self.channel.protocol_error("SEND without a payload")
            return
        producer_id = body.producer_id
        sequence_id = body.sequence_id
        entry = self.producers.get(producer_id)
        if entry is None:
            message = f"producer {producer_id} is not open on this connection"
            self._send_error(producer_id, sequence_id, ServerError.NotAllowedError, message)
            return
        producer, topic = entry
        if checksum.crc32c(frame.entry) != frame.checksum:
            self._send_error(producer_id, sequence_id, ServerError.ChecksumError, "Checksum failed on the broker")
            return
        highest = body.highest_sequence_id if body.HasField("highest_sequence_id") else sequence_id
        txn = None
        if body.HasField("txnid_most_bits"):
            if not isinstance(topic, Topic):
                self._send_error(producer_id, sequence_id, ServerError.NotAllowedError, "transactions need a persistent topic")
                return
            try:
                txn = open_transaction(self.channel, body.txnid_most_bits, body.txnid_least_bits)
            except Rejected as exc:
                self._send_error(producer_id, sequence_id, exc.error, str(exc))
                return
        write = self.channel.write

        def done(position: tuple[int, int] | None, error: BaseException | None) -> None:
            self._send_answered()
            if position is None:
                message = f"could not store the entry: {error}"
                self._send_error(producer_id, sequence_id, ServerError.PersistenceError, message)
                return
            # A duplicate's (-1, -1) wraps: the fields are uint64.
            write(encode_command(encode_send_receipt(producer_id, sequence_id, position[0], position[1], highest)))

        self._pending_sends += 1
        if self._pending_sends >= self._max_pending_sends and not self._holding_reads:
            self._holding_reads = True
            self.channel.pause_reading(PauseReason.PENDING_PUBLISHES)
        try:
            # Sequence ids are Java longs in Pulsar: dedup and storage take them signed (the receipt echoes them as sent).
            if txn is None:
                topic.publish(producer, signed64(sequence_id), signed64(highest), body.num_messages, frame.checksum, frame.entry, done)
            else:
                assert isinstance(topic, Topic)
                topic.publish(
                    producer, signed64(sequence_id), signed64(highest), body.num_messages, frame.checksum, frame.entry, done, txn
                )
        except FrameError as exc:
            self._send_answered()
            self._send_error(producer_id, sequence_id, ServerError.UnknownError, f"malformed message: {exc}")

    def _send_answered(self) -> None:
        self._pending_sends -= 1
        if self._holding_reads and self._pending_sends <= self._max_pending_sends // 2:
            self._holding_reads = False
            self.channel.resume_reading(PauseReason.PENDING_PUBLISHES)

    def _send_error(self, producer_id: int, sequence_id: int, error: int, message: str) -> None:
        self.channel.send(T.SEND_ERROR, producer_id=producer_id, sequence_id=sequence_id, error=error, message=message)

    def on_close_producer(self, body: CommandCloseProducer) -> None:
        """CLOSE_PRODUCER: the client closes a producer."""
        entry = self.producers.pop(body.producer_id, None)
        if entry is not None:
            producer, topic = entry
            topic.remove_producer(producer)
        self.channel.send(T.SUCCESS, request_id=body.request_id)

    def close_producer(self, producer_id: int) -> None:
        """The broker closes a producer (its topic is going away): tell the client."""
        if self.producers.pop(producer_id, None) is not None:
            self.channel.send(T.CLOSE_PRODUCER, producer_id=producer_id, request_id=self.channel.next_request_id())

    def drop_producer(self, producer_id: int) -> None:
        """The broker drops a producer (fenced out) without telling the client."""
        self.producers.pop(producer_id, None)

    def detach_all(self) -> None:
        """The connection is gone: take every producer off its topic."""
        for producer, topic in self.producers.values():
            topic.remove_producer(producer)
        self.producers.clear()
