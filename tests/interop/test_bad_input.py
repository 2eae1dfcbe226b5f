"""Bad input on one connection closes that connection only; official clients on the broker carry on.

A SEND whose checksum fails is the exception: as with Pulsar, it is refused alone (SEND_ERROR with
ChecksumError) and its connection and producer carry on.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Iterator

import pulsar
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client, InitialPosition
from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.checksum import crc32c
from airflow_pulsar.client.protocol.frames import encode_command, encode_entry, encode_payload_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, MessageMetadata, ServerError
from tests.support.raw_connection import RawConnection

pytestmark = pytest.mark.interop

T = BaseCommand.Type


@pytest.fixture
def raw(broker: BrokerProcess) -> Iterator[Callable[[], RawConnection]]:
    """Open raw connections to the broker; all closed after the test."""
    made: list[RawConnection] = []

    def make() -> RawConnection:
        connection = RawConnection(broker)
        made.append(connection)
        return connection

    yield make
    for connection in made:
        connection.close()


@pytest.fixture
def healthy(official: pulsar.Client, topic_name: str) -> Callable[[], None]:
    """An official producer and consumer on the broker; returns a check that they still work."""
    consumer = official.subscribe(topic_name + "-healthy", "sub")
    producer = official.create_producer(topic_name + "-healthy", batching_enabled=True)
    rounds = iter(range(1000))

    def check() -> None:
        payloads = [f"{next(rounds)}".encode() for _ in range(5)]
        for payload in payloads:
            producer.send_async(payload, None)
        producer.flush()
        received = [consumer.receive(timeout_millis=5000) for _ in payloads]
        assert [m.data() for m in received] == payloads
        for message in received:
            consumer.acknowledge(message)

    check()
    return check


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http-request"),
        pytest.param(b"\x00\x00\x00\x0c\x00\x00\x00\x08\xff\xff\xff\xff\xff\xff\xff\xff", id="bad-protobuf"),
        pytest.param(b"\x00\x00\x00\x04\x00\x00\x00\x09", id="command-size-past-frame"),
        pytest.param(struct.pack(">II", 1000, 996) + random.Random(7).randbytes(996), id="binary-noise"),
    ],
)
def test_garbage_closes_only_that_connection(
    broker: BrokerProcess, raw: Callable[[], RawConnection], healthy: Callable[[], None], garbage: bytes
) -> None:
    connection = raw()
    connection.send(garbage)
    connection.assert_closed_by_broker()
    healthy()
    assert broker.process.poll() is None


def test_garbage_after_handshake(raw: Callable[[], RawConnection], healthy: Callable[[], None]) -> None:
    connection = raw()
    connection.handshake()
    connection.send(b"\x00\x00\x00\x06\x00\x00\x00\x02\x08\x63")  # BaseCommand with an unknown type 99
    connection.assert_closed_by_broker()
    healthy()


def test_command_before_connect_closes(raw: Callable[[], RawConnection], healthy: Callable[[], None]) -> None:
    connection = raw()
    connection.send(encode_command(commands.make(T.LOOKUP, topic="persistent://public/default/x", request_id=1)))
    connection.assert_closed_by_broker()
    healthy()


@pytest.mark.parametrize("size", [64 * 1024 * 1024, 0xFFFFFFFF], ids=["64MiB", "4GiB"])
def test_oversized_frame_header_closes_at_once(
    raw: Callable[[], RawConnection], healthy: Callable[[], None], size: int
) -> None:
    connection = raw()
    connection.handshake()
    # Only the size prefix: the broker must refuse before waiting for (or buffering) the body.
    connection.send(struct.pack(">I", size) + b"\x00" * 16)
    connection.assert_closed_by_broker()
    healthy()


def _send_one(connection: RawConnection, sequence_id: int, checksum_flip: int) -> None:
    """Send one message on producer 1 whose CRC is XORed with ``checksum_flip``."""
    metadata = MessageMetadata(producer_name="raw", sequence_id=sequence_id, publish_time=1)
    entry = encode_entry(metadata, b"payload")
    send = commands.make(T.SEND, producer_id=1, sequence_id=sequence_id)
    connection.send(encode_payload_command(send, entry, checksum=crc32c(entry) ^ checksum_flip))


def _send_by_hand(raw: Callable[[], RawConnection], topic_name: str, checksum_flip: int) -> RawConnection:
    """Open a producer on a raw connection and send one message whose CRC is XORed with ``checksum_flip``."""
    connection = raw()
    connection.handshake()
    connection.request(
        T.PRODUCER, T.PRODUCER_SUCCESS, topic=f"persistent://public/default/{topic_name}", producer_id=1, request_id=1
    )
    _send_one(connection, 0, checksum_flip)
    return connection


def test_send_with_bad_checksum_is_refused_alone(
    broker: BrokerProcess, raw: Callable[[], RawConnection], healthy: Callable[[], None], topic_name: str
) -> None:
    connection = _send_by_hand(raw, topic_name, checksum_flip=0x5A5A5A5A)
    error = connection.reply(T.SEND_ERROR).send_error
    assert (error.producer_id, error.sequence_id, error.error) == (1, 0, ServerError.ChecksumError)
    assert error.message == "Checksum failed on the broker"
    healthy()
    # Nothing of the corrupt frame was stored ...
    assert broker.topic_stats(topic_name)["msgInCounter"] == 0
    # ... and the connection and its producer carry on.
    _send_one(connection, 1, checksum_flip=0)
    assert connection.reply(T.SEND_RECEIPT).send_receipt.sequence_id == 1
    assert broker.topic_stats(topic_name)["msgInCounter"] == 1


def test_send_with_good_checksum_is_stored(
    raw: Callable[[], RawConnection], official: pulsar.Client, topic_name: str
) -> None:
    # The same hand-built SEND with a correct checksum works, so the test above fails for the CRC alone.
    connection = _send_by_hand(raw, topic_name, checksum_flip=0)
    receipt = connection.request(T.PING, T.SEND_RECEIPT)
    assert receipt.send_receipt.sequence_id == 0
    reader = official.create_reader(topic_name, pulsar.MessageId.earliest)
    assert reader.read_next(timeout_millis=5000).data() == b"payload"


def test_a_key_and_a_property_that_are_not_utf8_read_as_java_reads_them(
    broker: BrokerProcess, raw: Callable[[], RawConnection], official: pulsar.Client, topic_name: str
) -> None:
    """Protobuf does not check proto2 strings, so a producer may send any bytes as a key or a
    property. Our consumer reads each malformed sequence as U+FFFD and keeps the key's bytes; the
    official client raises on reading them."""
    topic = f"persistent://public/default/{topic_name}"
    theirs = official.subscribe(topic, "theirs", initial_position=pulsar.InitialPosition.Earliest)
    connection = raw()
    connection.handshake()
    connection.request(T.PRODUCER, T.PRODUCER_SUCCESS, topic=topic, producer_id=1, request_id=1)
    metadata = MessageMetadata(producer_name="raw", sequence_id=0, publish_time=1).SerializeToString()
    # A property (field 4) "k" = ff fe, and the partition key (field 6) ff fe.
    metadata += b"\x22\x07\x0a\x01k\x12\x02\xff\xfe" + b"\x32\x02\xff\xfe"
    send = commands.make(T.SEND, producer_id=1, sequence_id=0)
    connection.send(encode_payload_command(send, encode_entry(metadata, b"payload")))
    connection.reply(T.SEND_RECEIPT)

    with Client(broker.service_url) as client:
        ours = client.subscribe(topic, "ours", initial_position=InitialPosition.Earliest)
        message = ours.receive(10_000)
        assert (message.data(), message.partition_key(), message.key_bytes()) == (b"payload", "\ufffd\ufffd", b"\xff\xfe")
        assert message.properties() == {"k": "\ufffd\ufffd"}
        ours.acknowledge(message)
    official_message = theirs.receive(10_000)
    assert official_message.data() == b"payload"
    with pytest.raises(UnicodeDecodeError):
        official_message.partition_key()
