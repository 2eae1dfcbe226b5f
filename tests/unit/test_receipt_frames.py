"""A SEND_RECEIPT decoded for the reader thread: its CommandSendReceipt, as the generated classes read the whole frame."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from airflow_pulsar.client.protocol.frames import FrameDecoder, FrameError, encode_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, CommandSendReceipt, MessageIdData
from airflow_pulsar.client.protocol.wire import U64_MASK, encode_send_receipt

U64 = st.integers(min_value=0, max_value=U64_MASK)
I32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@st.composite
def receipts(draw: st.DrawFn) -> CommandSendReceipt:
    """Any CommandSendReceipt with its required fields; the message id and the optional fields present or not."""
    receipt = CommandSendReceipt(producer_id=draw(U64), sequence_id=draw(U64))
    if draw(st.booleans()):
        receipt.message_id.CopyFrom(MessageIdData(ledgerId=draw(U64), entryId=draw(U64)))
        if draw(st.booleans()):
            receipt.message_id.partition = draw(I32)
    if draw(st.booleans()):
        receipt.highest_sequence_id = draw(U64)
    return receipt


def frame_of(receipt: CommandSendReceipt, **extra: object) -> bytes:
    return encode_command(BaseCommand(type=BaseCommand.SEND_RECEIPT, send_receipt=receipt, **extra))


@given(st.lists(receipts(), min_size=1, max_size=4), st.booleans())
@example([CommandSendReceipt(producer_id=1, sequence_id=5, message_id=MessageIdData(ledgerId=U64_MASK, entryId=U64_MASK))], False)
def test_every_receipt_comes_as_the_generated_classes_read_it(sent: list[CommandSendReceipt], more_in_the_command: bool) -> None:
    """Alone in its BaseCommand (what brokers send) or not, a receipt is handed on as the one the generated classes decode."""
    # A field of another command in the BaseCommand: the receipt is then read with the whole command.
    extra = {"ping": {}} if more_in_the_command else {}
    stream = b"".join(frame_of(receipt, **extra) for receipt in sent)
    frames = FrameDecoder().feed_messages(stream)
    assert all(type(frame) is CommandSendReceipt for frame in frames)
    assert frames == sent


def test_what_brokers_write_comes_in_order_among_other_frames() -> None:
    """Receipts as our broker writes them (a duplicate's ids of -1 among them) keep their place beside other frames."""
    receipt = encode_command(encode_send_receipt(3, 70_000, 12, 34, 70_000))
    duplicate = encode_command(encode_send_receipt(3, 70_001, -1, -1, 70_001))
    pong = encode_command(BaseCommand(type=BaseCommand.PONG).SerializeToString())
    frames = FrameDecoder().feed_messages(receipt + pong + duplicate)
    first, second, third = frames
    assert (first.producer_id, first.sequence_id, first.message_id.ledgerId, first.message_id.entryId) == (3, 70_000, 12, 34)
    assert second.command.type == BaseCommand.PONG
    assert (third.sequence_id, third.message_id.ledgerId) == (70_001, U64_MASK)


@pytest.mark.parametrize(
    ("receipt", "missing"),
    [
        (CommandSendReceipt(producer_id=1), "sequence_id"),
        (CommandSendReceipt(producer_id=1, sequence_id=2, message_id=MessageIdData(ledgerId=1)), "entryId"),
    ],
)
def test_a_receipt_without_a_required_field_is_refused(receipt: CommandSendReceipt, missing: str) -> None:
    command = BaseCommand(type=BaseCommand.SEND_RECEIPT)
    command.send_receipt.MergeFromString(receipt.SerializePartialToString())
    with pytest.raises(FrameError, match=missing):
        FrameDecoder().feed_messages(encode_command(command.SerializePartialToString()))
