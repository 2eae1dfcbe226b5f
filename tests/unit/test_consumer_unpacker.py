"""The entry unpacker, fed raw entries as a producer writes them: batches, ack_sets, compression, chunks, start ids."""

from __future__ import annotations

import pytest

from airflow_pulsar.client.consumer.ack_grouping import AckGroupingTracker
from airflow_pulsar.client.consumer.chunks import ChunkedMessageCollector
from airflow_pulsar.client.consumer.unpacker import EntryUnpacker, StartFilter, entry_permits
from airflow_pulsar.client.protocol.batch import ack_set_words, encode_single
from airflow_pulsar.client.protocol.compression import CompressionType, compress
from airflow_pulsar.client.protocol.frames import encode_entry, message_frame
from airflow_pulsar.client.protocol.message_id import MessageId
from airflow_pulsar.client.protocol.PulsarApi_pb2 import CommandMessage, MessageIdData, MessageMetadata
from airflow_pulsar.client.protocol.wire import encode_plain_metadata
from airflow_pulsar.client.timer import Timer

LEDGER = 7
PARTITION = 2
TOPIC = "persistent://public/default/orders-partition-2"
TIMER = Timer("test-timer")  # grouped acks wait an hour: they stay pending for the test to look at


def unpacker(start: MessageId | None = None, inclusive: bool = False, max_pending_chunks: int = 10) -> EntryUnpacker:
    acks = AckGroupingTracker(lambda pending: True, TIMER, group_time=3600)
    chunks = ChunkedMessageCollector(max_pending_chunks, auto_ack_oldest=True)
    return EntryUnpacker(TOPIC, PARTITION, acks, chunks, StartFilter(start, inclusive))


def command(entry: int, ack_set: list[int] | None = None, redelivery_count: int = 0, ledger: int = LEDGER) -> CommandMessage:
    return CommandMessage(
        consumer_id=1, message_id=MessageIdData(ledgerId=ledger, entryId=entry), ack_set=ack_set or [], redelivery_count=redelivery_count
    )


def batch_entry(payloads: list[bytes], compression: int = 0, keys: list[str] | None = None) -> bytes:
    batch = b"".join(
        encode_single(payload, sequence_id=i, partition_key=keys[i] if keys else None, properties={"n": str(i)})
        for i, payload in enumerate(payloads)
    )
    body = compress(compression, batch) if compression else batch
    metadata = encode_plain_metadata("producer-1", 0, 1700, compression, len(batch), num_messages_in_batch=len(payloads))
    return encode_entry(metadata, bytes(body))


def single_entry(payload: bytes) -> bytes:
    return encode_entry(encode_plain_metadata("producer-1", 3, 1700), payload)


def chunk_entry(uuid: str, chunk_id: int, chunks: int, part: bytes, total: int) -> bytes:
    metadata = MessageMetadata(
        producer_name="producer-1",
        sequence_id=9,
        publish_time=1700,
        uuid=uuid,
        chunk_id=chunk_id,
        num_chunks_from_msg=chunks,
        total_chunk_msg_size=total,
    )
    return encode_entry(metadata, part)


def test_a_batch_splits_into_its_messages_with_their_ids_keys_and_properties() -> None:
    entry = batch_entry([b"a", b"bb", b"ccc"], keys=["k0", "k1", "k2"])
    messages, permits = unpacker().unpack(None, 4, message_frame(command(11, redelivery_count=2), entry))
    assert permits == 3
    assert [m.data() for m in messages] == [b"a", b"bb", b"ccc"]
    assert [m.partition_key() for m in messages] == ["k0", "k1", "k2"]
    assert [m.properties() for m in messages] == [{"n": "0"}, {"n": "1"}, {"n": "2"}]
    assert [m.message_id() for m in messages] == [MessageId(PARTITION, LEDGER, 11, i, 3) for i in range(3)]
    assert all(m.redelivery_count() == 2 and m.topic_name() == TOPIC for m in messages)
    assert messages[0].delivery.epoch == 4


def test_a_single_message_entry_is_one_message_without_a_batch_index() -> None:
    messages, permits = unpacker().unpack(None, 1, message_frame(command(5), single_entry(b"payload")))
    assert permits == 1
    assert [m.data() for m in messages] == [b"payload"]
    assert messages[0].message_id() == MessageId(PARTITION, LEDGER, 5)
    assert messages[0].message_id().batch_index() == -1


def test_a_redelivered_batch_leaves_out_what_its_ack_set_marks_acknowledged() -> None:
    still_unacked = 0b1010  # indexes 1 and 3 of 4
    entry_unpacker = unpacker()
    entry = batch_entry([b"0", b"1", b"2", b"3"])
    messages, permits = entry_unpacker.unpack(None, 1, message_frame(command(6, ack_set_words(still_unacked, 4)), entry))
    assert [m.data() for m in messages] == [b"1", b"3"]
    assert permits == 4  # two of them come back to the broker as discarded
    # The batch's ack state starts from the ack_set, shared by its messages.
    assert messages[0].delivery.unacked.bits == still_unacked
    assert entry_unpacker.acks.track_batch(LEDGER, 6, still_unacked) is messages[0].delivery.unacked


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE], ids=lambda c: c.name)
def test_a_compressed_batch_is_decompressed_before_it_is_split(codec: CompressionType) -> None:
    payloads = [bytes([i]) * 50 for i in range(5)]
    messages, permits = unpacker().unpack(None, 1, message_frame(command(8), batch_entry(payloads, compression=codec)))
    assert permits == 5 and [m.data() for m in messages] == payloads


def test_an_entry_that_does_not_decompress_is_discarded_whole() -> None:
    metadata = encode_plain_metadata("producer-1", 0, 1700, CompressionType.ZLIB, 100, num_messages_in_batch=4)
    messages, permits = unpacker().unpack(None, 1, message_frame(command(9), encode_entry(metadata, b"not zlib at all")))
    assert messages == [] and permits == 4


def test_a_malformed_entry_is_discarded_for_one_permit() -> None:
    assert unpacker().unpack(None, 1, message_frame(command(9), b"\x00\x00\x00\xff\x0a")) == ([], 1)


def test_a_batch_cut_short_keeps_the_messages_before_the_fault() -> None:
    batch = encode_single(b"one", sequence_id=0) + encode_single(b"two", sequence_id=1)
    metadata = encode_plain_metadata("producer-1", 0, 1700, num_messages_in_batch=3)  # says three, holds two
    messages, permits = unpacker().unpack(None, 1, message_frame(command(10), encode_entry(metadata, batch)))
    assert [m.data() for m in messages] == [b"one", b"two"] and permits == 3


def test_an_entry_with_an_ack_pending_is_a_duplicate() -> None:
    entry_unpacker = unpacker()
    entry_unpacker.acks.add_entry(LEDGER, 12)
    assert entry_unpacker.unpack(None, 1, message_frame(command(12), batch_entry([b"a", b"b"]))) == ([], 2)
    entry_unpacker.acks.add_cumulative(LEDGER, 20)
    assert entry_unpacker.unpack(None, 1, message_frame(command(19), single_entry(b"x"))) == ([], 1)
    # The cumulative position itself is not.
    assert len(entry_unpacker.unpack(None, 1, message_frame(command(20), single_entry(b"x")))[0]) == 1


def test_chunks_reassemble_into_one_message_that_acks_every_chunk() -> None:
    entry_unpacker = unpacker()
    parts = [b"hel", b"lo w", b"orld"]
    results = [
        entry_unpacker.unpack(None, 1, message_frame(command(30 + i), chunk_entry("u1", i, len(parts), part, 11)))
        for i, part in enumerate(parts)
    ]
    assert results[0] == ([], 1) and results[1] == ([], 1)
    messages, permits = results[2]
    assert permits == 1 and [m.data() for m in messages] == [b"hello world"]
    assert messages[0].message_id() == MessageId(PARTITION, LEDGER, 32)
    assert entry_unpacker.acks.add_message(LEDGER, 32) is True
    assert entry_unpacker.acks.take().entries == {(LEDGER, 30), (LEDGER, 31), (LEDGER, 32)}


def test_a_chunked_message_dropped_for_room_has_its_chunks_acknowledged() -> None:
    entry_unpacker = unpacker(max_pending_chunks=1)
    assert entry_unpacker.unpack(None, 1, message_frame(command(40), chunk_entry("a", 0, 2, b"aa", 4))) == ([], 1)
    assert entry_unpacker.unpack(None, 1, message_frame(command(41), chunk_entry("b", 0, 2, b"bb", 4))) == ([], 1)  # "a" makes room
    assert entry_unpacker.acks.take().entries == {(LEDGER, 40)}


@pytest.mark.parametrize(
    ("inclusive", "kept"),
    [(False, [b"3", b"4"]), (True, [b"2", b"3", b"4"])],
    ids=["exclusive", "inclusive"],
)
def test_the_start_id_drops_what_lies_before_it_inside_its_batch(inclusive: bool, kept: list[bytes]) -> None:
    entry_unpacker = unpacker(MessageId(PARTITION, LEDGER, 50, 2), inclusive)
    messages, permits = entry_unpacker.unpack(None, 1, message_frame(command(50), batch_entry([b"0", b"1", b"2", b"3", b"4"])))
    assert [m.data() for m in messages] == kept and permits == 5
    assert entry_unpacker.unpack(None, 1, message_frame(command(49), batch_entry([b"a", b"b"]))) == ([], 2)  # before the start entry
    assert len(entry_unpacker.unpack(None, 1, message_frame(command(51), batch_entry([b"a", b"b"])))[0]) == 2  # after it
    # Another ledger does not compare with the start id.
    assert len(entry_unpacker.unpack(None, 1, message_frame(command(10, ledger=LEDGER + 1), batch_entry([b"a"])))[0]) == 1


@pytest.mark.parametrize(("inclusive", "count"), [(False, 0), (True, 1)], ids=["exclusive", "inclusive"])
def test_the_start_id_of_a_single_message_entry(inclusive: bool, count: int) -> None:
    entry_unpacker = unpacker(MessageId(PARTITION, LEDGER, 60), inclusive)
    messages, permits = entry_unpacker.unpack(None, 1, message_frame(command(60), single_entry(b"x")))
    assert len(messages) == count and permits == 1
    assert len(entry_unpacker.unpack(None, 1, message_frame(command(61), single_entry(b"y")))[0]) == 1


def test_earliest_and_latest_drop_nothing() -> None:
    for start in (MessageId.earliest, MessageId.latest):
        assert len(unpacker(start).unpack(None, 1, message_frame(command(0), batch_entry([b"a", b"b"])))[0]) == 2


def test_entry_permits_counts_a_batch_by_its_messages() -> None:
    assert entry_permits(batch_entry([b"a", b"b", b"c"])) == 3
    assert entry_permits(single_entry(b"a")) == 1
    assert entry_permits(b"\x00") == 1
