"""Entries built from messages decode back: metadata fields, delivery fields, compression, checksum, chunk split;
and the ops around them."""

from __future__ import annotations

import time
from typing import Any

import pytest

from airflow_pulsar.client.exceptions import MessageTooBig
from airflow_pulsar.client.producer.accumulator import MessageAccumulator
from airflow_pulsar.client.producer.batch_container import BatchContainer
from airflow_pulsar.client.producer.config import BatchingType
from airflow_pulsar.client.producer.delivery import LOCAL_CLUSTER, Delivery
from airflow_pulsar.client.producer.entry_builder import Entry, EntryBuilder
from airflow_pulsar.client.producer.message import OutgoingMessage
from airflow_pulsar.client.producer.pending import OpSend
from airflow_pulsar.client.producer.stats import ProducerStats
from airflow_pulsar.client.protocol.batch import parse_single, read_batch, single_header, single_header_with
from airflow_pulsar.client.protocol.checksum import crc32c
from airflow_pulsar.client.protocol.compression import CompressionType, decompress
from airflow_pulsar.client.protocol.frames import decode_frame, split_entry
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, MessageMetadata
from airflow_pulsar.client.protocol.wire import SendEncoder
from tests.support.producer_config import producer_config

NAME = "standalone-0-7"
MAX_SIZE = 5 * 1024 * 1024
CODECS = [CompressionType.LZ4, CompressionType.ZLIB, CompressionType.ZSTD, CompressionType.SNAPPY]


def _builder(
    compression: CompressionType = CompressionType.NONE, chunking: bool = False, max_size: int = MAX_SIZE
) -> tuple[EntryBuilder, ProducerStats]:
    stats = ProducerStats()
    builder = EntryBuilder(compression, chunking, stats)
    builder.connected(NAME, max_size)
    return builder, stats


def _decode(entry: Entry) -> tuple[MessageMetadata, bytes]:
    """The metadata and the uncompressed payload of an entry, after checking its checksum."""
    assert entry.checksum == crc32c(entry.data)
    metadata, payload = split_entry(entry.data)
    return metadata, bytes(decompress(metadata.compression, payload, metadata.uncompressed_size))


def _batch(*messages: tuple[bytes, int, dict[str, Any]]) -> Any:
    container = BatchContainer(1000, 1 << 20)
    for content, sequence_id, fields in messages:
        header = single_header_with(len(content), sequence_id, **fields) if fields else single_header(len(content), sequence_id)
        container.add(header, content, None, sequence_id)
    return container.drain()


def _batch_messages(metadata: MessageMetadata, payload: bytes) -> list[tuple[bytes, Any]]:
    return read_batch(
        payload, metadata.num_messages_in_batch, lambda _, index, data, single: (data, parse_single(single))
    )


def test_plain_message_entry_carries_name_sequence_id_and_publish_time() -> None:
    builder, stats = _builder()
    before = int(time.time() * 1000)
    (entry,) = builder.message_entries(OutgoingMessage(b"hello"), 41)
    metadata, payload = _decode(entry)
    assert payload == b"hello"
    assert (metadata.producer_name, metadata.sequence_id) == (NAME, 41)
    assert before <= metadata.publish_time <= int(time.time() * 1000)
    assert not metadata.HasField("compression") and not metadata.HasField("uncompressed_size")
    assert not metadata.HasField("num_messages_in_batch") and not metadata.HasField("uuid")
    written = stats.written()
    assert (written.payload_bytes, written.wire_bytes, written.batches) == (5, 5, 0)


def test_plain_entry_is_the_entry_message_entries_builds() -> None:
    builder, stats = _builder()
    entry = builder.plain_entry(b"hello", 41)
    assert entry is not None
    (built,) = builder.message_entries(OutgoingMessage(b"hello"), 41)
    metadata, payload = _decode(entry)
    expected, _ = _decode(built)
    expected.publish_time = metadata.publish_time  # both stamp the time they were built
    assert (metadata, payload) == (expected, b"hello")
    written = stats.written()
    assert (written.payload_bytes, written.wire_bytes) == (10, 10)


def test_the_partitions_counts_add_up_in_the_producers_figures() -> None:
    """Each partition producer's builder counts on its own; the producer's statistics sum them."""
    stats = ProducerStats()
    first, second = EntryBuilder(CompressionType.NONE, False, stats), EntryBuilder(CompressionType.LZ4, False, stats)
    for builder in (first, second):
        builder.connected(NAME, MAX_SIZE)
    first.plain_entry(b"abc", 1)
    second.message_entries(OutgoingMessage(b"z" * 1000), 1)
    batch = _batch((b"one", 1, {}), (b"two", 2, {}))
    second.batch_entry(batch)
    written = stats.written()
    assert (written.payload_bytes, written.batches, written.batched_messages) == (3 + 1000 + len(batch.payload), 1, 2)
    assert written.wire_bytes < written.payload_bytes
    snapshot = stats.snapshot(pending=0)
    assert (snapshot["bytes"], snapshot["batches"], snapshot["mean_batch_size"]) == (written.payload_bytes, 1, 2.0)


def test_plain_entry_leaves_what_must_be_compressed_encrypted_or_split_to_message_entries() -> None:
    assert _builder(CompressionType.LZ4)[0].plain_entry(b"hello", 1) is None
    assert _builder(max_size=4)[0].plain_entry(b"hello", 1) is None
    assert _builder(max_size=5)[0].plain_entry(b"hello", 1) is not None


def test_message_fields_are_written_to_the_entry_metadata() -> None:
    builder, _ = _builder()
    (entry,) = builder.message_entries(
        OutgoingMessage(b"v", properties={"a": "1", "b": "2"}, partition_key="key", ordering_key="order", event_timestamp=1234), 3
    )
    metadata, payload = _decode(entry)
    assert payload == b"v"
    assert {p.key: p.value for p in metadata.properties} == {"a": "1", "b": "2"}
    assert (metadata.partition_key, metadata.ordering_key, metadata.event_time) == ("key", b"order", 1234)
    assert (metadata.producer_name, metadata.sequence_id) == (NAME, 3)


@pytest.mark.parametrize("codec", CODECS, ids=lambda codec: codec.name)
@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
def test_message_payload_is_compressed_with_the_producers_codec(codec: CompressionType, keyed: bool) -> None:
    builder, stats = _builder(codec)
    content = b"compress me " * 500
    (entry,) = builder.message_entries(OutgoingMessage(content, partition_key="k" if keyed else None), 0)
    metadata, payload = _decode(entry)
    assert (metadata.compression, metadata.uncompressed_size) == (codec, len(content))
    assert payload == content
    assert len(entry.data) < len(content) // 2
    written = stats.written()
    assert written.payload_bytes == len(content) and written.wire_bytes < len(content) // 2


def test_batch_entry_holds_each_message_with_its_own_metadata() -> None:
    builder, stats = _builder()
    batch = _batch((b"one", 10, {}), (b"two", 11, {"partition_key": "k", "properties": {"p": "q"}}), (b"three", 12, {}))
    entry = builder.batch_entry(batch)
    metadata, payload = _decode(entry)
    assert (metadata.sequence_id, metadata.highest_sequence_id, metadata.num_messages_in_batch) == (10, 12, 3)
    assert metadata.producer_name == NAME
    messages = _batch_messages(metadata, payload)
    assert [data for data, _ in messages] == [b"one", b"two", b"three"]
    assert [single.sequence_id for _, single in messages] == [10, 11, 12]
    keyed = messages[1][1]
    assert keyed.partition_key == "k" and {p.key: p.value for p in keyed.properties} == {"p": "q"}
    written = stats.written()
    assert (written.batches, written.batched_messages) == (1, 3)


def test_batch_of_one_message_has_no_highest_sequence_id() -> None:
    builder, _ = _builder()
    metadata, _ = _decode(builder.batch_entry(_batch((b"only", 5, {}))))
    assert metadata.num_messages_in_batch == 1 and metadata.sequence_id == 5
    assert not metadata.HasField("highest_sequence_id")


@pytest.mark.parametrize("codec", CODECS, ids=lambda codec: codec.name)
def test_batch_is_compressed_as_a_whole(codec: CompressionType) -> None:
    builder, _ = _builder(codec)
    batch = _batch(*((b"row %d " % i * 50, i, {}) for i in range(20)))
    uncompressed = len(batch.payload)
    metadata, payload = _decode(builder.batch_entry(batch))
    assert (metadata.compression, metadata.uncompressed_size) == (codec, uncompressed)
    assert [data for data, _ in _batch_messages(metadata, payload)] == [b"row %d " % i * 50 for i in range(20)]


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD], ids=lambda codec: codec.name)
def test_message_over_the_max_size_is_split_into_chunks(codec: CompressionType) -> None:
    max_size = 4096
    builder, stats = _builder(codec, chunking=True, max_size=max_size)
    # Digits compress a little but not much: the compressed message still needs several chunks.
    content = b"".join(b"%08d" % (i * 7919 % 10**8) for i in range(5000))
    entries = builder.message_entries(OutgoingMessage(content, properties={"x": "y"}), 9)
    assert len(entries) > 2
    compressed = b""
    for chunk_id, entry in enumerate(entries):
        assert entry.checksum == crc32c(entry.data)
        assert len(entry.data) <= max_size
        metadata, part = split_entry(entry.data)
        assert (metadata.uuid, metadata.chunk_id, metadata.num_chunks_from_msg) == (f"{NAME}-9", chunk_id, len(entries))
        assert (metadata.sequence_id, metadata.producer_name) == (9, NAME)
        assert {p.key: p.value for p in metadata.properties} == {"x": "y"}
        compressed += bytes(part)
        total = metadata.total_chunk_msg_size
    # The payload is compressed before it is split: the chunks join into the compressed message.
    assert total == len(compressed) == stats.written().wire_bytes
    assert bytes(decompress(codec, compressed, len(content))) == content


def test_message_over_the_max_size_without_chunking_is_refused() -> None:
    builder, _ = _builder(max_size=1024)
    with pytest.raises(MessageTooBig, match="1024"):
        builder.message_entries(OutgoingMessage(b"x" * 2000), 0)
    (entry,) = builder.message_entries(OutgoingMessage(b"x" * 1000), 1)
    assert _decode(entry)[1] == b"x" * 1000


def test_connected_renames_later_entries() -> None:
    builder, _ = _builder()
    builder.connected("renamed", MAX_SIZE)
    metadata, _ = _decode(builder.message_entries(OutgoingMessage(b"m"), 0)[0])
    assert metadata.producer_name == "renamed"


def _accumulator(**settings: Any) -> tuple[MessageAccumulator, list[OpSend]]:
    ops: list[OpSend] = []
    accumulator = MessageAccumulator(producer_config(**settings), ProducerStats(), ops.append)
    accumulator.connected(NAME, MAX_SIZE)
    return accumulator, ops


def _send(accumulator: MessageAccumulator, content: bytes, sequence_id: int, callback: Any = None, flush: bool = False) -> bool:
    """A message of nothing but its content, as the producer hands it down: its bytes."""
    return accumulator.add(content, sequence_id, callback, flush)


@pytest.mark.parametrize(
    "settings",
    [{"batching_enabled": False}, {"batching_max_messages": 1}, {"batching_enabled": False, "compression_type": CompressionType.LZ4}],
    ids=["plain", "batched", "compressed"],
)
def test_a_message_handed_down_as_its_bytes_is_the_message_of_those_bytes(settings: dict[str, Any]) -> None:
    (as_bytes, bytes_ops), (as_object, object_ops) = _accumulator(**settings), _accumulator(**settings)
    assert not as_bytes.add(b"same", 3, None, False) and not as_object.add(OutgoingMessage(b"same"), 3, None, False)
    (sent,), (expected,) = bytes_ops, object_ops
    metadata, payload = _decode(sent.entry)
    expected_metadata, expected_payload = _decode(expected.entry)
    expected_metadata.publish_time = metadata.publish_time  # both stamp the time they were built
    assert (metadata, payload, sent.batched, sent.num_messages) == (expected_metadata, expected_payload, expected.batched, 1)


def test_batch_becomes_one_op_when_full() -> None:
    accumulator, ops = _accumulator(batching_max_messages=3, batching_max_publish_delay_ms=60_000)
    callbacks = [lambda r, m: None for _ in range(3)]
    assert _send(accumulator, b"a", 0, callbacks[0]) and _send(accumulator, b"bb", 1, callbacks[1])
    assert not ops and len(accumulator) == 2
    assert not _send(accumulator, b"ccc", 2, callbacks[2])
    (op,) = ops
    assert (op.sequence_id, op.highest_sequence_id, op.num_messages, op.batched, op.chunk) == (0, 2, 3, True, False)
    assert (op.permits, op.memory, op.callbacks) == (3, 6, callbacks)
    assert op.deadline == pytest.approx(op.created + 30.0)
    metadata, payload = _decode(op.entry)
    assert [data for data, _ in _batch_messages(metadata, payload)] == [b"a", b"bb", b"ccc"]
    assert len(accumulator) == 0 and accumulator.flush_if_due() is None


def test_flush_if_due_waits_for_the_max_publish_delay() -> None:
    accumulator, ops = _accumulator(batching_max_publish_delay_ms=60_000)
    _send(accumulator, b"a", 0)
    wait = accumulator.flush_if_due()
    assert wait is not None and 59 < wait <= 60 and not ops
    accumulator, ops = _accumulator(batching_max_publish_delay_ms=0)
    _send(accumulator, b"a", 0)
    assert len(ops) == 1 and len(accumulator) == 0, "a batch past its max delay goes on the next send"


def test_unbatched_message_goes_after_the_batch_before_it() -> None:
    accumulator, ops = _accumulator(batching_max_allowed_size_in_bytes=1000, batching_max_publish_delay_ms=60_000)
    _send(accumulator, b"small", 0)
    assert not _send(accumulator, b"L" * 2000, 1)  # larger than a batch may be
    assert [(op.sequence_id, op.batched) for op in ops] == [(0, True), (1, False)]
    assert _decode(ops[1].entry)[1] == b"L" * 2000


def test_only_the_last_chunk_completes_the_message() -> None:
    accumulator, ops = _accumulator(batching_enabled=False, chunking_enabled=True, send_timeout_millis=0)
    accumulator.connected(NAME, 2048)
    callback = lambda r, m: None  # noqa: E731
    _send(accumulator, bytes(range(256)) * 40, 4, callback)
    assert len(ops) > 2
    assert all(op.chunk and op.sequence_id == op.highest_sequence_id == 4 and op.deadline is None for op in ops)
    assert [(op.callbacks, op.permits, op.memory) for op in ops[:-1]] == [((), 0, 0)] * (len(ops) - 1)
    assert (ops[-1].callbacks, ops[-1].permits, ops[-1].memory) == ((callback,), 1, 10240)


def test_op_frame_is_a_send_around_the_entry() -> None:
    accumulator, ops = _accumulator(batching_max_messages=2)
    _send(accumulator, b"a", 7)
    _send(accumulator, b"b", 8)
    frame = decode_frame(ops[0].frame(SendEncoder(42))[4:])  # without the total-size field
    send = frame.command.send
    assert frame.command.type == BaseCommand.SEND
    assert (send.producer_id, send.sequence_id, send.highest_sequence_id, send.num_messages) == (42, 7, 8, 2)
    assert not send.is_chunk
    assert (frame.entry, frame.checksum) == (ops[0].entry.data, ops[0].entry.checksum)


def test_delivery_fields_are_written_to_the_entry_metadata() -> None:
    builder, _ = _builder()
    (entry,) = builder.message_entries(OutgoingMessage(b"later", delivery=Delivery(1_800_000_000_000, ("east", "west"))), 2)
    metadata, payload = _decode(entry)
    assert payload == b"later"
    assert (metadata.deliver_at_time, list(metadata.replicate_to)) == (1_800_000_000_000, ["east", "west"])
    (plain,) = builder.message_entries(OutgoingMessage(b"now"), 3)
    metadata, _ = _decode(plain)
    assert not metadata.HasField("deliver_at_time") and not metadata.replicate_to


def test_every_chunk_of_a_delayed_message_carries_its_delivery_time() -> None:
    builder, _ = _builder(chunking=True, max_size=2048)
    entries = builder.message_entries(
        OutgoingMessage(bytes(range(256)) * 40, delivery=Delivery(1_800_000_000_000, (LOCAL_CLUSTER,))), 9
    )
    assert len(entries) > 2
    for entry in entries:
        metadata, _ = split_entry(entry.data)
        assert (metadata.deliver_at_time, list(metadata.replicate_to)) == (1_800_000_000_000, [LOCAL_CLUSTER])


def _send_with(accumulator: MessageAccumulator, content: bytes, sequence_id: int, delivery: Delivery | None) -> bool:
    return accumulator.add(OutgoingMessage(content, delivery=delivery), sequence_id, None, False)


def test_a_delayed_message_leaves_as_its_own_entry_between_batches() -> None:
    accumulator, ops = _accumulator(batching_max_publish_delay_ms=60_000)
    _send(accumulator, b"a", 0)
    assert not _send_with(accumulator, b"later", 1, Delivery(1_800_000_000_000, ()))
    assert _send(accumulator, b"b", 2)
    accumulator.flush()
    assert [(op.sequence_id, op.batched) for op in ops] == [(0, True), (1, False), (2, True)]
    delayed, _ = _decode(ops[1].entry)
    assert delayed.deliver_at_time == 1_800_000_000_000 and not delayed.HasField("num_messages_in_batch")
    assert not any(_decode(ops[i].entry)[0].HasField("deliver_at_time") for i in (0, 2))


def test_a_batch_holds_only_messages_bound_for_the_same_clusters() -> None:
    """replicate_to is a field of the entry: the official producers batch such messages and write
    it in the batch's metadata; a change of clusters starts a new batch, so none is misdirected."""
    accumulator, ops = _accumulator(batching_max_publish_delay_ms=60_000)
    east = Delivery(None, ("east",))
    for sequence_id, delivery in enumerate([None, east, east, Delivery(None, (LOCAL_CLUSTER,)), None, None]):
        _send_with(accumulator, b"m%d" % sequence_id, sequence_id, delivery)
    accumulator.flush()
    assert all(op.batched for op in ops)
    batches = [(_decode(op.entry)[0], _batch_messages(*_decode(op.entry))) for op in ops]
    assert [(list(meta.replicate_to), [data for data, _ in messages]) for meta, messages in batches] == [
        ([], [b"m0"]),
        (["east"], [b"m1", b"m2"]),
        ([LOCAL_CLUSTER], [b"m3"]),
        ([], [b"m4", b"m5"]),
    ]


def _send_keyed(
    accumulator: MessageAccumulator, content: bytes, sequence_id: int, partition_key: str | None, ordering_key: bytes | None = None
) -> bool:
    ordering = None if ordering_key is None else ordering_key.decode()
    return accumulator.add(OutgoingMessage(content, partition_key=partition_key, ordering_key=ordering), sequence_id, None, False)


def _keyed_entries(ops: list[OpSend]) -> list[tuple[int, int, str | None, bytes | None, list[bytes]]]:
    """Each op as (first and highest sequence id, the entry's partition and ordering key, its payloads)."""
    entries = []
    for op in ops:
        metadata, payload = _decode(op.entry)
        partition_key = metadata.partition_key if metadata.HasField("partition_key") else None
        ordering_key = metadata.ordering_key if metadata.HasField("ordering_key") else None
        payloads = [data for data, _ in _batch_messages(metadata, payload)]
        entries.append((op.sequence_id, op.highest_sequence_id, partition_key, ordering_key, payloads))
    return entries


def test_a_batch_entry_carries_the_keys_of_its_first_message() -> None:
    """As the official producers write a batch: Key_Shared dispatches the whole entry by them."""
    accumulator, ops = _accumulator(batching_max_publish_delay_ms=60_000)
    _send_keyed(accumulator, b"a", 0, "k1", b"o1")
    _send_keyed(accumulator, b"b", 1, "k2")
    accumulator.flush()
    _send_keyed(accumulator, b"c", 2, None)
    _send_keyed(accumulator, b"d", 3, "k3")
    accumulator.flush()
    assert _keyed_entries(ops) == [(0, 1, "k1", b"o1", [b"a", b"b"]), (2, 3, None, None, [b"c", b"d"])]


def test_key_based_batching_makes_an_entry_per_key_in_the_order_of_their_first_messages() -> None:
    accumulator, ops = _accumulator(batching_type=BatchingType.KeyBased, batching_max_publish_delay_ms=60_000)
    sends = [("b", None), ("a", None), ("b", None), (None, None), ("a", b"o"), ("c", b"o"), (None, None)]
    for sequence_id, (partition_key, ordering_key) in enumerate(sends):
        assert _send_keyed(accumulator, b"m%d" % sequence_id, sequence_id, partition_key, ordering_key)
    assert not ops and len(accumulator) == len(sends)
    accumulator.flush()
    assert _keyed_entries(ops) == [
        (0, 2, "b", None, [b"m0", b"m2"]),
        (1, 1, "a", None, [b"m1"]),
        (3, 6, None, None, [b"m3", b"m6"]),
        # The ordering key decides the batch, before the partition key.
        (4, 5, "a", b"o", [b"m4", b"m5"]),
    ]
    assert [(op.num_messages, op.permits, op.batched) for op in ops] == [(2, 2, True), (1, 1, True), (2, 2, True), (2, 2, True)]
    assert len(accumulator) == 0 and accumulator.flush_if_due() is None


def test_key_based_batching_counts_the_limits_over_all_keys() -> None:
    accumulator, ops = _accumulator(
        batching_type=BatchingType.KeyBased, batching_max_messages=3, batching_max_publish_delay_ms=60_000
    )
    assert _send_keyed(accumulator, b"a", 0, "x") and _send_keyed(accumulator, b"b", 1, "y")
    assert not _send_keyed(accumulator, b"c", 2, "z"), "the third message fills the container: every key goes"
    assert [entry[2:] for entry in _keyed_entries(ops)] == [("x", None, [b"a"]), ("y", None, [b"b"]), ("z", None, [b"c"])]
    # Bytes too: a message that would pass the size flushes every key's batch first.
    accumulator, ops = _accumulator(
        batching_type=BatchingType.KeyBased, batching_max_allowed_size_in_bytes=100, batching_max_publish_delay_ms=60_000
    )
    _send_keyed(accumulator, b"x" * 30, 0, "x")
    _send_keyed(accumulator, b"y" * 30, 1, "y")
    assert not ops
    _send_keyed(accumulator, b"z" * 30, 2, "x")
    assert [entry[:3] for entry in _keyed_entries(ops)] == [(0, 0, "x"), (1, 1, "y")]
