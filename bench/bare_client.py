"""A bare client: the least a Python process can do per unbatched message, to show a broker's ceiling.

It speaks the protocol over one blocking socket with the project's frame codec and nothing else:
no receiver queue, no Message objects, no threads, no timers. The consumer counts each MESSAGE
(or, told to build them, makes each into the Message a ``receive()`` returns, and no more; of a
backlog of batches, counts each entry's messages, or splits it into its Messages),
returns permits as the official clients do (half the receiver queue at a time) and acknowledges
individually, 1,000 ids or 100 ms at a time. The producer writes SENDs as its window of pending
receipts allows and counts the receipts. What a real client reaches, as a share of what this one
reaches on the same broker, says how much of the broker's rate the client leaves on the table.
"""

from __future__ import annotations

import socket
import time
from collections import defaultdict

from airflow_pulsar.client.consumer.message import Delivery, Message
from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.batch import read_batch
from airflow_pulsar.client.protocol.commands import PROTOCOL_VERSION
from airflow_pulsar.client.protocol.frames import (
    FrameDecoder,
    MessageFrame,
    encode_command,
    encode_entry,
    encode_payload_command,
    entry_metadata,
)
from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    BaseCommand,
    CommandAck,
    CommandLookupTopicResponse,
    CommandSubscribe,
)
from airflow_pulsar.client.protocol.receipts import SendReceipt
from airflow_pulsar.client.protocol.wire import PlainMetadata, SendEncoder, encode_ack

_RECV_SIZE = 256 * 1024
_ACK_IDS = 1000
_ACK_DELAY = 0.1


class BareConnection:
    """One connection: commands out, frames in, requests answered in order."""

    def __init__(self, service_url: str):
        host, _, port = service_url.removeprefix("pulsar://").rpartition(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.send(BaseCommand.CONNECT, client_version="bare", protocol_version=PROTOCOL_VERSION)
        self.expect(BaseCommand.CONNECTED)

    def send(self, command_type: int, **fields: object) -> None:
        """Write one simple command."""
        self.sock.sendall(encode_command(commands.make(command_type, **fields)))

    def expect(self, command_type: int) -> BaseCommand:
        """Read frames until one of ``command_type``; any other answer to a request is an error."""
        while True:
            for frame in self.decoder.feed(self.sock.recv(_RECV_SIZE)):
                if frame.command.type == command_type:
                    return frame.command
                if frame.command.type == BaseCommand.ERROR:
                    raise RuntimeError(f"the broker refused: {frame.command.error}")

    def look_up(self, topic: str) -> None:
        """Have the broker load ``topic``'s namespace bundle (Pulsar serves a topic only after a
        lookup); a one-broker setup answers with itself, anything else is not for a bare client."""
        self.send(BaseCommand.LOOKUP, topic=topic, request_id=0)
        answer = self.expect(BaseCommand.LOOKUP_RESPONSE).lookupTopicResponse
        if answer.response != CommandLookupTopicResponse.Connect:
            raise RuntimeError(f"lookup of {topic} did not answer Connect: {answer}")

    def frames(self) -> list[object]:
        """The frames of the next read, MESSAGEs and receipts as the fast decoder gives them; PINGs answered."""
        data = self.sock.recv(_RECV_SIZE)
        if not data:
            raise ConnectionError("the broker closed the connection")
        frames = self.decoder.feed_messages(data)
        for frame in frames:
            if type(frame) not in (MessageFrame, SendReceipt) and frame.command.type == BaseCommand.PING:  # type: ignore[union-attr]
                self.send(BaseCommand.PONG)
        return frames

    def close(self) -> None:
        self.sock.close()


class BareConsumer:
    """An exclusive subscription from the earliest position, with one connection of its own."""

    def __init__(self, service_url: str, topic: str, subscription: str, receiver_queue_size: int = 1000):
        self.connection = BareConnection(service_url)
        self.connection.look_up(topic)
        self.connection.send(BaseCommand.SUBSCRIBE, topic=topic, subscription=subscription, subType=CommandSubscribe.Exclusive,
                             consumer_id=1, request_id=1, initialPosition=CommandSubscribe.Earliest)
        self.connection.expect(BaseCommand.SUCCESS)
        self.receiver_queue_size = receiver_queue_size

    def consume(self, messages: int, build: bool = False, batched: bool = False) -> None:
        """Receive and acknowledge ``messages``, permits returned half a receiver queue at a time;
        with ``build``, each one made into the Message a ``receive()`` returns (see :func:`message_of`).
        With ``batched``, each entry is a batch: its messages counted (or built, see
        :func:`messages_of`), the entry acknowledged whole."""
        connection = self.connection
        connection.send(BaseCommand.FLOW, consumer_id=1, messagePermits=self.receiver_queue_size)
        half = self.receiver_queue_size // 2
        received = permitted = pending = 0
        acks: defaultdict[int, list[int]] = defaultdict(list)
        acked_at = time.monotonic()
        while received < messages:
            for frame in connection.frames():
                if type(frame) is MessageFrame:
                    if batched:
                        count = len(messages_of(frame)) if build else entry_metadata(frame.entry)[0].num_messages_in_batch
                        acks[frame.ledger_id].append(frame.entry_id)
                    else:
                        position = message_of(frame).delivery if build else frame
                        acks[position.ledger_id].append(position.entry_id)
                        count = 1
                    received += count
                    pending += 1
            if received - permitted >= half:
                returned = (received - permitted) // half * half
                connection.send(BaseCommand.FLOW, consumer_id=1, messagePermits=returned)
                permitted += returned
            if pending and (received >= messages or pending >= _ACK_IDS or time.monotonic() - acked_at >= _ACK_DELAY):
                connection.sock.sendall(encode_command(encode_ack(1, CommandAck.Individual, acks)))
                acks, pending, acked_at = defaultdict(list), 0, time.monotonic()

    def close(self) -> None:
        self.connection.close()


def message_of(frame: MessageFrame) -> Message:
    """The least a client's ``receive()`` does for an unbatched entry: its metadata parsed, the
    Delivery and the Message that carry it (the consumer's own fast path, without its checks for
    batches, compression, encryption, chunks and duplicates)."""
    metadata, payload_at = entry_metadata(frame.entry)
    delivery = Delivery(None, 0, frame.ledger_id, frame.entry_id, -1, 0, metadata, "", frame.redelivery_count)
    return Message(delivery, -1, frame.entry[payload_at:], None)


def messages_of(frame: MessageFrame) -> list[Message]:
    """The least a client's ``receive()`` does for an uncompressed batch: its metadata parsed, one
    Delivery, and a Message for each message of it."""
    metadata, payload_at = entry_metadata(frame.entry)
    count = metadata.num_messages_in_batch
    delivery = Delivery(None, 0, frame.ledger_id, frame.entry_id, -1, count, metadata, "", frame.redelivery_count)
    return read_batch(frame.entry[payload_at:], count, Message, delivery)


class BareProducer:
    """A producer with one connection of its own."""

    def __init__(self, service_url: str, topic: str, max_pending_messages: int = 5000):
        self.connection = BareConnection(service_url)
        self.connection.look_up(topic)
        name = f"bare-{time.time_ns()}"
        self.connection.send(BaseCommand.PRODUCER, topic=topic, producer_id=1, request_id=1, producer_name=name)
        self.connection.expect(BaseCommand.PRODUCER_SUCCESS)
        self.send, self.metadata = SendEncoder(1), PlainMetadata(name)
        self.max_pending_messages = max_pending_messages

    def produce(self, messages: int, payload: bytes) -> None:
        """Publish ``messages`` unbatched, as many as the window of pending receipts allows in each
        write, and wait for every receipt."""
        sent = receipts = 0
        while receipts < messages:
            window = min(messages, receipts + self.max_pending_messages)
            if sent < window:
                now = int(time.time() * 1000)
                frames = []
                for sequence_id in range(sent, window):
                    entry = encode_entry(self.metadata.encode(sequence_id, now), payload)
                    frames.append(encode_payload_command(self.send.encode(sequence_id), entry))
                self.connection.sock.sendall(b"".join(frames))
                sent = window
            for frame in self.connection.frames():
                if type(frame) is SendReceipt:
                    receipts += 1
                elif type(frame) is not MessageFrame and frame.command.type == BaseCommand.SEND_ERROR:  # type: ignore[attr-defined]
                    raise RuntimeError(f"the broker failed a send: {frame.command.send_error.message}")  # type: ignore[attr-defined]

    def close(self) -> None:
        self.connection.close()
