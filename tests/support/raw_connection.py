"""A hand-driven connection to the broker's binary port, for tests that send what no client would."""

from __future__ import annotations

import socket
from typing import Any

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.frames import FrameDecoder, encode_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand

T = BaseCommand.Type


class RawConnection:
    """A hand-driven TCP connection to the broker's binary port."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
        self.decoder = FrameDecoder(verify_checksum=False)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, command_type: int, reply_type: int, **fields: Any) -> BaseCommand:
        """Send a command and return the first reply of ``reply_type``."""
        self.send(encode_command(commands.make(command_type, **fields)))
        return self.reply(reply_type)

    def reply(self, reply_type: int) -> BaseCommand:
        """Read until a reply of ``reply_type`` comes (an ERROR on the way fails)."""
        while True:
            data = self.sock.recv(65536)
            assert data, f"connection closed while waiting for {commands.type_name(reply_type)}"
            for frame in self.decoder.feed(data):
                if frame.command.type == reply_type:
                    return frame.command
                assert frame.command.type != T.ERROR, frame.command

    def replies_until(self, reply_type: int) -> list[BaseCommand]:
        """The commands read up to and including the first of ``reply_type``, in order."""
        seen: list[BaseCommand] = []
        while True:
            data = self.sock.recv(65536)
            assert data, f"connection closed while waiting for {commands.type_name(reply_type)} after {seen}"
            for frame in self.decoder.feed(data):
                seen.append(frame.command)
                if frame.command.type == reply_type:
                    return seen

    def handshake(self) -> None:
        self.request(T.CONNECT, T.CONNECTED, client_version="interop-raw", protocol_version=20)

    def assert_closed_by_broker(self) -> None:
        """Read (any ERROR the broker sends first included) until the broker closes the socket."""
        try:
            while self.sock.recv(65536):
                pass
        except ConnectionResetError:
            pass  # closed with unread data on our side: still closed by the broker
        except TimeoutError:
            raise AssertionError("the broker kept the connection open") from None

    def close(self) -> None:
        self.sock.close()
