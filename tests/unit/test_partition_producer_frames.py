"""A partition producer driven from raw frames on a scripted connection, without a broker.

The test plays the broker: it reads the PRODUCER and SEND frames the producer writes, comparing
them byte for byte with frames built here from the generated protobuf classes, and answers with
SEND_RECEIPT and SEND_ERROR frames as bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from airflow_pulsar.client.exceptions import Result
from airflow_pulsar.client.producer.limits import PendingLimit
from airflow_pulsar.client.producer.message import OutgoingMessage
from airflow_pulsar.client.producer.partition_producer import PartitionProducer
from airflow_pulsar.client.producer.stats import ProducerStats
from airflow_pulsar.client.protocol.message_id import MessageId
from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    BaseCommand,
    CommandSend,
    CommandSendError,
    CommandSendReceipt,
    MessageIdData,
    MessageMetadata,
    ServerError,
    SingleMessageMetadata,
)
from tests.support.polling import wait_until
from tests.support.producer_config import producer_config
from tests.support.scripted_connection import PRODUCER_NAME, FakeServices, decode_frames, payload_frame, simple_frame

T = BaseCommand.Type
TOPIC = "persistent://public/default/payments-partition-1"
PARTITION = 1
LEDGER = 9

Outcome = tuple[Result, "MessageId | None"]


class Producing:
    """A started partition producer and the id the scripted broker knows it by."""

    def __init__(self, services: FakeServices, **settings: Any) -> None:
        config = producer_config(**settings)
        self.producer = PartitionProducer(services, TOPIC, PARTITION, config, PendingLimit(100), ProducerStats())
        self.producer.start()
        (registered,) = services.connection.written_frames()
        assert registered.command.type == T.PRODUCER
        self.producer_id = registered.command.producer.producer_id

    def send(self, content: bytes) -> Future[Outcome]:
        """``send_async``; the future resolves with what its callback was given."""
        outcome: Future[Outcome] = Future()
        self.producer.send_async(OutgoingMessage(content), lambda result, message_id: outcome.set_result((result, message_id)))
        return outcome


@pytest.fixture
def producing(services: FakeServices) -> Iterator[Callable[..., Producing]]:
    """Start partition producers (``create_producer`` keywords) on the scripted connection; closed after the test."""
    made: list[Producing] = []

    def start(**settings: Any) -> Producing:
        made.append(Producing(services, **settings))
        return made[-1]

    yield start
    for producing in made:
        # close() waits for every pending send: a test answers each of its own.
        assert producing.producer.pending_messages() == 0, "the test left sends without a receipt"
        producing.producer.close()


def send_frame(producer_id: int, sequence_id: int, metadata: MessageMetadata, payload: bytes) -> bytes:
    send = CommandSend(producer_id=producer_id, sequence_id=sequence_id, num_messages=1)
    return payload_frame(BaseCommand(type=T.SEND, send=send), metadata, payload)


def receipt(producer_id: int, sequence_id: int, entry: int, highest_sequence_id: int | None = None) -> bytes:
    body = CommandSendReceipt(
        producer_id=producer_id,
        sequence_id=sequence_id,
        message_id=MessageIdData(ledgerId=LEDGER, entryId=entry),
        highest_sequence_id=sequence_id if highest_sequence_id is None else highest_sequence_id,
    )
    return simple_frame(BaseCommand(type=T.SEND_RECEIPT, send_receipt=body))


def send_error(producer_id: int, sequence_id: int, error: ServerError.ValueType) -> bytes:
    body = CommandSendError(producer_id=producer_id, sequence_id=sequence_id, error=error, message="refused by the test")
    return simple_frame(BaseCommand(type=T.SEND_ERROR, send_error=body))


def publish_time(frame_bytes: bytes) -> int:
    """The publish time the producer stamped on the one SEND frame in ``frame_bytes``."""
    (frame,) = decode_frames(frame_bytes)
    assert frame.entry is not None
    (size,) = struct.unpack_from(">I", frame.entry)
    return MessageMetadata.FromString(frame.entry[4 : 4 + size]).publish_time


def test_send_writes_one_send_frame_with_sequence_id_metadata_and_checksum(
    services: FakeServices, producing: Callable[..., Producing]
) -> None:
    started = producing(batching_enabled=False)
    for sequence_id, content in enumerate((b"hello", b"world")):
        sent = started.send(content)
        written = services.connection.written()
        metadata = MessageMetadata(producer_name=PRODUCER_NAME, sequence_id=sequence_id, publish_time=publish_time(written))
        assert written == send_frame(started.producer_id, sequence_id, metadata, content)
        services.connection.feed(receipt(started.producer_id, sequence_id, entry=sequence_id))
        assert sent.result(1) == (Result.Ok, MessageId(PARTITION, LEDGER, sequence_id))


def test_a_batch_goes_out_as_one_send_of_every_message(services: FakeServices, producing: Callable[..., Producing]) -> None:
    started = producing(batching_enabled=True, batching_max_messages=3, batching_max_publish_delay_ms=60_000)
    sends = [started.send(content) for content in (b"a", b"bb")]
    assert services.connection.written() == b""  # waiting for the third message
    sends.append(started.send(b"ccc"))
    written = services.connection.written()
    metadata = MessageMetadata(
        producer_name=PRODUCER_NAME, sequence_id=0, publish_time=publish_time(written), num_messages_in_batch=3, highest_sequence_id=2
    )
    batch = b""
    for sequence_id, content in enumerate((b"a", b"bb", b"ccc")):
        single = SingleMessageMetadata(payload_size=len(content), sequence_id=sequence_id).SerializeToString()
        batch += struct.pack(">I", len(single)) + single + content
    send = CommandSend(producer_id=started.producer_id, sequence_id=0, num_messages=3, highest_sequence_id=2)
    assert written == payload_frame(BaseCommand(type=T.SEND, send=send), metadata, batch)
    services.connection.feed(receipt(started.producer_id, 0, entry=6, highest_sequence_id=2))
    assert all(sent.done() for sent in sends)


def test_a_receipt_completes_the_send_with_its_message_id(services: FakeServices, producing: Callable[..., Producing]) -> None:
    started = producing(batching_enabled=False)
    first, second = started.send(b"one"), started.send(b"two")
    services.connection.feed(receipt(started.producer_id, 0, entry=4))
    assert first.result(1) == (Result.Ok, MessageId(PARTITION, LEDGER, 4))
    assert not second.done()
    services.connection.feed(receipt(started.producer_id, 1, entry=5))
    assert second.result(1) == (Result.Ok, MessageId(PARTITION, LEDGER, 5))
    assert started.producer.last_sequence_id == 1
    assert started.producer.pending_messages() == 0


def test_a_batch_receipt_gives_each_message_its_batch_index(services: FakeServices, producing: Callable[..., Producing]) -> None:
    started = producing(batching_enabled=True, batching_max_messages=3, batching_max_publish_delay_ms=60_000)
    sends = [started.send(content) for content in (b"a", b"b", b"c")]
    services.connection.feed(receipt(started.producer_id, 0, entry=6, highest_sequence_id=2))
    outcomes = [send.result(1) for send in sends]
    assert outcomes == [(Result.Ok, MessageId(PARTITION, LEDGER, 6, index, 3)) for index in range(3)]
    assert [message_id.batch_size() for _, message_id in outcomes] == [3, 3, 3]  # type: ignore[union-attr]


def test_a_send_error_for_the_message_fails_it(services: FakeServices, producing: Callable[..., Producing]) -> None:
    started = producing(batching_enabled=False)
    failed = started.send(b"corrupt")
    services.connection.feed(send_error(started.producer_id, 0, ServerError.ChecksumError))
    assert failed.result(1) == (Result.ChecksumError, None)
    assert started.producer.pending_messages() == 0
    assert not services.connection.closed


def test_any_other_send_error_closes_the_connection_to_resend(services: FakeServices, producing: Callable[..., Producing]) -> None:
    started = producing(batching_enabled=False)
    pending = started.send(b"kept")
    services.connection.feed(send_error(started.producer_id, 0, ServerError.PersistenceError))
    assert services.connection.closed
    assert not pending.done() and started.producer.pending_messages() == 1
    services.connection.drop()
    wait_until(lambda: len(services.connections) == 2 and T.SEND in services.connection.types_written(), "the resend")
    registered, _ = services.connection.written_frames()
    services.connection.feed(receipt(registered.command.producer.producer_id, 0, entry=3))
    assert pending.result(1) == (Result.Ok, MessageId(PARTITION, LEDGER, 3))


def test_a_send_without_a_receipt_fails_at_the_send_timeout(services: FakeServices, producing: Callable[..., Producing]) -> None:
    started = producing(batching_enabled=False, send_timeout_millis=100)
    expired = started.send(b"unanswered")
    assert expired.result(5) == (Result.Timeout, None)
    assert started.producer.pending_messages() == 0
    services.connection.feed(receipt(started.producer_id, 0, entry=4))  # too late: ignored
    assert started.producer.last_sequence_id == -1


def test_pending_sends_are_written_again_on_the_next_connection(services: FakeServices, producing: Callable[..., Producing]) -> None:
    started = producing(batching_enabled=False)
    pending = started.send(b"again")
    first_frame = services.connection.written()
    services.connection.drop()
    wait_until(lambda: len(services.connections) == 2 and T.SEND in services.connection.types_written(), "the resend")
    registered, resent = services.connection.written_frames()
    new_id = registered.command.producer.producer_id
    assert registered.command.producer.producer_name == PRODUCER_NAME  # dedup is keyed by it
    # The same entry, checksum included, under the producer id of the new connection.
    (original,) = decode_frames(first_frame)
    assert (resent.entry, resent.checksum) == (original.entry, original.checksum)
    assert resent.command.send.producer_id == new_id != started.producer_id
    services.connection.feed(receipt(new_id, 0, entry=8))
    assert pending.result(1) == (Result.Ok, MessageId(PARTITION, LEDGER, 8))


def test_receipts_read_at_once_complete_their_sends_in_order(services: FakeServices, producing: Callable[..., Producing]) -> None:
    started = producing(batching_enabled=False)
    sends = [started.send(content) for content in (b"a", b"b", b"c")]
    # One read holding every receipt: the producer takes them as one run.
    services.connection.feed(b"".join(receipt(started.producer_id, sequence_id, entry=10 + sequence_id) for sequence_id in range(3)))
    assert [sent.result(1) for sent in sends] == [(Result.Ok, MessageId(PARTITION, LEDGER, 10 + index)) for index in range(3)]
    assert started.producer.last_sequence_id == 2 and started.producer.pending_messages() == 0
    assert not started.producer.is_full()


def test_a_receipt_ahead_of_the_pending_sends_completes_those_before_it_and_reconnects(
    services: FakeServices, producing: Callable[..., Producing]
) -> None:
    started = producing(batching_enabled=False)
    first, second = started.send(b"one"), started.send(b"two")
    # Sequence id 5 was never sent: the broker lost ops, so the rest is resent on a new connection.
    services.connection.feed(receipt(started.producer_id, 0, entry=1) + receipt(started.producer_id, 5, entry=2)
                             + receipt(started.producer_id, 1, entry=3))
    assert first.result(1) == (Result.Ok, MessageId(PARTITION, LEDGER, 1))
    assert services.connection.closed and not second.done()
    services.connection.drop()
    wait_until(lambda: len(services.connections) == 2 and T.SEND in services.connection.types_written(), "the resend")
    registered, resent = services.connection.written_frames()
    assert resent.command.send.sequence_id == 1
    services.connection.feed(receipt(registered.command.producer.producer_id, 1, entry=4))
    assert second.result(1) == (Result.Ok, MessageId(PARTITION, LEDGER, 4))
