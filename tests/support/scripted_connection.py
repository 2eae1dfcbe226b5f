"""The broker's side of a connection, scripted, for unit tests of what runs on the client's side of one.

:class:`ScriptedConnection` is the client's own :class:`Connection` without its socket: each frame
written is kept as bytes, requests are answered at once by scripted replies, and frames fed to it
are decoded and routed to its producers and consumers as its reader thread routes them. A partition
producer or consumer on it is driven from raw frame bytes, step by step, without a broker.
:class:`FakeServices` is the client as they see it (``ClientServices``): its lookups hand out
scripted connections.

The frame builders write the Pulsar framing by hand from the generated protobuf classes, so the
bytes a test expects do not come from the code under test.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from typing import TypeVar

from airflow_pulsar.client.connection import Connection
from airflow_pulsar.client.exceptions import ConnectError, Result
from airflow_pulsar.client.partition_watch import PartitionWatch
from airflow_pulsar.client.producer.limits import MemoryLimit
from airflow_pulsar.client.protocol.checksum import crc32c
from airflow_pulsar.client.protocol.frames import Frame, FrameDecoder
from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    BaseCommand,
    CommandProducerSuccess,
    CommandSuccess,
    MessageMetadata,
)
from airflow_pulsar.client.services import Closeable, DeadLetterSender
from airflow_pulsar.client.timer import Timer

T = BaseCommand.Type
R = TypeVar("R")
# The producer name the scripted broker assigns.
PRODUCER_NAME = "standalone-0-7"
# A reply to a request: the frame bytes the broker answers with, or None to leave it unanswered.
Reply = Callable[[BaseCommand], bytes | None]


def simple_frame(command: BaseCommand) -> bytes:
    """``[u32 total size][u32 command size][BaseCommand]``."""
    body = command.SerializeToString()
    return struct.pack(">II", len(body) + 4, len(body)) + body


def entry_bytes(metadata: MessageMetadata, payload: bytes) -> bytes:
    """The checksum-covered region of a payload frame: ``[u32 metadata size][MessageMetadata][payload]``."""
    meta = metadata.SerializeToString()
    return struct.pack(">I", len(meta)) + meta + payload


def payload_frame(command: BaseCommand, metadata: MessageMetadata, payload: bytes) -> bytes:
    """A SEND or MESSAGE frame: the command, then ``[0x0e01][u32 crc32c]`` and the entry it covers."""
    body = command.SerializeToString()
    entry = entry_bytes(metadata, payload)
    total = 4 + len(body) + 2 + 4 + len(entry)
    return struct.pack(">II", total, len(body)) + body + struct.pack(">HI", 0x0E01, crc32c(entry)) + entry


def decode_frames(data: bytes) -> list[Frame]:
    """Every whole frame in ``data``, checksums verified."""
    return FrameDecoder().feed(data)


def success(request: BaseCommand) -> bytes:
    """SUCCESS for a request that carries a request id."""
    body = getattr(request, request.DESCRIPTOR.fields_by_number[request.type].name)
    return simple_frame(BaseCommand(type=T.SUCCESS, success=CommandSuccess(request_id=body.request_id)))


def producer_success(request: BaseCommand) -> bytes:
    """PRODUCER_SUCCESS naming the producer :data:`PRODUCER_NAME`, with no sequence id stored yet."""
    answer = CommandProducerSuccess(
        request_id=request.producer.request_id, producer_name=PRODUCER_NAME, last_sequence_id=-1, producer_ready=True
    )
    return simple_frame(BaseCommand(type=T.PRODUCER_SUCCESS, producer_success=answer))


class ScriptedConnection(Connection):
    """A :class:`Connection` whose broker is the test: writes are recorded, requests answered from ``replies``.

    ``replies`` maps a command type to its :data:`Reply`; SUBSCRIBE, PRODUCER and the closing
    requests succeed unless a test says otherwise. Writes may come from any thread (timers,
    reconnects), so recording and routing hold one lock.
    """

    def __init__(self, timer: Timer) -> None:
        super().__init__("127.0.0.1", 6650, timer=timer)
        self.replies: dict[int, Reply] = {
            T.SUBSCRIBE: success,
            T.PRODUCER: producer_success,
            T.CLOSE_CONSUMER: success,
            T.CLOSE_PRODUCER: success,
        }
        self._written = bytearray()
        self._outgoing = FrameDecoder()
        self._broker_lock = threading.RLock()

    def send(self, data: bytes) -> bool:
        """Record the frames written and answer the requests among them; False once closed, as on a socket.

        Every frame is recorded at once, as if the connection's writer wrote it right away."""
        if self.closed:
            return False
        with self._broker_lock:
            self._written += data
            for frame in self._outgoing.feed(data):
                reply = self.replies.get(frame.command.type)
                answer = reply(frame.command) if reply is not None else None
                if answer is not None:
                    self.feed(answer)
        return True

    def feed(self, data: bytes) -> None:
        """Bytes from the broker: each whole frame is routed as the reader thread routes it."""
        with self._broker_lock:
            self._route(self._decoder.feed_messages(data))

    def drop(self) -> None:
        """The broker went away: what the reader thread does when its socket reaches its end."""
        self._lost(ConnectError(f"connection to {self.address} closed"))

    def written(self) -> bytes:
        """Every byte written since the last call, and forget them."""
        with self._broker_lock:
            data, self._written = bytes(self._written), bytearray()
        return data

    def written_frames(self) -> list[Frame]:
        """The frames written since the last call to this or :meth:`written`."""
        return decode_frames(self.written())

    def types_written(self) -> list[int]:
        """The command types of the frames written so far, without forgetting them."""
        with self._broker_lock:
            data = bytes(self._written)
        return [frame.command.type for frame in decode_frames(data)]


class FakeServices:
    """What producers and consumers need from the client (``ClientServices``), with scripted connections.

    A lookup gets the current connection, or a new one once it is closed, as the client's pool
    does. Requests are tried once: a test that wants an error sees it.
    """

    def __init__(self, timer: Timer, operation_timeout: float = 5.0) -> None:
        self.timer = timer
        self.operation_timeout = operation_timeout
        self.memory_limit = MemoryLimit(0)
        self.partition_watch = PartitionWatch(self.partition_count, 0)  # never asks: no topic here has partitions
        self.connections = [ScriptedConnection(timer)]
        self.registered: list[Closeable] = []

    @property
    def connection(self) -> ScriptedConnection:
        """The connection the next lookup returns while it stays open."""
        return self.connections[-1]

    def lookup(self, topic: str) -> ScriptedConnection:
        """The connection serving every topic."""
        if self.connection.closed:
            self.connections.append(ScriptedConnection(self.timer))
        return self.connection

    def with_retries(
        self, what: str, operation: Callable[[], R], deadline: float | None = None, retryable: frozenset[Result] = frozenset()
    ) -> R:
        """Run ``operation`` once."""
        return operation()

    def partition_count(self, topic: str) -> int:
        """Every topic is non-partitioned."""
        return 0

    def topics_of_namespace(self, namespace: str, mode: int) -> list[str]:
        """Refused: the tests here subscribe to no pattern."""
        raise AssertionError(f"no pattern subscription is expected here (asked for {namespace})")

    def register(self, handler: Closeable) -> None:
        """Track an open producer or consumer."""
        self.registered.append(handler)

    def unregister(self, handler: Closeable) -> None:
        """Forget a closed producer or consumer."""
        if handler in self.registered:
            self.registered.remove(handler)

    def create_producer(self, topic: str, *, batching_enabled: bool = True) -> DeadLetterSender:
        """Refused: the tests here configure no dead-letter topic."""
        raise AssertionError(f"no dead-letter producer is expected here (asked for {topic})")

    def subscribe(self, topic: str, subscription_name: str, *, initial_position: int = 0) -> Closeable:
        """Refused: the tests here configure no dead-letter topic."""
        raise AssertionError(f"no dead-letter subscription is expected here (asked for {topic})")
