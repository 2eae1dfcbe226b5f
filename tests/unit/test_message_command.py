"""A MESSAGE's command read off its bytes agrees with the generated classes, or leaves them the bytes."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from airflow_pulsar.client.protocol.frames import FrameDecoder, MessageFrame, message_frame
from airflow_pulsar.client.protocol.message_command import read_message
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, CommandMessage, MessageIdData, MessageMetadata
from airflow_pulsar.client.protocol.wire import U64_MASK, encode_message, signed64
from scripted_connection import payload_frame

U64 = st.integers(min_value=0, max_value=U64_MASK)
I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
I32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
U32 = st.integers(min_value=0, max_value=2**32 - 1)
# What brokers write: ids below 2**63, a small partition or -1, ack_set words of batches under 64 messages.
BROKER_ID = st.integers(min_value=0, max_value=2**63 - 1)


def generated(message: CommandMessage) -> tuple[int, int, int, int, list[int]]:
    """The fields read_message returns, as the generated classes read them."""
    position = message.message_id
    return message.consumer_id, signed64(position.ledgerId), signed64(position.entryId), message.redelivery_count, list(message.ack_set)


@st.composite
def commands(draw: st.DrawFn) -> CommandMessage:
    """Any CommandMessage with its required fields: optional fields present or not, any values."""
    position = MessageIdData(ledgerId=draw(U64), entryId=draw(U64))
    if draw(st.booleans()):
        position.partition = draw(I32)
    if draw(st.booleans()):
        position.batch_index = draw(I32)
    message = CommandMessage(consumer_id=draw(U64), message_id=position, ack_set=draw(st.lists(I64, max_size=3)))
    if draw(st.booleans()):
        message.redelivery_count = draw(U32)
    if draw(st.booleans()):
        message.consumer_epoch = draw(U64)
    return message


@given(commands())
@example(CommandMessage(consumer_id=1, message_id=MessageIdData(ledgerId=2**63, entryId=0)))
@example(CommandMessage(consumer_id=1, message_id=MessageIdData(ledgerId=5, entryId=6, partition=-1), ack_set=[-1]))
def test_a_command_is_read_as_the_generated_class_reads_it_or_left_to_it(message: CommandMessage) -> None:
    data = message.SerializeToString()
    fields = read_message(data, 0, len(data))
    if fields is not None:
        assert fields == generated(message)


@given(U64.filter(lambda value: value < 2**63), BROKER_ID, BROKER_ID, st.integers(min_value=-1, max_value=2**31 - 1),
       st.one_of(st.none(), U32.filter(lambda value: value < 2**31)), st.lists(st.integers(min_value=0, max_value=2**63 - 1), max_size=2))
@example(7, 12345, 678901, -1, None, [])  # a non-partitioned topic on our broker
@example(0, 0, 0, 128, None, [])  # a partition that takes two bytes
def test_what_brokers_write_is_read_off_the_bytes(consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set):
    """Our broker's MESSAGE (partition written, -1 in ten bytes) and Apache Pulsar's never need the generated classes."""
    data = encode_message(consumer_id, ledger_id, entry_id, partition, redelivery_count)[3:]  # the body, past the envelope
    data = data[1:] if data[0] < 0x80 else data[2:]  # and its length
    assert read_message(data, 0, len(data)) == (consumer_id, ledger_id, entry_id, redelivery_count or 0, [])
    message = CommandMessage(consumer_id=consumer_id, message_id=MessageIdData(ledgerId=ledger_id, entryId=entry_id), ack_set=ack_set)
    pulsar = message.SerializeToString()
    assert read_message(pulsar, 0, len(pulsar)) == generated(message)


@given(st.binary(max_size=40))
@example(b"\x08\x01\x12\x04\x08\x01\x10\x02\x12\x04\x08\x03\x10\x04")  # a message id twice: protobuf merges them
@example(b"\x08\x01\x12\x02\x08\x01")  # no entry id
@example(b"\x12\x04\x08\x01\x10\x02")  # no consumer id
@example(b"\x08\x01\x12\x04\x08\x01\x10\x02\x18\x81\x80\x80\x80\x10")  # a redelivery count past 32 bits
def test_any_bytes_read_agree_with_the_generated_class(data: bytes) -> None:
    """Bytes read off are bytes the generated class parses to the same, complete, command."""
    fields = read_message(data, 0, len(data))
    if fields is None:
        return
    message = CommandMessage.FromString(data)
    assert message.IsInitialized()
    assert fields == generated(message)


@given(st.lists(commands(), min_size=1, max_size=4), st.binary(max_size=20))
def test_the_decoder_hands_on_every_message_frame_as_the_generated_classes_read_it(messages: list[CommandMessage], payload: bytes) -> None:
    """feed_messages gives the MessageFrame of each MESSAGE (fast or not) and plain Frames otherwise, in order."""
    metadata = MessageMetadata(producer_name="p", sequence_id=1, publish_time=2)
    stream = b"".join(payload_frame(BaseCommand(type=BaseCommand.MESSAGE, message=m), metadata, payload) for m in messages)
    frames = FrameDecoder().feed_messages(stream)
    entries = [frame.entry for frame in FrameDecoder().feed(stream)]
    assert all(isinstance(frame, MessageFrame) for frame in frames)
    assert frames == [message_frame(m, entry) for m, entry in zip(messages, entries, strict=True)]
