"""A MESSAGE's command read off its bytes agrees with the generated classes, or leaves them the bytes."""

from __future__ import annotations

import itertools
import struct
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from airflow_pulsar.client.protocol import frames as frames_module
from airflow_pulsar.client.protocol.frames import ChecksumError, FrameDecoder, FrameError, MessageFrame, encode_command, message_frame
from airflow_pulsar.client.protocol.message_command import read_message
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, CommandMessage, MessageIdData, MessageMetadata
from airflow_pulsar.client.protocol.wire import U64_MASK, encode_message, signed64
from tests.support.scripted_connection import payload_frame

U64 = st.integers(min_value=0, max_value=U64_MASK)
I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
I32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
U32 = st.integers(min_value=0, max_value=2**32 - 1)
# What brokers write: ids below 2**63, a small partition or -1, ack_set words of batches under 64 messages.
BROKER_ID = st.integers(min_value=0, max_value=2**63 - 1)


def fields_of(data: bytes) -> tuple[int, int, int, int, tuple[int, ...]] | None:
    """What read_message reads off ``data``, after checking that the entry id's varint lies where it says."""
    read = read_message(data, 0, len(data))
    if read is None:
        return None
    fields, entry_at, entry_end = read
    varint = data[entry_at:entry_end]
    assert all(byte >= 0x80 for byte in varint[:-1]) and varint[-1] < 0x80
    assert sum((byte & 0x7F) << 7 * index for index, byte in enumerate(varint)) == fields[2]
    return fields


def generated(message: CommandMessage) -> tuple[int, int, int, int, tuple[int, ...]]:
    """The fields read_message returns, as the generated classes read them."""
    position = message.message_id
    return message.consumer_id, signed64(position.ledgerId), signed64(position.entryId), message.redelivery_count, tuple(message.ack_set)


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
    fields = fields_of(data)
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
    assert fields_of(data) == (consumer_id, ledger_id, entry_id, redelivery_count or 0, ())
    message = CommandMessage(consumer_id=consumer_id, message_id=MessageIdData(ledgerId=ledger_id, entryId=entry_id), ack_set=ack_set)
    pulsar = message.SerializeToString()
    assert fields_of(pulsar) == generated(message)


@given(st.binary(max_size=40))
@example(b"\x08\x01\x12\x04\x08\x01\x10\x02\x12\x04\x08\x03\x10\x04")  # a message id twice: protobuf merges them
@example(b"\x08\x01\x12\x02\x08\x01")  # no entry id
@example(b"\x12\x04\x08\x01\x10\x02")  # no consumer id
@example(b"\x08\x01\x12\x04\x08\x01\x10\x02\x18\x81\x80\x80\x80\x10")  # a redelivery count past 32 bits
def test_any_bytes_read_agree_with_the_generated_class(data: bytes) -> None:
    """Bytes read off are bytes the generated class parses to the same, complete, command."""
    fields = fields_of(data)
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


def read_generated(stream: bytes) -> list[Any] | type[Exception]:
    """Every frame of ``stream`` as the generated classes read it (a MESSAGE as its MessageFrame), or the error's type."""
    try:
        frames = FrameDecoder().feed(stream)
    except FrameError as exc:
        return type(exc)
    if any(f.command.type == BaseCommand.MESSAGE and f.entry is None for f in frames):
        return FrameError  # a MESSAGE without a payload: refused for the reader thread
    return [message_frame(f.command.message, f.entry) if f.command.type == BaseCommand.MESSAGE else f for f in frames]


def read_fast(stream: bytes, cuts: list[int]) -> list[Any] | type[Exception]:
    """Every frame of ``stream`` as feed_messages reads it, the stream fed in pieces cut at ``cuts``, or the error's type."""
    decoder = FrameDecoder()
    frames: list[Any] = []
    bounds = [0, *sorted(cut % (len(stream) + 1) for cut in cuts), len(stream)]
    try:
        for start, stop in itertools.pairwise(bounds):
            frames += decoder.feed_messages(stream[start:stop])
    except FrameError as exc:
        return type(exc)
    return frames


# Entry ids on both sides of a varint's width (one, two and three bytes), where a run's template stops matching.
ENTRY_IDS = st.sampled_from([0, 1, 126, 127, 128, 129, 16382, 16383, 16384, 2**21 - 1, 2**21, 2**40])


@st.composite
def runs(draw: st.DrawFn) -> list[bytes]:
    """MESSAGE frames as brokers deliver them: runs of a consumer's entries, its ids growing or
    jumping a varint's width, other consumers, ledgers, redelivery counts, batch ack_sets, payloads
    of any size, and a PING between them."""
    frames = []
    for _ in range(draw(st.integers(min_value=1, max_value=12))):
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            frames.append(encode_command(BaseCommand(type=BaseCommand.PING)))
            continue
        ledger, partition = draw(st.sampled_from([7, 300])), draw(st.sampled_from([-1, 0, 3]))
        position = MessageIdData(ledgerId=ledger, entryId=draw(ENTRY_IDS), partition=partition)
        ack_set = draw(st.sampled_from([[], [], [], [5]]))
        message = CommandMessage(consumer_id=draw(st.sampled_from([0, 1, 200])), message_id=position, ack_set=ack_set)
        if draw(st.booleans()):
            message.redelivery_count = draw(st.sampled_from([0, 2]))
        frames.append(message_bytes(message, draw(st.binary(max_size=30)), draw(st.integers(min_value=0, max_value=1000))))
    return frames


def message_bytes(message: CommandMessage, payload: bytes, sequence_id: int = 1) -> bytes:
    """A MESSAGE frame of ``message`` and an entry of one message."""
    metadata = MessageMetadata(producer_name="p", sequence_id=sequence_id, publish_time=2)
    return payload_frame(BaseCommand(type=BaseCommand.MESSAGE, message=message), metadata, payload)


def plain_message(consumer_id: int, ledger_id: int, entry_id: int, payload: bytes) -> bytes:
    """A MESSAGE frame as our broker writes one for a non-partitioned topic."""
    position = MessageIdData(ledgerId=ledger_id, entryId=entry_id, partition=-1)
    return message_bytes(CommandMessage(consumer_id=consumer_id, message_id=position), payload)


@given(runs(), st.lists(st.integers(min_value=0), max_size=3))
@example([plain_message(1, 7, entry, b"x") for entry in (126, 127, 128, 16383, 16384)], [])
def test_runs_of_messages_are_read_as_the_generated_classes_read_them(frames: list[bytes], cuts: list[int]) -> None:
    """A run's later frames are read through the template of its first: the same frames, however the stream is cut."""
    stream = b"".join(frames)
    assert read_fast(stream, cuts) == read_generated(stream)


@given(st.integers(min_value=0), st.integers(min_value=0, max_value=255), ENTRY_IDS)
@example(1, BaseCommand.SEND_RECEIPT, 0)  # the type turned to SEND_RECEIPT: a command without its send_receipt
def test_a_frame_changed_where_the_template_reads_is_read_as_the_generated_classes_read_it(at: int, byte: int, entry_id: int) -> None:
    """Any byte of the second frame's command changed (the entry id's continuation bits, a field's
    key, a size): what the template does not stand for goes the general way, with the same result."""
    first, second = (plain_message(3, 9, entry, b"payload") for entry in (entry_id, entry_id + 1))
    (cmd_size,) = struct.unpack_from(">I", second, 4)
    changed = bytearray(second)
    changed[8 + at % (cmd_size + 2)] = byte  # the command, or the payload section's magic after it
    stream = first + bytes(changed)
    assert read_fast(stream, []) == read_generated(stream)


def test_a_templated_frame_with_a_wrong_checksum_is_refused() -> None:
    """A frame the template reads still has its checksum verified: the connection is not trusted further."""
    first, second = (plain_message(3, 9, entry, b"payload") for entry in (40, 41))
    corrupted = second[:-1] + bytes([second[-1] ^ 1])
    decoder = FrameDecoder()
    assert len(decoder.feed_messages(first)) == 1
    with pytest.raises(ChecksumError):
        decoder.feed_messages(corrupted)


def test_a_run_is_read_field_by_field_once_per_varint_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Of a run's frames only the first, and the first whose entry id takes a byte more, are read field by field."""
    read = []

    def counted(buf: Any, pos: int, end: int) -> Any:
        read.append(pos)
        return read_message(buf, pos, end)

    monkeypatch.setattr(frames_module, "read_message", counted)
    stream = b"".join(plain_message(3, 9, entry, b"payload" * (entry % 3)) for entry in range(100, 140))
    frames = FrameDecoder().feed_messages(stream)
    assert [frame.entry_id for frame in frames] == list(range(100, 140))
    assert len(read) == 2  # entry 100, then 128: two bytes


@given(st.integers(min_value=0, max_value=60))
def test_a_frame_cut_short_after_a_templated_head_is_read_as_the_generated_classes_read_it(kept: int) -> None:
    """A frame whose size leaves less than its command says (its head matching the run's) is read
    as the generated classes read it, or refused as they refuse it: never read past its end."""
    first, second = (plain_message(3, 9, entry, b"payload") for entry in (40, 41))
    kept = min(kept, len(second) - 5)
    cut = struct.pack(">I", kept) + second[4 : 4 + kept]
    assert read_fast(first + cut, []) == read_generated(first + cut)


def test_interleaved_runs_keep_a_template_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """Consumers whose MESSAGEs alternate on one connection (a partitioned topic's) are each read
    through their own template; past MAX_TEMPLATES of them, every frame is still read right."""
    read = []

    def counted(buf: Any, pos: int, end: int) -> Any:
        read.append(pos)
        return read_message(buf, pos, end)

    monkeypatch.setattr(frames_module, "read_message", counted)
    alternating = b"".join(plain_message(consumer_id, 9, entry, b"payload") for entry in range(100, 120) for consumer_id in (1, 2))
    frames = FrameDecoder().feed_messages(alternating)
    assert [(frame.consumer_id, frame.entry_id) for frame in frames] == [(c, e) for e in range(100, 120) for c in (1, 2)]
    assert len(read) == 2
    many = frames_module.MAX_TEMPLATES + 2
    stream = b"".join(plain_message(consumer_id, 9, entry, b"payload") for entry in range(100, 110) for consumer_id in range(many))
    assert read_fast(stream, []) == read_generated(stream)


@pytest.mark.parametrize("command_type", [BaseCommand.SEND_RECEIPT, BaseCommand.CLOSE_PRODUCER, BaseCommand.CLOSE_CONSUMER])
def test_a_command_without_the_body_its_type_requires_is_refused(command_type: int) -> None:
    """Reading an absent body would give its defaults (producer or consumer id 0): it is a malformed frame instead."""
    command = BaseCommand(type=command_type, message=CommandMessage(consumer_id=3, message_id=MessageIdData(ledgerId=1, entryId=2)))
    stream = message_bytes(CommandMessage(consumer_id=3, message_id=MessageIdData(ledgerId=1, entryId=1)), b"x") + encode_command(command)
    for read in (FrameDecoder().feed, FrameDecoder().feed_messages):
        with pytest.raises(FrameError, match=f"{BaseCommand.Type.Name(command_type)} without its "):
            read(stream)
    pong = encode_command(BaseCommand(type=BaseCommand.PONG))  # a body of no required field may be left out
    assert FrameDecoder().feed_messages(pong)[0].command.type == BaseCommand.PONG
