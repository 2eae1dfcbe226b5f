"""A SEND_RECEIPT decoded for the reader thread: a SendReceipt whose CommandSendReceipt is the one
the generated classes read off the whole frame, read off its bytes when it has the shape of an
earlier one."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from airflow_pulsar.client.protocol.frames import FrameDecoder, FrameError, encode_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, CommandSendReceipt, MessageIdData
from airflow_pulsar.client.protocol.receipts import SendReceipt
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
    assert all(type(frame) is SendReceipt for frame in frames)
    assert [frame.command() for frame in frames] == sent
    assert [(frame.producer_id, frame.sequence_id) for frame in frames] == [(r.producer_id, r.sequence_id) for r in sent]


# Sequence and entry ids on both sides of a varint's width, where a receipt's shape stops matching.
IDS = st.sampled_from([0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**40, 2**63, U64_MASK])


@given(st.lists(st.tuples(st.sampled_from([3, 4]), IDS, IDS, st.booleans()), min_size=1, max_size=12))
def test_receipts_read_off_a_learned_shape_are_those_the_generated_classes_read(sent: list[tuple[int, int, int, bool]]) -> None:
    """Receipts of one or two producers (as brokers write them, one id or two), each its sequence id
    and message id as the generated classes read them, whether or not an earlier one's shape matched."""
    receipts = [
        CommandSendReceipt(producer_id=producer, sequence_id=sequence, message_id=MessageIdData(ledgerId=12, entryId=entry),
                           highest_sequence_id=sequence + 1 if batched and sequence < U64_MASK else sequence)
        for producer, sequence, entry, batched in sent
    ]
    stream = b"".join(frame_of(receipt) for receipt in receipts)
    decoder, half = FrameDecoder(), len(stream) // 2  # fed in two pieces: a frame cut in the middle waits for its rest
    frames = decoder.feed_messages(stream[:half]) + decoder.feed_messages(stream[half:])
    assert [(frame.producer_id, frame.sequence_id, frame.message_id, frame.highest_sequence_id) for frame in frames] == [
        (r.producer_id, r.sequence_id, r.message_id, r.highest_sequence_id) for r in receipts
    ]


def test_a_run_of_receipts_is_read_off_the_shape_of_its_first() -> None:
    stream = b"".join(encode_command(encode_send_receipt(3, sequence, 12, 100 + sequence, sequence)) for sequence in range(200, 260))
    frames = FrameDecoder().feed_messages(stream)
    assert [frame.sequence_id for frame in frames] == list(range(200, 260))
    assert [frame._parsed is None for frame in frames] == [False] + [True] * 59  # only the first was parsed field by field
    assert [frame.message_id.entryId for frame in frames] == [100 + sequence for sequence in range(200, 260)]


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
