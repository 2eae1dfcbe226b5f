"""Wire frames and command envelopes: encoding, incremental decoding, malformed input."""

from __future__ import annotations

import struct

import crc32c as crc32c_package
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_pulsar.client.protocol import PulsarApi_pb2 as pb
from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.frames import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_OVERHEAD,
    MAGIC_BROKER_ENTRY_METADATA,
    MAGIC_CRC32C,
    ChecksumError,
    Frame,
    FrameDecoder,
    FrameError,
    FrameTooLargeError,
    decode_frame,
    encode_command,
    encode_entry,
    encode_payload_command,
    split_entry,
)

T = pb.BaseCommand
TOPIC = "persistent://public/default/orders"


def mid(ledger: int, entry: int, **extra) -> pb.MessageIdData:
    return pb.MessageIdData(ledgerId=ledger, entryId=entry, **extra)


# Every simple (payload-less) command the client and the broker exchange, with realistic fields.
SIMPLE_COMMANDS: dict[str, pb.BaseCommand] = {
    "CONNECT": commands.make(
        T.CONNECT,
        client_version="airflow-pulsar-0.1.0",
        protocol_version=commands.PROTOCOL_VERSION,
        auth_method_name="token",
        auth_data=b"eyJhbGciOi.jwt",
        feature_flags=pb.FeatureFlags(supports_auth_refresh=True, supports_broker_entry_metadata=True),
    ),
    "CONNECTED": commands.make(
        T.CONNECTED, server_version="airflow-pulsar-standalone", protocol_version=20, max_message_size=5 << 20
    ),
    "PING": commands.make(T.PING),
    "PONG": commands.make(T.PONG),
    "LOOKUP": commands.make(T.LOOKUP, topic=TOPIC, request_id=3, authoritative=False),
    "LOOKUP_RESPONSE": commands.make(
        T.LOOKUP_RESPONSE,
        brokerServiceUrl="pulsar://127.0.0.1:6650",
        response=pb.CommandLookupTopicResponse.Connect,
        request_id=3,
        authoritative=True,
    ),
    "PARTITIONED_METADATA": commands.make(T.PARTITIONED_METADATA, topic=TOPIC, request_id=1),
    "PARTITIONED_METADATA_RESPONSE": commands.make(
        T.PARTITIONED_METADATA_RESPONSE,
        partitions=4,
        request_id=1,
        response=pb.CommandPartitionedTopicMetadataResponse.Success,
    ),
    "PRODUCER": commands.make(
        T.PRODUCER,
        topic=TOPIC,
        producer_id=7,
        request_id=4,
        producer_name="p-1",
        metadata=[pb.KeyValue(key="app", value="airflow")],
        producer_access_mode=pb.Exclusive,
    ),
    "PRODUCER_SUCCESS": commands.make(
        T.PRODUCER_SUCCESS, request_id=4, producer_name="p-1", last_sequence_id=41, producer_ready=True
    ),
    "SEND_RECEIPT": commands.make(
        T.SEND_RECEIPT, producer_id=7, sequence_id=42, message_id=mid(3, 99), highest_sequence_id=44
    ),
    "SEND_RECEIPT_DEDUPLICATED": commands.make(
        T.SEND_RECEIPT, producer_id=7, sequence_id=42, message_id=mid(2**64 - 1, 2**64 - 1)
    ),
    "SEND_ERROR": commands.make(
        T.SEND_ERROR, producer_id=7, sequence_id=43, error=pb.ChecksumError, message="checksum mismatch"
    ),
    "SUBSCRIBE": commands.make(
        T.SUBSCRIBE,
        topic=TOPIC,
        subscription="ingest",
        subType=pb.CommandSubscribe.Key_Shared,
        consumer_id=2,
        request_id=5,
        consumer_name="c-1",
        durable=True,
        initialPosition=pb.CommandSubscribe.Earliest,
        start_message_id=mid(3, 0),
        keySharedMeta=pb.KeySharedMeta(keySharedMode=pb.STICKY, hashRanges=[pb.IntRange(start=0, end=32767)]),
        subscription_properties=[pb.KeyValue(key="owner", value="dag")],
    ),
    "SUCCESS": commands.make(T.SUCCESS, request_id=5),
    "ERROR": commands.make(T.ERROR, request_id=5, error=pb.SubscriptionNotFound, message="no such subscription"),
    "FLOW": commands.make(T.FLOW, consumer_id=2, messagePermits=1000),
    "ACK": commands.make(
        T.ACK,
        consumer_id=2,
        ack_type=pb.CommandAck.Individual,
        message_id=[mid(3, 10), mid(3, 11, ack_set=[-6, 0x7FFFFFFFFFFFFFFF, 5], batch_size=130)],
        request_id=9,
    ),
    "ACK_CUMULATIVE": commands.make(
        T.ACK, consumer_id=2, ack_type=pb.CommandAck.Cumulative, message_id=[mid(3, 20, ack_set=[-4])]
    ),
    "ACK_RESPONSE": commands.make(T.ACK_RESPONSE, consumer_id=2, request_id=9),
    "REDELIVER_UNACKNOWLEDGED_MESSAGES": commands.make(
        T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=2, message_ids=[mid(3, 12), mid(3, 15)]
    ),
    "REDELIVER_ALL": commands.make(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=2),
    "SEEK": commands.make(T.SEEK, consumer_id=2, request_id=10, message_id=mid(3, 0)),
    "SEEK_BY_TIME": commands.make(T.SEEK, consumer_id=2, request_id=11, message_publish_time=1_700_000_000_000),
    "GET_LAST_MESSAGE_ID": commands.make(T.GET_LAST_MESSAGE_ID, consumer_id=2, request_id=12),
    "GET_LAST_MESSAGE_ID_RESPONSE": commands.make(
        T.GET_LAST_MESSAGE_ID_RESPONSE,
        request_id=12,
        last_message_id=mid(3, 99, batch_index=9, batch_size=10),
        consumer_mark_delete_position=mid(3, 50),
    ),
    "CONSUMER_STATS": commands.make(T.CONSUMER_STATS, request_id=13, consumer_id=2),
    "CONSUMER_STATS_RESPONSE": commands.make(
        T.CONSUMER_STATS_RESPONSE,
        request_id=13,
        msgRateOut=12.5,
        consumerName="c-1",
        availablePermits=500,
        unackedMessages=3,
        type="Key_Shared",
        msgBacklog=2**40,
    ),
    "UNSUBSCRIBE": commands.make(T.UNSUBSCRIBE, consumer_id=2, request_id=14, force=True),
    "CLOSE_PRODUCER": commands.make(T.CLOSE_PRODUCER, producer_id=7, request_id=15),
    "CLOSE_CONSUMER": commands.make(T.CLOSE_CONSUMER, consumer_id=2, request_id=16),
    "ACTIVE_CONSUMER_CHANGE": commands.make(T.ACTIVE_CONSUMER_CHANGE, consumer_id=2, is_active=True),
    "GET_TOPICS_OF_NAMESPACE": commands.make(
        T.GET_TOPICS_OF_NAMESPACE,
        request_id=17,
        namespace="public/default",
        mode=pb.CommandGetTopicsOfNamespace.ALL,
    ),
    "GET_TOPICS_OF_NAMESPACE_RESPONSE": commands.make(
        T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
        request_id=17,
        topics=[TOPIC, TOPIC + "-partition-0", "non-persistent://public/default/x"],
        filtered=False,
    ),
}


def metadata(**fields) -> pb.MessageMetadata:
    defaults = {"producer_name": "p-1", "sequence_id": 42, "publish_time": 1_700_000_000_000}
    return pb.MessageMetadata(**{**defaults, **fields})


def send_frame(payload: bytes = b"hello pulsar", **meta_fields) -> bytes:
    command = commands.make(T.SEND, producer_id=7, sequence_id=meta_fields.get("sequence_id", 42))
    return encode_payload_command(command, encode_entry(metadata(**meta_fields), payload))


def message_frame(payload: bytes = b"hello pulsar", broker_entry_metadata: bytes | None = None) -> bytes:
    command = commands.make(T.MESSAGE, consumer_id=2, message_id=mid(3, 7), redelivery_count=1, ack_set=[-2])
    return encode_payload_command(command, encode_entry(metadata(), payload), broker_entry_metadata=broker_entry_metadata)


def decode_one(data: bytes, **kwargs) -> Frame:
    decoder = FrameDecoder(**kwargs)
    frames = decoder.feed(data)
    assert len(frames) == 1
    assert decoder.buffered == 0
    return frames[0]


def with_frame_checksum(frame_without_crc_region: bytes, entry: bytes) -> bytes:
    """Assemble a payload frame from a command part and an entry region, with a valid CRC."""
    body = frame_without_crc_region + struct.pack(">HI", MAGIC_CRC32C, crc32c_package.crc32c(entry)) + entry
    return struct.pack(">I", len(body)) + body


def command_part(command: pb.BaseCommand) -> bytes:
    serialized = command.SerializeToString()
    return struct.pack(">I", len(serialized)) + serialized


# ---------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("name", sorted(SIMPLE_COMMANDS))
def test_simple_command_round_trip(name):
    command = SIMPLE_COMMANDS[name]
    encoded = encode_command(command)
    frame = decode_one(encoded)
    assert frame.command == command
    assert frame.entry is None and frame.checksum is None and frame.broker_entry_metadata is None
    assert frame.command.IsInitialized()
    # The typed body survives and the frame re-encodes to the same bytes.
    assert commands.body(frame.command) == commands.body(command)
    assert encode_command(frame.command) == encoded
    assert decode_frame(encoded[4:]) == frame


def test_simple_frame_layout():
    command = SIMPLE_COMMANDS["FLOW"]
    body = command.SerializeToString()
    encoded = encode_command(command)
    assert encoded == struct.pack(">II", len(body) + 4, len(body)) + body
    assert encoded[8:] == body


def test_ping_and_pong_carry_an_empty_body():
    # Pulsar's clients set the (empty) ping/pong sub-message; make() does the same.
    for command_type, field in ((T.PING, "ping"), (T.PONG, "pong")):
        frame = decode_one(encode_command(commands.make(command_type)))
        assert frame.command.type == command_type
        assert frame.command.HasField(field)


def test_decoded_fields_survive():
    frame = decode_one(encode_command(SIMPLE_COMMANDS["ACK"]))
    ack = frame.command.ack
    assert ack.ack_type == pb.CommandAck.Individual
    assert [(m.ledgerId, m.entryId) for m in ack.message_id] == [(3, 10), (3, 11)]
    assert list(ack.message_id[1].ack_set) == [-6, 0x7FFFFFFFFFFFFFFF, 5]
    assert ack.message_id[1].batch_size == 130
    assert ack.request_id == 9

    receipt = decode_one(encode_command(SIMPLE_COMMANDS["SEND_RECEIPT_DEDUPLICATED"])).command.send_receipt
    assert (receipt.message_id.ledgerId, receipt.message_id.entryId) == (2**64 - 1, 2**64 - 1)

    stats = decode_one(encode_command(SIMPLE_COMMANDS["CONSUMER_STATS_RESPONSE"])).command.consumerStatsResponse
    assert stats.msgRateOut == 12.5 and stats.msgBacklog == 2**40

    sub = decode_one(encode_command(SIMPLE_COMMANDS["SUBSCRIBE"])).command.subscribe
    assert sub.keySharedMeta.hashRanges[0].end == 32767
    assert sub.initialPosition == pb.CommandSubscribe.Earliest


def test_send_round_trip():
    meta = metadata(partition_key="k", properties=[pb.KeyValue(key="a", value="b")], event_time=5)
    entry = encode_entry(meta, b"payload bytes")
    command = commands.make(T.SEND, producer_id=7, sequence_id=42, num_messages=1, highest_sequence_id=42)
    encoded = encode_payload_command(command, entry)
    frame = decode_one(encoded)
    assert frame.command == command
    assert frame.entry == entry
    assert frame.checksum == crc32c_package.crc32c(entry)
    assert frame.broker_entry_metadata is None
    decoded_meta, payload = split_entry(frame.entry)
    assert decoded_meta == meta
    assert bytes(payload) == b"payload bytes"
    # Re-encoding with the checksum that came in gives the same bytes (the broker forwards entries verbatim).
    assert encode_payload_command(frame.command, frame.entry, frame.checksum) == encoded


def test_send_with_batch_payload_and_empty_payload():
    for payload in (b"", b"\x00" * 1000, bytes(range(256)) * 40):
        frame = decode_one(send_frame(payload, num_messages_in_batch=3, compression=pb.ZSTD, uncompressed_size=9))
        decoded_meta, view = split_entry(frame.entry)
        assert bytes(view) == payload
        assert decoded_meta.num_messages_in_batch == 3
        assert decoded_meta.compression == pb.ZSTD


def test_message_round_trip():
    encoded = message_frame(b"delivered")
    frame = decode_one(encoded)
    assert frame.command.type == T.MESSAGE
    assert frame.command.message.redelivery_count == 1
    assert list(frame.command.message.ack_set) == [-2]
    assert frame.broker_entry_metadata is None
    assert bytes(split_entry(frame.entry)[1]) == b"delivered"


def test_message_with_broker_entry_metadata():
    bem = pb.BrokerEntryMetadata(broker_timestamp=1_700_000_000_123, index=41).SerializeToString()
    encoded = message_frame(b"delivered", broker_entry_metadata=bem)
    frame = decode_one(encoded)
    assert frame.broker_entry_metadata == bem
    parsed = pb.BrokerEntryMetadata.FromString(frame.broker_entry_metadata)
    assert (parsed.broker_timestamp, parsed.index) == (1_700_000_000_123, 41)
    assert bytes(split_entry(frame.entry)[1]) == b"delivered"
    # Layout: command, then [0x0e02][u32 size][BrokerEntryMetadata], then [0x0e01][crc]...
    cmd_size = struct.unpack_from(">I", encoded, 4)[0]
    pos = 8 + cmd_size
    assert struct.unpack_from(">HI", encoded, pos) == (MAGIC_BROKER_ENTRY_METADATA, len(bem))
    assert encoded[pos + 6 : pos + 6 + len(bem)] == bem
    assert struct.unpack_from(">H", encoded, pos + 6 + len(bem))[0] == MAGIC_CRC32C
    # The checksum covers the entry only, so adding broker entry metadata keeps it.
    assert frame.checksum == decode_one(message_frame(b"delivered")).checksum
    assert encode_payload_command(frame.command, frame.entry, frame.checksum, frame.broker_entry_metadata) == encoded


def test_message_with_empty_broker_entry_metadata():
    frame = decode_one(message_frame(b"x", broker_entry_metadata=b""))
    assert frame.broker_entry_metadata == b""
    assert bytes(split_entry(frame.entry)[1]) == b"x"


def test_encode_entry_accepts_serialized_metadata():
    meta = metadata()
    assert encode_entry(meta.SerializeToString(), b"p") == encode_entry(meta, b"p")
    assert encode_entry(bytearray(meta.SerializeToString()), b"p") == encode_entry(meta, b"p")
    assert encode_entry(meta, b"p")[:4] == struct.pack(">I", meta.ByteSize())


def test_explicit_checksum_is_written_as_given():
    entry = encode_entry(metadata(), b"p")
    encoded = encode_payload_command(commands.make(T.SEND, producer_id=1, sequence_id=1), entry, checksum=0xDEADBEEF)
    with pytest.raises(ChecksumError):
        decode_one(encoded)
    assert decode_one(encoded, verify_checksum=False).checksum == 0xDEADBEEF


def test_many_frames_in_one_feed_come_out_in_order():
    stream = [encode_command(c) for c in SIMPLE_COMMANDS.values()] + [send_frame(), message_frame()]
    frames = FrameDecoder().feed(b"".join(stream))
    assert [f.command.type for f in frames] == [c.type for c in SIMPLE_COMMANDS.values()] + [T.SEND, T.MESSAGE]


# ---------------------------------------------------------------- Pulsar's layout, independently


def test_send_frame_matches_pulsars_specified_layout():
    """Build a SEND frame by hand from Pulsar's protocol description and compare bytes."""
    meta = metadata(partition_key="key-1", properties=[pb.KeyValue(key="k", value="v")])
    payload = b"hello pulsar"
    command = pb.BaseCommand(type=T.SEND, send=pb.CommandSend(producer_id=0, sequence_id=0))

    cmd = command.SerializeToString()
    meta_bytes = meta.SerializeToString()
    covered = struct.pack(">I", len(meta_bytes)) + meta_bytes + payload  # metadata size .. end
    checksum = crc32c_package.crc32c(covered)
    rest = struct.pack(">I", len(cmd)) + cmd + struct.pack(">H", 0x0E01) + struct.pack(">I", checksum) + covered
    expected = struct.pack(">I", len(rest)) + rest

    ours = encode_payload_command(commands.make(T.SEND, producer_id=0, sequence_id=0), encode_entry(meta, payload))
    assert ours == expected
    total, cmd_size = struct.unpack_from(">II", ours)
    assert total == len(ours) - 4
    assert ours[8 : 8 + cmd_size] == cmd
    assert struct.unpack_from(">HI", ours, 8 + cmd_size) == (0x0E01, checksum)


# Frames captured from the official pulsar-client 3.13 (C++ core 4.2.0) talking to a scripted
# broker: a producer's CONNECT, PARTITIONED_METADATA, LOOKUP, PRODUCER, one plain SEND, a batched
# SEND of three messages, CLOSE_PRODUCER; a consumer's SUBSCRIBE, FLOW, batch-index ACK (ack_set),
# REDELIVER, cumulative ACK, GET_LAST_MESSAGE_ID, SEEK, UNSUBSCRIBE.
OFFICIAL_FRAMES = {
    "CONNECT": "0000002900000025080212210a1150756c7361722d4350502d76342e322e3020142a046e6f6e65520408011001",
    "PARTITIONED_METADATA": "0000002f0000002b0815aa01260a2270657273697374656e743a2f2f7075626c69632f64656661756c74"
    "2f676f6c64656e1001",
    "LOOKUP": "000000330000002f0817ba012a0a2270657273697374656e743a2f2f7075626c69632f64656661756c742f676f6c64656e"
    "100218003a00",
    "PRODUCER": "000000490000004508052a410a2270657273697374656e743a2f2f7075626c69632f64656661756c742f676f6c64"
    "656e10001800220f676f6c64656e2d70726f64756365722800400048015000",
    "SEND": "000000500000000808063204080010000e01694aeb6d0000002e0a0d66616b652d70726f64756365721000"
    "18baf594ee9f3422060a016b12017632056b65792d3160fbd095ffbc3168656c6c6f2070756c736172",
    "SEND_BATCH": "000000600000000a080632060801100018030e019df315910000001e0a0d66616b652d70726f6475636572"
    "100018bbf594ee9f3432026b3058030000000812026b30180240006d300000000812026b31180240016d3100000008"
    "12026b32180240026d32",
    "CLOSE_PRODUCER": "0000000c00000008080f7a0408011003",
    "SUBSCRIBE": "0000005900000055080422510a2270657273697374656e743a2f2f7075626c69632f64656661756c742f67"
    "6f6c64656e120a676f6c64656e2d737562180020002800320f676f6c64656e2d636f6e73756d65723800400158006801"
    "7000",
    "FLOW": "0000000c00000008080b5a040800100a",
    "ACK_BATCH_INDEX": "0000001400000010080a520c080010001a06080710002805",
    "REDELIVER_UNACKNOWLEDGED_MESSAGES": "0000000b000000070814a201020800",
    "ACK_CUMULATIVE": "0000001400000010080a520c080010011a06080710002804",
    "GET_LAST_MESSAGE_ID": "0000000d00000009081dea010408001001",
    "SEEK": "000000130000000f081ce2010a080010021a0408071000",
    "UNSUBSCRIBE": "0000000c00000008080c620408001003",
}


@pytest.mark.parametrize("name", list(OFFICIAL_FRAMES))
def test_official_client_frames_decode_and_reencode_byte_for_byte(name):
    raw = bytes.fromhex(OFFICIAL_FRAMES[name])
    frame = decode_one(raw)
    assert commands.type_name(frame.command.type) == name.split("_BATCH")[0].split("_CUMULATIVE")[0]
    if frame.entry is None:
        assert encode_command(frame.command) == raw
    else:
        # Our encoder, given the same command and entry, writes what the official client wrote,
        # including the CRC32C it computes itself.
        assert encode_payload_command(frame.command, frame.entry) == raw
        meta, payload = split_entry(frame.entry)
        assert encode_entry(meta, bytes(payload)) == frame.entry


def test_official_client_frame_contents():
    connect = decode_one(bytes.fromhex(OFFICIAL_FRAMES["CONNECT"])).command.connect
    assert connect.protocol_version == 20
    assert connect.feature_flags.supports_broker_entry_metadata

    send = decode_one(bytes.fromhex(OFFICIAL_FRAMES["SEND"]))
    meta, payload = split_entry(send.entry)
    assert bytes(payload) == b"hello pulsar"
    assert meta.partition_key == "key-1"
    assert [(p.key, p.value) for p in meta.properties] == [("k", "v")]
    assert meta.event_time == 1_700_000_000_123

    batch = decode_one(bytes.fromhex(OFFICIAL_FRAMES["SEND_BATCH"]))
    assert batch.command.send.num_messages == 3
    assert split_entry(batch.entry)[0].num_messages_in_batch == 3

    # Batch-index ack of index 1 in a batch of 3: bits 0 and 2 (still unacknowledged) are set.
    ack = decode_one(bytes.fromhex(OFFICIAL_FRAMES["ACK_BATCH_INDEX"])).command.ack
    assert list(ack.message_id[0].ack_set) == [0b101]
    assert not ack.message_id[0].HasField("batch_size")


def test_official_client_stream_fed_byte_by_byte():
    raw = b"".join(bytes.fromhex(h) for h in OFFICIAL_FRAMES.values())
    decoder = FrameDecoder()
    frames = []
    for i in range(len(raw)):
        frames += decoder.feed(raw[i : i + 1])
    assert len(frames) == len(OFFICIAL_FRAMES)
    assert b"".join(
        encode_command(f.command) if f.entry is None else encode_payload_command(f.command, f.entry) for f in frames
    ) == raw


# ------------------------------------------------------------------------------------ checksums


def test_checksum_mismatch_in_payload_raises():
    encoded = bytearray(send_frame(b"hello pulsar"))
    encoded[-1] ^= 0x01
    with pytest.raises(ChecksumError, match="checksum mismatch"):
        FrameDecoder().feed(bytes(encoded))


def test_checksum_mismatch_in_metadata_raises():
    encoded = send_frame(b"hello pulsar")
    cmd_size = struct.unpack_from(">I", encoded, 4)[0]
    meta_start = 8 + cmd_size + 6 + 4
    corrupted = bytearray(encoded)
    corrupted[meta_start + 3] ^= 0x80
    with pytest.raises(ChecksumError):
        FrameDecoder().feed(bytes(corrupted))


def test_corrupted_checksum_field_raises_and_names_both_values():
    encoded = bytearray(send_frame())
    cmd_size = struct.unpack_from(">I", encoded, 4)[0]
    good = struct.unpack_from(">I", encoded, 8 + cmd_size + 2)[0]
    struct.pack_into(">I", encoded, 8 + cmd_size + 2, good ^ 0xFFFF)
    with pytest.raises(ChecksumError) as info:
        FrameDecoder().feed(bytes(encoded))
    assert f"0x{good ^ 0xFFFF:08x}" in str(info.value)
    assert f"0x{good:08x}" in str(info.value)
    assert isinstance(info.value, FrameError)


def test_checksum_verification_can_be_switched_off():
    encoded = bytearray(send_frame(b"hello pulsar"))
    encoded[-1] ^= 0x01
    frame = decode_one(bytes(encoded), verify_checksum=False)
    assert bytes(split_entry(frame.entry)[1]) == b"hello pulsas"
    assert frame.checksum != crc32c_package.crc32c(frame.entry)


def test_broker_entry_metadata_is_outside_the_checksum():
    bem = pb.BrokerEntryMetadata(index=5).SerializeToString()
    encoded = bytearray(message_frame(b"x", broker_entry_metadata=bem))
    cmd_size = struct.unpack_from(">I", encoded, 4)[0]
    encoded[8 + cmd_size + 6] ^= 0xFF  # first byte of the broker entry metadata
    frame = decode_one(bytes(encoded))
    assert frame.broker_entry_metadata != bem


# --------------------------------------------------------------------------------- partial input


def sample_stream() -> list[bytes]:
    bem = pb.BrokerEntryMetadata(broker_timestamp=1, index=2).SerializeToString()
    return (
        [encode_command(c) for c in SIMPLE_COMMANDS.values()]
        + [send_frame(b"a" * n) for n in (0, 1, 300)]
        + [message_frame(b"m", broker_entry_metadata=bem), message_frame(b"n" * 70_000)]
    )


EXPECTED_FRAMES = FrameDecoder().feed(b"".join(sample_stream()))


def test_one_byte_at_a_time():
    raw = b"".join(sample_stream())
    decoder = FrameDecoder()
    frames = []
    for i in range(len(raw)):
        got = decoder.feed(raw[i : i + 1])
        frames += got
        assert len(got) <= 1
        if got:  # a frame completes exactly at its last byte, leaving nothing behind
            assert decoder.buffered == 0
        else:
            assert decoder.buffered > 0
    assert frames == EXPECTED_FRAMES
    assert len(frames) == len(sample_stream())
    assert decoder.buffered == 0


def test_buffered_counts_the_partial_frame():
    raw = send_frame(b"x" * 100)
    decoder = FrameDecoder()
    assert decoder.feed(raw[:3]) == [] and decoder.buffered == 3
    assert decoder.feed(raw[3:50]) == [] and decoder.buffered == 50
    frames = decoder.feed(raw[50:] + raw[:10])
    assert len(frames) == 1 and decoder.buffered == 10
    assert len(decoder.feed(raw[10:])) == 1 and decoder.buffered == 0


def test_empty_feed_returns_nothing():
    decoder = FrameDecoder()
    assert decoder.feed(b"") == []
    assert decoder.buffered == 0


def test_feed_accepts_bytearray_and_memoryview():
    raw = b"".join(sample_stream()[:5])
    assert FrameDecoder().feed(bytearray(raw)) == EXPECTED_FRAMES[:5]
    assert FrameDecoder().feed(memoryview(b"--" + raw)[2:]) == EXPECTED_FRAMES[:5]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_splits_yield_the_same_frames(data):
    raw = b"".join(sample_stream())
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=40)))
    decoder = FrameDecoder()
    frames = []
    last = 0
    for cut in [*cuts, len(raw)]:
        frames += decoder.feed(raw[last:cut])
        last = cut
    assert frames == EXPECTED_FRAMES
    assert decoder.buffered == 0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.binary(max_size=200), st.integers(0, 2**32 - 1), st.booleans()),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.integers(1, 64), min_size=1, max_size=20),
)
def test_arbitrary_payload_frames_round_trip_in_chunks(specs, chunk_sizes):
    encoded, expected = [], []
    for payload, seq, with_bem in specs:
        command = commands.make(T.SEND, producer_id=1, sequence_id=seq)
        entry = encode_entry(metadata(sequence_id=seq), payload)
        bem = struct.pack(">Q", seq) if with_bem else None
        encoded.append(encode_payload_command(command, entry, broker_entry_metadata=bem))
        expected.append((seq, payload, bem))
    raw = b"".join(encoded)
    decoder = FrameDecoder()
    frames = []
    pos = i = 0
    while pos < len(raw):
        size = chunk_sizes[i % len(chunk_sizes)]
        frames += decoder.feed(raw[pos : pos + size])
        pos += size
        i += 1
    assert [(f.command.send.sequence_id, bytes(split_entry(f.entry)[1]), f.broker_entry_metadata) for f in frames] == (
        expected
    )


# ----------------------------------------------------------------------------------- size limits


def test_default_limit_is_max_message_size_plus_overhead():
    assert FrameDecoder().max_frame_size == DEFAULT_MAX_MESSAGE_SIZE + FRAME_OVERHEAD == 5 * 1024 * 1024 + 10 * 1024


def test_oversized_prefix_raises_before_the_body_arrives():
    decoder = FrameDecoder(max_frame_size=1024)
    # Only the size prefix (and nothing of the body) has arrived.
    with pytest.raises(FrameTooLargeError, match="1025 bytes exceeds the limit of 1024"):
        decoder.feed(struct.pack(">I", 1025))


def test_oversized_prefix_of_a_huge_frame_is_rejected_on_four_bytes():
    decoder = FrameDecoder()
    assert decoder.feed(b"\xff\xff") == []
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(b"\xff\xff")
    assert isinstance(info.value, FrameError)
    assert str(2**32 - 1) in str(info.value)


def test_oversized_frame_after_good_frames_in_the_stream():
    decoder = FrameDecoder(max_frame_size=1024)
    assert len(decoder.feed(encode_command(SIMPLE_COMMANDS["PING"]))) == 1
    with pytest.raises(FrameTooLargeError):
        decoder.feed(struct.pack(">I", 10_000) + b"\x00" * 10)


def test_frame_exactly_at_the_limit_is_accepted():
    raw = send_frame(b"z" * 500)
    limit = len(raw) - 4
    assert len(decode_one(raw, max_frame_size=limit).entry) > 500
    with pytest.raises(FrameTooLargeError):
        FrameDecoder(max_frame_size=limit - 1).feed(raw[:4])


# ------------------------------------------------------------------------------- malformed frames


def frame_of(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def assert_frame_error(raw: bytes, pattern: str) -> FrameError:
    with pytest.raises(FrameError, match=pattern) as info:
        FrameDecoder().feed(raw)
    assert not isinstance(info.value, (ChecksumError, FrameTooLargeError))
    # The same problem is reported by the one-shot decoder.
    with pytest.raises(FrameError, match=pattern):
        decode_frame(raw[4:])
    return info.value


def test_frame_too_short_for_a_command_size():
    assert_frame_error(frame_of(b""), "frame of 0 bytes has no command size")
    assert_frame_error(frame_of(b"\x00\x00"), "frame of 2 bytes has no command size")


def test_command_size_past_the_end():
    cmd = SIMPLE_COMMANDS["FLOW"].SerializeToString()
    raw = frame_of(struct.pack(">I", len(cmd) + 1) + cmd)
    assert_frame_error(raw, rf"command size {len(cmd) + 1} exceeds the frame's {len(cmd)} remaining bytes")


def test_garbage_protobuf():
    garbage = b"\xff\xff\xff\xff\xff"
    assert_frame_error(frame_of(struct.pack(">I", len(garbage)) + garbage), "malformed BaseCommand")


def test_missing_type():
    # A FLOW body without the BaseCommand.type field.
    body = pb.BaseCommand(flow=pb.CommandFlow(consumer_id=1, messagePermits=1)).SerializePartialToString()
    assert_frame_error(frame_of(struct.pack(">I", len(body)) + body), "BaseCommand without a known type")
    assert_frame_error(frame_of(struct.pack(">I", 0)), "BaseCommand without a known type")


def test_unknown_type_number():
    body = b"\x08\x63"  # type = 99, not in Pulsar's enum
    assert_frame_error(frame_of(struct.pack(">I", len(body)) + body), "BaseCommand without a known type")


def test_known_but_unmodelled_type_still_decodes():
    # END_TXN_ON_PARTITION (58): the type is in the enum so the frame parses; its body is skipped.
    frame = decode_one(frame_of(struct.pack(">I", 2) + b"\x08\x3a"))
    assert frame.command.type == T.END_TXN_ON_PARTITION


def test_bad_magic():
    entry = encode_entry(metadata(), b"p")
    part = command_part(commands.make(T.SEND, producer_id=1, sequence_id=1))
    good = with_frame_checksum(part, entry)
    bad = bytearray(good)
    bad[4 + len(part)] = 0x0F  # 0x0e01 -> 0x0f01
    assert_frame_error(bytes(bad), "unexpected magic 0x0f01 where 0x0e01 was expected")


def test_metadata_size_past_the_end():
    meta = metadata().SerializeToString()
    entry = struct.pack(">I", len(meta) + 100) + meta + b"p"  # claims more metadata than there is
    part = command_part(commands.make(T.SEND, producer_id=1, sequence_id=1))
    assert_frame_error(with_frame_checksum(part, entry), rf"metadata size {len(meta) + 100} runs past the end")


@pytest.mark.parametrize("section", [b"\x0e", b"\x0e\x01", b"\x0e\x01\x00\x00\x00\x00", b"\x0e\x01\x00\x00\x00\x00\x00"])
def test_truncated_payload_section(section):
    part = command_part(commands.make(T.SEND, producer_id=1, sequence_id=1))
    assert_frame_error(frame_of(part + section), rf"payload section of {len(section)} bytes is too short")


def test_truncated_broker_entry_metadata():
    part = command_part(commands.make(T.MESSAGE, consumer_id=1, message_id=mid(1, 1)))
    entry = encode_entry(metadata(), b"p")
    section = struct.pack(">HI", MAGIC_BROKER_ENTRY_METADATA, 1000) + b"\x08\x01"
    raw = frame_of(part + section + struct.pack(">HI", MAGIC_CRC32C, crc32c_package.crc32c(entry)) + entry)
    assert_frame_error(raw, "broker entry metadata size 1000 runs past the end")


def test_broker_entry_metadata_without_an_entry():
    part = command_part(commands.make(T.MESSAGE, consumer_id=1, message_id=mid(1, 1)))
    section = struct.pack(">HI", MAGIC_BROKER_ENTRY_METADATA, 2) + b"\x08\x01"
    assert_frame_error(frame_of(part + section), "payload section of 0 bytes is too short")


def test_decoder_error_is_raised_for_a_bad_frame_among_good_ones():
    bad = frame_of(struct.pack(">I", 0))
    decoder = FrameDecoder()
    assert len(decoder.feed(encode_command(SIMPLE_COMMANDS["PING"]))) == 1
    with pytest.raises(FrameError, match="without a known type"):
        decoder.feed(bad)


# ----------------------------------------------------------------------------------- split_entry


def test_split_entry_returns_metadata_and_a_view_of_the_payload():
    meta = metadata(partition_key="pk")
    entry = encode_entry(meta, b"payload")
    decoded, payload = split_entry(entry)
    assert decoded == meta
    assert isinstance(payload, memoryview)
    assert payload.tobytes() == b"payload"
    assert split_entry(memoryview(entry))[0] == meta
    assert bytes(split_entry(encode_entry(meta, b""))[1]) == b""


@pytest.mark.parametrize("entry", [b"", b"\x00", b"\x00\x00\x00"])
def test_split_entry_too_short(entry):
    with pytest.raises(FrameError, match=f"entry of {len(entry)} bytes is too short for a metadata size"):
        split_entry(entry)


def test_split_entry_metadata_size_past_the_end():
    with pytest.raises(FrameError, match="metadata size 10 runs past the end of a 7-byte entry"):
        split_entry(struct.pack(">I", 10) + b"abc")


def test_split_entry_garbage_metadata():
    garbage = b"\xff\xff\xff\xff\xff"
    with pytest.raises(FrameError, match="malformed MessageMetadata"):
        split_entry(struct.pack(">I", len(garbage)) + garbage + b"payload")


# ------------------------------------------------------------------------------- bounded buffering


def test_buffer_is_released_when_every_frame_is_consumed():
    decoder = FrameDecoder()
    big = send_frame(b"x" * 200_000)
    assert len(decoder.feed(big)) == 1
    assert decoder.buffered == 0
    decoder.feed(encode_command(SIMPLE_COMMANDS["PING"])[:3])
    # The consumed 200 KB frame is dropped before the next bytes are appended.
    assert len(decoder._buf) == 3
    assert decoder.buffered == 3


def test_buffer_stays_bounded_over_many_split_frames():
    # 20k frames (~1 MB) fed so that every feed ends one byte into a frame: the decoder always
    # holds a partial frame, so it never starts from an empty buffer and must compact instead.
    frame = send_frame(b"y" * 17)
    count = 20_000
    raw = frame * count
    per_feed = 16 * len(frame)
    decoder = FrameDecoder()
    decoded = len(decoder.feed(raw[:1]))
    peak = 0
    for start in range(1, len(raw), per_feed):
        decoded += len(decoder.feed(raw[start : start + per_feed]))
        peak = max(peak, len(decoder._buf))
        assert decoder.buffered == (1 if start + per_feed < len(raw) else 0)
    assert decoded == count
    assert len(raw) > 800_000
    # Bounded by the compaction threshold plus one feed, far below the stream length.
    assert peak < 2 * 65536 + 2 * per_feed


def test_buffer_bounded_with_a_large_partial_frame_pending():
    small = encode_command(SIMPLE_COMMANDS["FLOW"])
    large = send_frame(b"L" * 300_000)
    decoder = FrameDecoder()
    stream = small * 10_000 + large + small * 10_000
    peak = 0
    for start in range(0, len(stream), 4093):
        decoder.feed(stream[start : start + 4093])
        peak = max(peak, len(decoder._buf))
    assert decoder.buffered == 0
    # At most about two copies of the largest frame plus the compaction threshold.
    assert peak < 2 * len(large) + 65536 + 2 * 4093


# -------------------------------------------------------------------------------------- commands


def test_type_name():
    assert commands.type_name(T.SEND) == "SEND"
    assert commands.type_name(T.GET_TOPICS_OF_NAMESPACE_RESPONSE) == "GET_TOPICS_OF_NAMESPACE_RESPONSE"
    assert commands.type_name(12345) == "12345"


EXPECTED_FIELDS = {
    "CONNECT": "connect",
    "CONNECTED": "connected",
    "PING": "ping",
    "PONG": "pong",
    "LOOKUP": "lookupTopic",
    "LOOKUP_RESPONSE": "lookupTopicResponse",
    "PARTITIONED_METADATA": "partitionMetadata",
    "PARTITIONED_METADATA_RESPONSE": "partitionMetadataResponse",
    "PRODUCER": "producer",
    "PRODUCER_SUCCESS": "producer_success",
    "SEND": "send",
    "SEND_RECEIPT": "send_receipt",
    "SEND_ERROR": "send_error",
    "SUBSCRIBE": "subscribe",
    "SUCCESS": "success",
    "ERROR": "error",
    "FLOW": "flow",
    "MESSAGE": "message",
    "ACK": "ack",
    "ACK_RESPONSE": "ackResponse",
    "REDELIVER_UNACKNOWLEDGED_MESSAGES": "redeliverUnacknowledgedMessages",
    "SEEK": "seek",
    "GET_LAST_MESSAGE_ID": "getLastMessageId",
    "GET_LAST_MESSAGE_ID_RESPONSE": "getLastMessageIdResponse",
    "CONSUMER_STATS": "consumerStats",
    "CONSUMER_STATS_RESPONSE": "consumerStatsResponse",
    "UNSUBSCRIBE": "unsubscribe",
    "CLOSE_PRODUCER": "close_producer",
    "CLOSE_CONSUMER": "close_consumer",
    "ACTIVE_CONSUMER_CHANGE": "active_consumer_change",
    "GET_TOPICS_OF_NAMESPACE": "getTopicsOfNamespace",
    "GET_TOPICS_OF_NAMESPACE_RESPONSE": "getTopicsOfNamespaceResponse",
    "REACHED_END_OF_TOPIC": "reachedEndOfTopic",
    "TOPIC_MIGRATED": "topicMigrated",
    "TC_CLIENT_CONNECT_REQUEST": "tcClientConnectRequest",
    "TC_CLIENT_CONNECT_RESPONSE": "tcClientConnectResponse",
    "NEW_TXN": "newTxn",
    "NEW_TXN_RESPONSE": "newTxnResponse",
    "ADD_PARTITION_TO_TXN": "addPartitionToTxn",
    "ADD_PARTITION_TO_TXN_RESPONSE": "addPartitionToTxnResponse",
    "ADD_SUBSCRIPTION_TO_TXN": "addSubscriptionToTxn",
    "ADD_SUBSCRIPTION_TO_TXN_RESPONSE": "addSubscriptionToTxnResponse",
    "END_TXN": "endTxn",
    "END_TXN_RESPONSE": "endTxnResponse",
}


@pytest.mark.parametrize("name", sorted(EXPECTED_FIELDS))
def test_field_name_for_every_command_we_speak(name):
    assert commands.field_name(T.Type.Value(name)) == EXPECTED_FIELDS[name]


def test_field_name_for_a_type_without_a_body():
    with pytest.raises(ValueError, match="command type END_TXN_ON_PARTITION has no body we speak"):
        commands.field_name(T.END_TXN_ON_PARTITION)
    with pytest.raises(ValueError, match="command type 999 has no body"):
        commands.field_name(999)


def test_make_sets_scalars_messages_and_lists_and_skips_none():
    command = commands.make(
        T.ACK,
        consumer_id=4,
        ack_type=pb.CommandAck.Cumulative,
        message_id=[mid(1, 2, ack_set=[3])],
        request_id=None,
    )
    assert command.type == T.ACK
    assert command.ack.consumer_id == 4
    assert not command.ack.HasField("request_id")
    assert command.ack.message_id[0].ack_set == [3]

    seek = commands.make(T.SEEK, consumer_id=1, request_id=2, message_id=mid(5, 6), message_publish_time=None)
    assert seek.seek.message_id.entryId == 6
    assert not seek.seek.HasField("message_publish_time")

    topics = commands.make(T.GET_TOPICS_OF_NAMESPACE_RESPONSE, request_id=1, topics=("a", "b"))
    assert list(topics.getTopicsOfNamespaceResponse.topics) == ["a", "b"]


def test_make_always_sets_the_body():
    command = commands.make(T.PING)
    assert command.HasField("ping")
    assert commands.body(command) is command.ping
    empty_redeliver = commands.make(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=0)
    assert empty_redeliver.HasField("redeliverUnacknowledgedMessages")
    assert empty_redeliver.IsInitialized()


def test_make_rejects_unknown_fields():
    with pytest.raises(AttributeError):
        commands.make(T.FLOW, consumer_id=1, permits=5)


def test_body_of_decoded_commands():
    for command in SIMPLE_COMMANDS.values():
        decoded = decode_one(encode_command(command)).command
        assert commands.body(decoded) == getattr(command, EXPECTED_FIELDS[commands.type_name(command.type)])


def test_protocol_version():
    assert commands.PROTOCOL_VERSION == 20
    assert pb.ProtocolVersion.Name(commands.PROTOCOL_VERSION) == "v20"
