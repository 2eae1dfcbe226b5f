"""The connection to a broker over a real TCP socket pair on loopback, the test playing the broker.

The test reads the frames the connection writes and compares them byte for byte with frames built
here from the generated protobuf classes; it writes frames as bytes, whole, split across reads,
coalesced, or malformed.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import pytest

from airflow_pulsar.client.connection import CLIENT_VERSION, Connection
from airflow_pulsar.client.exceptions import AuthenticationError, ConnectError
from airflow_pulsar.client.protocol.commands import PROTOCOL_VERSION
from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    BaseCommand,
    CommandConnect,
    CommandConnected,
    CommandError,
    CommandPartitionedTopicMetadataResponse,
    CommandPing,
    CommandPong,
    FeatureFlags,
    ServerError,
)
from airflow_pulsar.client.timer import Timer
from tests.support.polling import wait_until
from tests.support.scripted_connection import simple_frame

T = BaseCommand.Type
MAX_MESSAGE_SIZE = 2048
# Pulsar allows a frame this much above max_message_size for the command and metadata.
FRAME_OVERHEAD = 10 * 1024
TOPIC = "persistent://public/default/lookups"

PING = simple_frame(BaseCommand(type=T.PING, ping=CommandPing()))
PONG = simple_frame(BaseCommand(type=T.PONG, pong=CommandPong()))


class BrokerEnd:
    """The broker's end of the socket pair: frames read whole, bytes written as given."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.settimeout(5)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _exactly(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise EOFError(f"the client closed the connection after {len(data)} of {size} bytes")
            data += chunk
        return data

    def read_frame(self) -> bytes:
        """The next frame the client wrote, size prefix included."""
        header = self._exactly(4)
        (size,) = struct.unpack(">I", header)
        return header + self._exactly(size)

    def read_command(self) -> BaseCommand:
        """The command of the next frame the client wrote (a frame without payload)."""
        frame = self.read_frame()
        (size,) = struct.unpack_from(">I", frame, 4)
        return BaseCommand.FromString(frame[8 : 8 + size])

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def at_end(self) -> bool:
        """Whether the client closed its end (the next read finds nothing more)."""
        return self.sock.recv(1) == b""


class Opening:
    """A connection whose ``open`` runs on a thread of its own, and the broker's end it reached."""

    def __init__(self, connection: Connection, listener: socket.socket) -> None:
        self.connection = connection
        self.opened: Future[None] = Future()
        threading.Thread(target=self._open, daemon=True).start()
        accepted, _ = listener.accept()
        self.broker = BrokerEnd(accepted)

    def _open(self) -> None:
        try:
            self.connection.open()
        except BaseException as exc:
            self.opened.set_exception(exc)
        else:
            self.opened.set_result(None)


class LossRecorder:
    """A producer registered on the connection that only notes the connection being lost."""

    def __init__(self) -> None:
        self.lost: list[Connection] = []

    def handle_receipts(self, receipts: list[object]) -> None:
        raise AssertionError("no receipt is expected")

    def handle_send_error(self, body: object) -> None:
        raise AssertionError("no send error is expected")

    def handle_broker_close(self) -> None:
        raise AssertionError("no CLOSE_PRODUCER is expected")

    def connection_lost(self, connection: Connection) -> None:
        self.lost.append(connection)


@pytest.fixture
def opening(timer: Timer) -> Iterator[Callable[..., Opening]]:
    """Open connections to the test's listening socket (each ``open`` on a thread); closed after the test."""
    made: list[Opening] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(5)
        port = listener.getsockname()[1]

        def start(keepalive_seconds: float = 30.0) -> Opening:
            connection = Connection("127.0.0.1", port, timer=timer, connection_timeout=5, keepalive_seconds=keepalive_seconds)
            made.append(Opening(connection, listener))
            return made[-1]

        yield start
    for each in made:
        each.connection.close()
        each.broker.sock.close()


def connected(server_version: str = "scripted-broker") -> bytes:
    body = CommandConnected(server_version=server_version, protocol_version=PROTOCOL_VERSION, max_message_size=MAX_MESSAGE_SIZE)
    return simple_frame(BaseCommand(type=T.CONNECTED, connected=body))


@pytest.fixture
def handshaken(opening: Callable[..., Opening]) -> Opening:
    """A connection that completed its handshake."""
    started = opening()
    started.broker.read_frame()
    started.broker.write(connected())
    started.opened.result(5)
    return started


def metadata_request(connection: Connection) -> Future[CommandPartitionedTopicMetadataResponse]:
    return connection.request(T.PARTITIONED_METADATA, topic=TOPIC)


def metadata_response(request: BaseCommand, partitions: int) -> bytes:
    body = CommandPartitionedTopicMetadataResponse(
        request_id=request.partitionMetadata.request_id, partitions=partitions, response=CommandPartitionedTopicMetadataResponse.Success
    )
    return simple_frame(BaseCommand(type=T.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse=body))


def test_handshake_sends_connect_and_takes_the_brokers_limits_from_connected(opening: Callable[..., Opening]) -> None:
    started = opening()
    connect = CommandConnect(
        client_version=CLIENT_VERSION,
        protocol_version=PROTOCOL_VERSION,
        auth_method_name="none",
        feature_flags=FeatureFlags(supports_auth_refresh=True, supports_broker_entry_metadata=True),
    )
    assert started.broker.read_frame() == simple_frame(BaseCommand(type=T.CONNECT, connect=connect))
    assert not started.opened.done()  # waiting for CONNECTED
    started.broker.write(connected("scripted-broker-4.2"))
    started.opened.result(5)
    assert started.connection.server_version == "scripted-broker-4.2"
    assert started.connection.max_message_size == MAX_MESSAGE_SIZE


def test_an_error_instead_of_connected_fails_the_open_with_the_brokers_reason(opening: Callable[..., Opening]) -> None:
    started = opening()
    started.broker.read_frame()
    refusal = CommandError(request_id=0, error=ServerError.AuthenticationError, message="token expired")
    started.broker.write(simple_frame(BaseCommand(type=T.ERROR, error=refusal)))
    with pytest.raises(AuthenticationError, match=r"^127\.0\.0\.1:\d+ refused the connection: token expired$"):
        started.opened.result(5)
    assert started.broker.at_end()


def test_ping_is_answered_with_pong(handshaken: Opening) -> None:
    handshaken.broker.write(PING)
    assert handshaken.broker.read_frame() == PONG


def test_keepalive_pings_the_broker_and_drops_one_that_stays_silent(opening: Callable[..., Opening]) -> None:
    started = opening(keepalive_seconds=0.1)
    started.broker.read_frame()
    started.broker.write(connected())
    started.opened.result(5)
    began = time.monotonic()
    assert started.broker.read_frame() == PING
    wait_until(lambda: started.connection.closed, "the silent broker to be dropped")
    assert time.monotonic() - began >= 0.1  # not before two keepalive intervals without traffic


def test_a_frame_split_across_reads_is_reassembled(handshaken: Opening) -> None:
    response = metadata_request(handshaken.connection)
    answer = metadata_response(handshaken.broker.read_command(), partitions=4)
    for piece in (answer[:3], answer[3:11]):  # inside the size prefix, then inside the command
        handshaken.broker.write(piece)
        time.sleep(0.05)
        assert not response.done()
    handshaken.broker.write(answer[11:])
    assert response.result(5).partitions == 4


def test_frames_coalesced_in_one_read_are_each_routed(handshaken: Opening) -> None:
    first, second = metadata_request(handshaken.connection), metadata_request(handshaken.connection)
    requests = [handshaken.broker.read_command(), handshaken.broker.read_command()]
    handshaken.broker.write(metadata_response(requests[1], partitions=2) + PING + metadata_response(requests[0], partitions=1))
    assert (first.result(5).partitions, second.result(5).partitions) == (1, 2)
    assert handshaken.broker.read_frame() == PONG


def _missing_required_field() -> bytes:
    command = BaseCommand(type=T.SEND_RECEIPT)
    command.send_receipt.producer_id = 1  # sequence_id is required too
    body = command.SerializePartialToString()
    return struct.pack(">II", len(body) + 4, len(body)) + body


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (struct.pack(">II", 8, 4) + b"\xff\xff\xff\xff", "malformed BaseCommand"),
        (struct.pack(">I", 100_000_000), f"frame of 100000000 bytes exceeds the limit of {MAX_MESSAGE_SIZE + FRAME_OVERHEAD} bytes"),
        (_missing_required_field(), "SEND_RECEIPT is missing required fields: send_receipt.sequence_id"),
    ],
    ids=["garbage-command", "too-large", "missing-field"],
)
def test_a_malformed_frame_closes_the_connection_and_fails_what_waits_on_it(handshaken: Opening, frame: bytes, reason: str) -> None:
    producer = LossRecorder()
    handshaken.connection.producers[1] = producer
    pending = metadata_request(handshaken.connection)
    handshaken.broker.read_frame()
    handshaken.broker.write(frame)
    with pytest.raises(ConnectError, match=rf"^malformed frame from 127\.0\.0\.1:\d+: {reason}"):
        pending.result(5)
    assert handshaken.connection.closed
    assert producer.lost == [handshaken.connection]
    assert handshaken.connection.producers == {}
    assert handshaken.broker.at_end()
    with pytest.raises(ConnectError, match=r"^connection to 127\.0\.0\.1:\d+ is closed$"):
        metadata_request(handshaken.connection).result(5)
