"""A bare binary-protocol session for the schema registry tests: the commands no client API sends
as such (GET_SCHEMA without a version, GET_OR_CREATE_SCHEMA, a PRODUCER or SUBSCRIBE carrying any
schema), sent as they are and answered with the broker's response body."""

from __future__ import annotations

import socket
import struct
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.commands import PROTOCOL_VERSION
from airflow_pulsar.client.protocol.frames import FrameDecoder, encode_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, CommandSubscribe, Schema

T = BaseCommand
# The responses a request is answered with, its error (ERROR) aside.
_ANSWERS = {
    T.GET_SCHEMA: T.GET_SCHEMA_RESPONSE,
    T.GET_OR_CREATE_SCHEMA: T.GET_OR_CREATE_SCHEMA_RESPONSE,
    T.PRODUCER: T.PRODUCER_SUCCESS,
    T.SUBSCRIBE: T.SUCCESS,
    T.CLOSE_PRODUCER: T.SUCCESS,
    T.CLOSE_CONSUMER: T.SUCCESS,
    T.LOOKUP: T.LOOKUP_RESPONSE,
}


def version_bytes(version: int) -> bytes:
    """A schema version as Pulsar puts it on the wire: 8 bytes, a big-endian long."""
    return struct.pack(">q", version)


def wire_schema(schema_type: int, data: bytes | str = b"", name: str = "", properties: dict[str, str] | None = None) -> Schema:
    """A ``Schema`` field of a PRODUCER, SUBSCRIBE or GET_OR_CREATE_SCHEMA command."""
    schema = Schema(name=name, schema_data=data.encode() if isinstance(data, str) else data, type=schema_type)
    for key, value in sorted((properties or {}).items()):
        schema.properties.add(key=key, value=value)
    return schema


class WireSession:
    """One connection speaking the binary protocol command by command."""

    def __init__(self, service_url: str):
        url = urlsplit(service_url)
        self._sock = socket.create_connection((url.hostname, url.port), timeout=30)
        self._decoder = FrameDecoder()
        self._ids = 0
        self.call(T.CONNECT, T.CONNECTED, client_version="schema-wire", protocol_version=PROTOCOL_VERSION)

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def call(self, command_type: int, answer: int | None = None, **fields: Any) -> tuple[int, Any]:
        """Send a command; (response type, response body) of its answer, ERROR included."""
        if command_type != T.CONNECT:
            fields.setdefault("request_id", self._next_id())
        self._sock.sendall(encode_command(commands.make(command_type, **fields)))
        expected = {answer or _ANSWERS[command_type], T.ERROR}
        while True:
            data = self._sock.recv(65536)
            if not data:
                raise ConnectionError("the broker closed the connection")
            for frame in self._decoder.feed(data):
                kind = frame.command.type
                if kind == T.PING:
                    self._sock.sendall(encode_command(commands.make(T.PONG)))
                elif kind in expected:
                    return kind, commands.body(frame.command)

    def get_schema(self, topic: str, version: int | None = None) -> Any:
        """GET_SCHEMA (the latest version without ``version``): the response body."""
        fields: dict[str, Any] = {"topic": topic}
        if version is not None:
            fields["schema_version"] = version_bytes(version)
        return self.call(T.GET_SCHEMA, **fields)[1]

    def get_or_create_schema(self, topic: str, schema: Schema) -> Any:
        """GET_OR_CREATE_SCHEMA: the response body."""
        return self.call(T.GET_OR_CREATE_SCHEMA, topic=topic, schema=schema)[1]

    def producer(self, topic: str, schema: Schema | None = None) -> tuple[int, Any]:
        """PRODUCER (closed again once answered with success): (response type, body)."""
        self.call(T.LOOKUP, topic=topic, authoritative=False)  # Pulsar serves a topic once it was looked up
        producer_id = self._next_id()
        kind, body = self.call(T.PRODUCER, topic=topic, producer_id=producer_id, schema=schema)
        if kind == T.PRODUCER_SUCCESS:
            self.call(T.CLOSE_PRODUCER, producer_id=producer_id)
        return kind, body

    def subscribe(self, topic: str, subscription: str, schema: Schema | None = None) -> tuple[int, Any]:
        """SUBSCRIBE (Exclusive, closed again once answered with success): (response type, body)."""
        self.call(T.LOOKUP, topic=topic, authoritative=False)
        consumer_id = self._next_id()
        kind, body = self.call(
            T.SUBSCRIBE, topic=topic, subscription=subscription, subType=CommandSubscribe.Exclusive,
            consumer_id=consumer_id, schema=schema,
        )
        if kind == T.SUCCESS:
            self.call(T.CLOSE_CONSUMER, consumer_id=consumer_id)
        return kind, body

    def close(self) -> None:
        """Close the connection."""
        self._sock.close()

    def __enter__(self) -> WireSession:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
