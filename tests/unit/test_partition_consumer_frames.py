"""A partition consumer driven from raw frames on a scripted connection, without a broker.

The test plays the broker: it feeds MESSAGE and CLOSE_CONSUMER frames as bytes and reads back the
SUBSCRIBE, FLOW and ACK frames the consumer writes, comparing them byte for byte with frames built
here from the generated protobuf classes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_pulsar.client.consumer.message import Message
from airflow_pulsar.client.consumer.partition_consumer import PartitionConsumer
from airflow_pulsar.client.consumer.receiver_queue import ReceiverQueue
from airflow_pulsar.client.consumer.settings import ConsumerSettings, ConsumerType
from airflow_pulsar.client.protocol.message_id import MessageId
from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    BaseCommand,
    CommandAck,
    CommandCloseConsumer,
    CommandFlow,
    CommandMessage,
    CommandSubscribe,
    MessageIdData,
    MessageMetadata,
    SingleMessageMetadata,
)
from tests.support.polling import wait_until
from tests.support.scripted_connection import FakeServices, decode_frames, payload_frame, simple_frame

T = BaseCommand.Type
TOPIC = "persistent://public/default/orders-partition-3"
PARTITION = 3
LEDGER = 41
QUEUE_SIZE = 10

Subscribe = Callable[..., tuple[PartitionConsumer, ReceiverQueue]]


@pytest.fixture
def subscribed(services: FakeServices) -> Iterator[Subscribe]:
    """Subscribe partition consumers (``ConsumerSettings`` keywords; acks sent at once); closed after the test."""
    made: list[PartitionConsumer] = []

    def subscribe(**settings: Any) -> tuple[PartitionConsumer, ReceiverQueue]:
        config = ConsumerSettings("sub", **{"receiver_queue_size": QUEUE_SIZE, "ack_group_time_ms": 0, **settings})
        queue = ReceiverQueue()
        consumer = PartitionConsumer(services, TOPIC, PARTITION, config, queue, config.receiver_queue_size)
        consumer.connect()
        made.append(consumer)
        return consumer, queue

    yield subscribe
    for consumer in made:
        consumer.close()


def flow(consumer_id: int, permits: int) -> bytes:
    return simple_frame(BaseCommand(type=T.FLOW, flow=CommandFlow(consumer_id=consumer_id, messagePermits=permits)))


def ack(consumer_id: int, *ids: MessageIdData) -> bytes:
    body = CommandAck(consumer_id=consumer_id, ack_type=CommandAck.Individual, message_id=list(ids))
    return simple_frame(BaseCommand(type=T.ACK, ack=body))


def message_frame(
    consumer_id: int, entry: int, payloads: list[bytes], batched: bool, ack_set: list[int] | None = None, redelivery_count: int = 0
) -> bytes:
    """A MESSAGE frame carrying one entry: one message, or a batch of ``payloads`` in one entry."""
    command = BaseCommand(
        type=T.MESSAGE,
        message=CommandMessage(
            consumer_id=consumer_id,
            message_id=MessageIdData(ledgerId=LEDGER, entryId=entry),
            ack_set=ack_set or [],
            redelivery_count=redelivery_count,
        ),
    )
    metadata = MessageMetadata(producer_name="producer-1", sequence_id=entry, publish_time=1_700_000_000_000)
    if not batched:
        (payload,) = payloads
        return payload_frame(command, metadata, payload)
    metadata.num_messages_in_batch = len(payloads)
    batch = b""
    for index, payload in enumerate(payloads):
        single = SingleMessageMetadata(payload_size=len(payload), sequence_id=entry + index).SerializeToString()
        batch += struct.pack(">I", len(single)) + single + payload
    return payload_frame(command, metadata, batch)


def take(queue: ReceiverQueue) -> Message:
    message = queue.take(1.0)
    assert message is not None, "no message within 1 s"
    return message


def test_subscribe_writes_subscribe_then_a_flow_for_the_whole_queue(services: FakeServices, subscribed: Subscribe) -> None:
    consumer, _ = subscribed(consumer_type=ConsumerType.Shared)
    written = services.connection.written()
    subscribe_frame, _ = decode_frames(written)
    sent = subscribe_frame.command.subscribe
    assert subscribe_frame.command.type == T.SUBSCRIBE
    assert (sent.topic, sent.subscription, sent.subType, sent.consumer_id) == (TOPIC, "sub", CommandSubscribe.Shared, consumer.consumer_id)
    assert written == simple_frame(subscribe_frame.command) + flow(consumer.consumer_id, QUEUE_SIZE)
    assert services.connection.consumers == {consumer.consumer_id: consumer}


def test_a_batched_entry_yields_the_unacked_messages_with_their_ids(services: FakeServices, subscribed: Subscribe) -> None:
    consumer, queue = subscribed()
    # Redelivered with index 1 acknowledged already: the ack_set's set bits are the indexes still unacknowledged.
    services.connection.feed(message_frame(consumer.consumer_id, 7, [b"a", b"bb", b"ccc"], batched=True, ack_set=[0b101]))
    first, second = take(queue), take(queue)
    assert queue.take(0.05) is None
    assert [first.data(), second.data()] == [b"a", b"ccc"]
    assert [first.message_id(), second.message_id()] == [MessageId(PARTITION, LEDGER, 7, 0, 3), MessageId(PARTITION, LEDGER, 7, 2, 3)]
    assert first.message_id().batch_size() == 3
    assert first.topic_name() == TOPIC


def test_a_batch_is_acknowledged_as_one_entry_once_every_index_is(services: FakeServices, subscribed: Subscribe) -> None:
    consumer, queue = subscribed()
    services.connection.feed(message_frame(consumer.consumer_id, 7, [b"a", b"bb", b"ccc"], batched=True, ack_set=[0b101]))
    first, last = take(queue), take(queue)
    services.connection.written()
    consumer.acknowledge(first)
    assert services.connection.written() == b""  # index 2 is still unacknowledged
    consumer.acknowledge(last)
    assert services.connection.written() == ack(consumer.consumer_id, MessageIdData(ledgerId=LEDGER, entryId=7))


def test_batch_index_acks_send_the_indexes_still_unacknowledged(services: FakeServices, subscribed: Subscribe) -> None:
    consumer, queue = subscribed(batch_index_ack_enabled=True)
    services.connection.feed(message_frame(consumer.consumer_id, 9, [b"a", b"bb", b"ccc"], batched=True))
    messages = [take(queue) for _ in range(3)]
    services.connection.written()
    consumer.acknowledge(messages[1])
    assert services.connection.written() == ack(
        consumer.consumer_id, MessageIdData(ledgerId=LEDGER, entryId=9, ack_set=[0b101], batch_size=3)
    )


def test_a_single_message_entry_is_acknowledged_by_its_id(services: FakeServices, subscribed: Subscribe) -> None:
    consumer, queue = subscribed()
    services.connection.feed(message_frame(consumer.consumer_id, 12, [b"one"], batched=False))
    message = take(queue)
    assert message.message_id() == MessageId(PARTITION, LEDGER, 12)
    assert message.message_id().batch_index() == -1
    services.connection.written()
    consumer.acknowledge(message)
    assert services.connection.written() == ack(consumer.consumer_id, MessageIdData(ledgerId=LEDGER, entryId=12))


def test_permits_go_back_in_one_flow_once_half_the_queue_was_taken(services: FakeServices, subscribed: Subscribe) -> None:
    consumer, queue = subscribed()
    for entry in range(QUEUE_SIZE):
        services.connection.feed(message_frame(consumer.consumer_id, entry, [b"m%d" % entry], batched=False))
    services.connection.written()
    for entry in range(QUEUE_SIZE // 2 - 1):
        assert take(queue).data() == b"m%d" % entry
    assert services.connection.written() == b""
    take(queue)
    assert services.connection.written() == flow(consumer.consumer_id, QUEUE_SIZE // 2)
    assert consumer.stats().permits_sent == QUEUE_SIZE + QUEUE_SIZE // 2


def test_a_batch_costs_its_size_in_permits(services: FakeServices, subscribed: Subscribe) -> None:
    consumer, queue = subscribed()
    services.connection.written()
    services.connection.feed(message_frame(consumer.consumer_id, 3, [b"a", b"b", b"c", b"d", b"e"], batched=True))
    for _ in range(4):
        take(queue)
    assert services.connection.written() == b""
    take(queue)
    assert services.connection.written() == flow(consumer.consumer_id, 5)


def test_close_consumer_from_the_broker_resubscribes_and_drops_what_was_queued(
    services: FakeServices, subscribed: Subscribe
) -> None:
    consumer, queue = subscribed()
    connection = services.connection
    connection.feed(message_frame(consumer.consumer_id, 20, [b"before"], batched=False))
    connection.written()
    close = CommandCloseConsumer(consumer_id=consumer.consumer_id, request_id=0)
    connection.feed(simple_frame(BaseCommand(type=T.CLOSE_CONSUMER, close_consumer=close)))
    # The reconnect runs on a thread of its own: SUBSCRIBE again, then a whole queue of permits.
    wait_until(lambda: connection.types_written() == [T.SUBSCRIBE, T.FLOW], "the resubscribe and its flow")
    written = connection.written()
    subscribe_frame, _ = decode_frames(written)
    assert subscribe_frame.command.subscribe.consumer_id == consumer.consumer_id
    assert written == simple_frame(subscribe_frame.command) + flow(consumer.consumer_id, QUEUE_SIZE)
    assert consumer.connected and consumer.stats().reconnects == 1
    # The entry queued under the old subscription is dropped; the broker sends it again.
    connection.feed(message_frame(consumer.consumer_id, 20, [b"before"], batched=False, redelivery_count=1))
    message = take(queue)
    assert (message.data(), message.message_id(), message.redelivery_count()) == (b"before", MessageId(PARTITION, LEDGER, 20), 1)
    assert queue.take(0.05) is None


def test_a_lost_connection_resubscribes_on_a_new_one(services: FakeServices, subscribed: Subscribe) -> None:
    consumer, _ = subscribed()
    first = services.connection
    first.drop()
    wait_until(lambda: len(services.connections) == 2 and services.connection.types_written() == [T.SUBSCRIBE, T.FLOW], "the resubscribe")
    assert services.connection.consumers == {consumer.consumer_id: consumer}
    assert first.consumers == {}


def test_subscribe_carries_read_compacted_and_replicated_state_when_asked(services: FakeServices, subscribed: Subscribe) -> None:
    subscribed()
    plain = decode_frames(services.connection.written())[0].command.subscribe
    assert not plain.HasField("read_compacted") and not plain.HasField("replicate_subscription_state")
    subscribed(is_read_compacted=True, replicate_subscription_state_enabled=True)
    asked = decode_frames(services.connections[-1].written())[0].command.subscribe
    assert asked.read_compacted and asked.replicate_subscription_state
