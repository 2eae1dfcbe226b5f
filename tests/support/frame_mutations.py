"""Seeded generators of hostile Pulsar frames for the fuzz tests.

Two families:

- *well-formed nonsense* (:meth:`FrameFuzzer.nonsense_frame`): frames that decode, of every command
  the broker serves after CONNECT, with every field filled at random (required ones always, the
  others half the time): unknown ids, absurd counts and sizes, invalid topic names, random message
  ids, random batch metadata. The broker must answer or ignore each one and keep the connection.
- *malformed frames* (:meth:`FrameFuzzer.malformed_frame`): structural mutations of valid frames:
  bit flips, truncations, wrong total or command sizes, wrong CRCs, random protobuf bodies,
  unsupported or out-of-place commands, huge size prefixes, a valid frame then garbage. The broker
  may close the connection (with an ERROR first when it can say why), and nothing else.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.checksum import crc32c
from airflow_pulsar.client.protocol.frames import encode_command, encode_entry, encode_payload_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, MessageMetadata

T = BaseCommand.Type
F = FieldDescriptor

# Commands the broker serves once connected (SEND is built as a payload frame).
SERVED = (
    T.PING,
    T.PONG,
    T.LOOKUP,
    T.PARTITIONED_METADATA,
    T.PRODUCER,
    T.CLOSE_PRODUCER,
    T.SUBSCRIBE,
    T.FLOW,
    T.ACK,
    T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
    T.SEEK,
    T.GET_LAST_MESSAGE_ID,
    T.CONSUMER_STATS,
    T.UNSUBSCRIBE,
    T.CLOSE_CONSUMER,
    T.GET_TOPICS_OF_NAMESPACE,
    T.GET_SCHEMA,
    T.SEND,
)
INVALID_TOPICS = (
    "",
    "persistent://",
    "persistent://public",
    "persistent://public/default",
    "persistent://public/default/",
    "bogus://public/default/x",
    "persistent://public/default/a/b/c/d",
    "persistent://pub lic/default/x",
    "persistent://public/def:ault/x",
    "non-persistent://public/default/fuzz",
    "persistent://public/default/fuzz-partition-x",
    "/" * 40,
)
_RANGES = {
    F.TYPE_INT32: (-(2**31), 2**31 - 1),
    F.TYPE_SINT32: (-(2**31), 2**31 - 1),
    F.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    F.TYPE_INT64: (-(2**63), 2**63 - 1),
    F.TYPE_SINT64: (-(2**63), 2**63 - 1),
    F.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    F.TYPE_UINT32: (0, 2**32 - 1),
    F.TYPE_FIXED32: (0, 2**32 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1),
    F.TYPE_FIXED64: (0, 2**64 - 1),
}
# Fields naming things that exist on the broker: mostly small values, so they hit real entities.
_SMALL_IDS = {"consumer_id", "producer_id", "ledgerId", "entryId", "partition", "batch_index", "batch_size"}


class FrameFuzzer:
    """Random frames from one seed, against a small pool of topics and subscriptions."""

    def __init__(self, seed: int, topics: list[str], subscriptions: list[str]):
        self.rng = random.Random(seed)
        self.topics = topics
        self.subscriptions = subscriptions
        self._valid = [self.nonsense_frame() for _ in range(64)]
        self._mutations: list[tuple[str, Callable[[], bytes]]] = [
            ("bit flips", self._bit_flips),
            ("truncated", self._truncated),
            ("wrong total size", self._wrong_total_size),
            ("wrong command size", self._wrong_command_size),
            ("wrong CRC", self._wrong_crc),
            ("random protobuf body", self._random_body),
            ("unsupported command", self._unsupported_command),
            ("second CONNECT", self._second_connect),
            ("SEND without payload", self._send_without_payload),
            ("bad payload section", self._bad_payload_section),
            ("huge size prefix", self._huge_size),
            ("valid frame then garbage", self._valid_then_garbage),
            ("random bytes", self._random_bytes),
        ]

    # ---- well-formed nonsense ----

    def nonsense_frame(self) -> bytes:
        """A frame that decodes: a served command with random fields (SEND with a correct CRC)."""
        kind = self.rng.choice(SERVED)
        command = BaseCommand(type=kind)
        body = getattr(command, commands.field_name(kind))
        self._fill(body, body.DESCRIPTOR, depth=0)
        if kind != T.SEND:
            return encode_command(command)
        metadata = MessageMetadata()
        self._fill(metadata, MessageMetadata.DESCRIPTOR, depth=1)
        entry = encode_entry(metadata, self.rng.randbytes(self.rng.randrange(0, 64)))
        return encode_payload_command(command, entry)

    def _fill(self, message: object, descriptor: Descriptor, depth: int) -> None:
        rng = self.rng
        for field in descriptor.fields:
            required = field.label == F.LABEL_REQUIRED
            if not required and (depth > 2 or rng.random() < 0.5):
                continue
            if field.label == F.LABEL_REPEATED:
                target = getattr(message, field.name)
                for _ in range(rng.randrange(0, 4)):
                    if field.type == F.TYPE_MESSAGE:
                        self._fill(target.add(), field.message_type, depth + 1)
                    else:
                        target.append(self._scalar(field))
            elif field.type == F.TYPE_MESSAGE:
                child = getattr(message, field.name)
                child.SetInParent()
                self._fill(child, field.message_type, depth + 1)
            else:
                setattr(message, field.name, self._scalar(field))

    def _scalar(self, field: FieldDescriptor) -> object:
        rng = self.rng
        kind = field.type
        if kind == F.TYPE_BOOL:
            return rng.random() < 0.5
        if kind == F.TYPE_ENUM:
            return rng.choice(field.enum_type.values).number
        if kind == F.TYPE_STRING:
            return self._text(field.name)
        if kind == F.TYPE_BYTES:
            return rng.randbytes(rng.randrange(0, 24))
        if kind in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
            return rng.choice([0.0, -1.0, 1e300 if kind == F.TYPE_DOUBLE else 1e30, rng.random()])
        low, high = _RANGES[kind]
        roll = rng.random()
        if field.name in _SMALL_IDS and roll < 0.7:
            return rng.randrange(0, 8) if low == 0 or rng.random() < 0.9 else -1
        if roll < 0.4:
            return rng.choice([low, high, 0, 1, max(low, -1)])
        return rng.randint(low, high)

    def _text(self, name: str) -> str:
        rng = self.rng
        roll = rng.random()
        if name == "topic":
            return rng.choice(self.topics) if roll < 0.7 else rng.choice(INVALID_TOPICS)
        if name == "subscription":
            return rng.choice(self.subscriptions) if roll < 0.9 else ""
        if name == "namespace":
            return rng.choice(["public/default", "public", "", "a/b/c", "\x00"])
        return "".join(chr(rng.randrange(32, 0x2FF)) for _ in range(rng.randrange(0, 12)))

    # ---- malformed frames ----

    def malformed_frame(self) -> tuple[str, bytes]:
        """(mutation name, frame bytes) of one random structural mutation."""
        name, make = self.rng.choice(self._mutations)
        return name, make()

    def _a_valid_frame(self) -> bytes:
        return self.rng.choice(self._valid)

    def _bit_flips(self) -> bytes:
        frame = bytearray(self._a_valid_frame())
        for _ in range(self.rng.randrange(1, 9)):
            frame[self.rng.randrange(len(frame))] ^= 1 << self.rng.randrange(8)
        return bytes(frame)

    def _truncated(self) -> bytes:
        frame = self._a_valid_frame()
        return frame[: self.rng.randrange(1, len(frame))]

    def _wrong_total_size(self) -> bytes:
        frame = self._a_valid_frame()
        (total,) = struct.unpack_from(">I", frame)
        wrong = self.rng.choice([0, 1, 3, total - 1, total + 1, total * 2, 0x7FFFFFFF, 0xFFFFFFFF])
        return struct.pack(">I", wrong & 0xFFFFFFFF) + frame[4:]

    def _wrong_command_size(self) -> bytes:
        frame = self._a_valid_frame()
        (total, size) = struct.unpack_from(">II", frame)
        wrong = self.rng.choice([0, size - 1, size + 1, total, total - 3, 0xFFFFFFFF])
        return frame[:4] + struct.pack(">I", wrong & 0xFFFFFFFF) + frame[8:]

    def _wrong_crc(self) -> bytes:
        metadata = MessageMetadata(producer_name="fuzz", sequence_id=self.rng.randrange(1 << 20), publish_time=1)
        entry = encode_entry(metadata, self.rng.randbytes(32))
        send = commands.make(T.SEND, producer_id=self.rng.randrange(4), sequence_id=metadata.sequence_id)
        return encode_payload_command(send, entry, crc32c(entry) ^ (1 << self.rng.randrange(32)))

    def _random_body(self) -> bytes:
        body = self.rng.randbytes(self.rng.randrange(1, 64))
        return struct.pack(">II", len(body) + 4, len(body)) + body

    def _unsupported_command(self) -> bytes:
        # Commands only a broker sends, and AUTH_RESPONSE to a broker without authentication.
        kind = self.rng.choice(
            [T.CONNECTED, T.SEND_RECEIPT, T.MESSAGE, T.SUCCESS, T.ERROR, T.AUTH_RESPONSE, T.PRODUCER_SUCCESS, T.LOOKUP_RESPONSE]
        )
        command = BaseCommand(type=kind)
        body = getattr(command, commands.field_name(kind))
        self._fill(body, body.DESCRIPTOR, depth=2)
        return encode_command(command)

    def _second_connect(self) -> bytes:
        return encode_command(commands.make(T.CONNECT, client_version="fuzz", protocol_version=self.rng.randrange(0, 30)))

    def _send_without_payload(self) -> bytes:
        return encode_command(commands.make(T.SEND, producer_id=self.rng.randrange(4), sequence_id=1))

    def _bad_payload_section(self) -> bytes:
        command = commands.make(T.SEND, producer_id=0, sequence_id=self.rng.randrange(1 << 20))
        body = command.SerializeToString()
        tail = self.rng.choice(
            [
                b"\x0e\x01",  # too short for a checksum
                b"\x0e\x03" + b"\x00" * 12,  # wrong magic
                b"\x0e\x02\xff\xff\xff\xff" + b"\x00" * 12,  # broker entry metadata past the end
                b"\x0e\x01" + struct.pack(">I", crc32c(b"\xff\xff\xff\xff")) + b"\xff\xff\xff\xff",  # metadata size past the end
            ]
        )
        return struct.pack(">II", 4 + len(body) + len(tail), len(body)) + body + tail

    def _huge_size(self) -> bytes:
        return struct.pack(">I", self.rng.randrange(64 << 20, 1 << 32)) + self.rng.randbytes(16)

    def _valid_then_garbage(self) -> bytes:
        return self._a_valid_frame() + self._random_bytes()

    def _random_bytes(self) -> bytes:
        return self.rng.randbytes(self.rng.randrange(8, 128))
