"""Our client against a hostile server: a real socket server in the test that speaks just enough
of the protocol, then misbehaves in one way. Each time the client raises a clear error within its
timeout, or drops what is corrupt and goes on, and never hangs.

The server is a stand-in (no real broker sends these frames); that is the point of the test.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.exceptions import ConnectError, InvalidConfiguration, PulsarException, Timeout
from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.checksum import crc32c
from airflow_pulsar.client.protocol.frames import FrameDecoder, encode_command, encode_entry, encode_payload_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, CommandLookupTopicResponse, MessageIdData, MessageMetadata

T = BaseCommand.Type
OPERATION_TIMEOUT = 1.0
SLACK = 2.0
Misbehaviour = Callable[[socket.socket, BaseCommand], None]


class HostileBroker:
    """Answers CONNECT, metadata, lookup, PRODUCER and SUBSCRIBE as a broker would, except for the
    commands given in ``misbehave``, which it answers with whatever those functions write."""

    def __init__(self, misbehave: dict[int, Misbehaviour]):
        self.misbehave = misbehave
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"pulsar://127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections = 0
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, name="hostile-broker", daemon=True).start()

    def close(self) -> None:
        self._listener.close()
        for sock in self._open:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            self._open.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        decoder = FrameDecoder()
        try:
            while data := sock.recv(65536):
                for frame in decoder.feed(data):
                    command = frame.command
                    if command.type in self.misbehave:
                        self.misbehave[command.type](sock, command)
                    else:
                        self._behave(sock, command)
        except OSError:
            pass

    def _behave(self, sock: socket.socket, command: BaseCommand) -> None:
        body = commands.body(command)
        replies = {
            T.CONNECT: lambda: commands.make(T.CONNECTED, server_version="hostile", protocol_version=20),
            T.PARTITIONED_METADATA: lambda: commands.make(T.PARTITIONED_METADATA_RESPONSE, request_id=body.request_id, partitions=0),
            T.LOOKUP: lambda: commands.make(
                T.LOOKUP_RESPONSE,
                request_id=body.request_id,
                brokerServiceUrl=self.url,
                response=CommandLookupTopicResponse.Connect,
                authoritative=True,
            ),
            T.PRODUCER: lambda: commands.make(T.PRODUCER_SUCCESS, request_id=body.request_id, producer_name="hostile-0"),
            T.SUBSCRIBE: lambda: commands.make(T.SUCCESS, request_id=body.request_id),
            T.CLOSE_PRODUCER: lambda: commands.make(T.SUCCESS, request_id=body.request_id),
            T.CLOSE_CONSUMER: lambda: commands.make(T.SUCCESS, request_id=body.request_id),
            T.PING: lambda: commands.make(T.PONG),
        }
        reply = replies.get(command.type)
        if reply is not None:
            sock.sendall(encode_command(reply()))


@pytest.fixture
def hostile() -> Iterator[Callable[[dict[int, Misbehaviour]], HostileBroker]]:
    made: list[HostileBroker] = []

    def make(misbehave: dict[int, Misbehaviour]) -> HostileBroker:
        made.append(HostileBroker(misbehave))
        return made[-1]

    yield make
    for server in made:
        server.close()


def _client(server: HostileBroker) -> Client:
    return Client(server.url, operation_timeout_seconds=OPERATION_TIMEOUT, connection_timeout_ms=1000)


def _fails_in_time(call: Callable[[], Any], error: type[Exception], match: str, limit: float = OPERATION_TIMEOUT) -> None:
    start = time.monotonic()
    with pytest.raises(error, match=match) as raised:
        call()
    elapsed = time.monotonic() - start
    assert elapsed <= limit + SLACK, f"took {elapsed:.2f} s"
    print(f"\nRELIABILITY hostile server: {type(raised.value).__name__} after {elapsed:.2f} s: {raised.value}")


def _send(data: bytes, close: bool = False) -> Misbehaviour:
    def misbehave(sock: socket.socket, command: BaseCommand) -> None:
        sock.sendall(data)
        if close:
            sock.shutdown(socket.SHUT_RDWR)

    return misbehave


def _silence(sock: socket.socket, command: BaseCommand) -> None:
    """Say nothing at all."""


CONNECTED = encode_command(commands.make(T.CONNECTED, server_version="hostile", protocol_version=20))


@pytest.mark.parametrize(
    ("answer", "error", "match"),
    [
        pytest.param(_send(b"\x00\x00\x00\x0c\x00\x00\x00\x08" + b"\xff" * 8), ConnectError, "malformed BaseCommand", id="garbage"),
        pytest.param(
            _send(CONNECTED[: len(CONNECTED) // 2], close=True),
            ConnectError,
            "closed the connection during the handshake",
            id="truncated",
        ),
        pytest.param(_send(struct.pack(">I", 0xFFFFFFF0) + b"\x00" * 8), ConnectError, "exceeds the limit", id="huge-size"),
        pytest.param(_send(struct.pack(">II", 4, 9)), ConnectError, "command size 9 exceeds", id="wrong-size"),
        pytest.param(_send(encode_command(commands.make(T.PONG))), ConnectError, "sent PONG before CONNECTED", id="out-of-order"),
        pytest.param(_silence, ConnectError, "handshake with .* failed: timed out", id="silence"),
    ],
)
def test_a_bad_answer_to_connect_fails_clearly(
    hostile: Callable[..., HostileBroker], answer: Misbehaviour, error: type[Exception], match: str
) -> None:
    server = hostile({T.CONNECT: answer})
    with _client(server) as client:
        _fails_in_time(lambda: client.create_producer("t"), error, match)


def test_connected_then_silence_times_out(hostile: Callable[..., HostileBroker]) -> None:
    server = hostile({T.PARTITIONED_METADATA: _silence})
    with _client(server) as client:
        _fails_in_time(lambda: client.subscribe("t", "s"), Timeout, "PARTITIONED_METADATA .* no response within 1 s")


def test_a_lookup_answer_that_is_no_url_fails_clearly(hostile: Callable[..., HostileBroker]) -> None:
    def lookup(sock: socket.socket, command: BaseCommand) -> None:
        sock.sendall(
            encode_command(
                commands.make(
                    T.LOOKUP_RESPONSE,
                    request_id=command.lookupTopic.request_id,
                    brokerServiceUrl="gopher://nowhere",
                    response=CommandLookupTopicResponse.Connect,
                )
            )
        )

    server = hostile({T.LOOKUP: lookup})
    with _client(server) as client:
        _fails_in_time(lambda: client.create_producer("t"), InvalidConfiguration, "gopher://nowhere")


def _not_utf8(command_type: int, **fields: Any) -> Misbehaviour:
    """Answer with a ``command_type`` whose text fields set to "@@" carry bytes that are not UTF-8."""

    def answer(sock: socket.socket, command: BaseCommand) -> None:
        request_id = commands.body(command).request_id
        body = commands.make(command_type, request_id=request_id, **fields).SerializeToString().replace(b"@@", b"\xff\xfe")
        sock.sendall(struct.pack(">II", len(body) + 4, len(body)) + body)

    return answer


@pytest.mark.parametrize(
    ("misbehave", "field"),
    [
        pytest.param(
            {T.LOOKUP: _not_utf8(T.LOOKUP_RESPONSE, brokerServiceUrl="@@", response=CommandLookupTopicResponse.Connect)},
            "brokerServiceUrl",
            id="lookup-url",
        ),
        pytest.param({T.PRODUCER: _not_utf8(T.PRODUCER_SUCCESS, producer_name="@@")}, "producer_name", id="producer-name"),
    ],
)
def test_text_that_is_not_utf8_fails_clearly(
    hostile: Callable[..., HostileBroker], misbehave: dict[int, Misbehaviour], field: str
) -> None:
    server = hostile(misbehave)
    with _client(server) as client:
        _fails_in_time(lambda: client.create_producer("t"), ConnectError, f"{field} is not UTF-8 text")


def _deliver(entries: list[bytes], checksums: list[int | None]) -> Misbehaviour:
    """On the first FLOW, deliver these entries (a None checksum is computed, so correct)."""

    def flow(sock: socket.socket, command: BaseCommand) -> None:
        for entry_id, (entry, checksum) in enumerate(zip(entries, checksums, strict=True)):
            message = commands.make(
                T.MESSAGE, consumer_id=command.flow.consumer_id, message_id=MessageIdData(ledgerId=1, entryId=entry_id)
            )
            sock.sendall(encode_payload_command(message, entry, checksum))

    return flow


def _entry(payload: bytes, **fields: Any) -> bytes:
    return encode_entry(MessageMetadata(producer_name="hostile", sequence_id=0, publish_time=1, **fields), payload)


def test_message_with_a_wrong_crc_is_dropped_and_the_consumer_reconnects(
    hostile: Callable[..., HostileBroker], caplog: pytest.LogCaptureFixture
) -> None:
    corrupt = _entry(b"corrupt")
    server = hostile({T.FLOW: _deliver([corrupt], [crc32c(corrupt) ^ 1])})
    with _client(server) as client, caplog.at_level(logging.ERROR):
        consumer = client.subscribe("t", "s")
        _fails_in_time(lambda: consumer.receive(1000), Timeout, "no message within 1000 ms", limit=1.0)
        deadline = time.monotonic() + 5
        while server.connections < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert server.connections >= 2, "the consumer did not reconnect after dropping the corrupt connection"
    assert "checksum mismatch" in caplog.text


def test_a_corrupt_batch_is_dropped_and_the_next_message_arrives(
    hostile: Callable[..., HostileBroker], caplog: pytest.LogCaptureFixture
) -> None:
    garbage_batch = _entry(b"\xff" * 40, num_messages_in_batch=5)
    good = _entry(b"good")
    server = hostile({T.FLOW: _deliver([garbage_batch, good], [None, None])})
    with _client(server) as client, caplog.at_level(logging.ERROR):
        consumer = client.subscribe("t", "s")
        assert consumer.receive(5000).data() == b"good"
    assert "batch" in caplog.text


def test_garbage_mid_session_fails_waiting_calls_clearly(hostile: Callable[..., HostileBroker]) -> None:
    server = hostile({T.SEND: _send(b"\x00\x00\x00\x05garbage")})
    with _client(server) as client:
        producer = client.create_producer("t", send_timeout_millis=1000)
        # Each connection the producer makes dies on garbage; the send ends at its timeout.
        _fails_in_time(lambda: producer.send(b"x"), PulsarException, "send timeout|closed")
