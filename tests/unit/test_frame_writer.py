"""The connection's frame writer over a real socket pair: order, who writes, how frames gather, failure, close."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from airflow_pulsar.client.frame_writer import FrameWriter

FRAME = struct.Struct(">II")  # a stand-in frame: (sender, number)


class RecordingStream:
    """A socket's sending end that notes each write: the thread that made it and how many frames it held.

    With ``hold_writer_thread`` the first write made by the writer thread waits until ``release`` is set,
    as a write to a full socket would.
    """

    def __init__(self, sock: socket.socket, hold_writer_thread: bool = False) -> None:
        self.sock = sock
        self.writes: list[tuple[str, int]] = []
        self.holding = threading.Event()
        self.release = threading.Event()
        self._hold = hold_writer_thread

    def sendall(self, data: bytes, /) -> None:
        thread = threading.current_thread().name
        if self._hold and thread == "test-writer":
            self._hold = False
            self.holding.set()
            assert self.release.wait(5)
        self.writes.append((thread, len(data) // FRAME.size))
        self.sock.sendall(data)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, peer = socket.socketpair()
    peer.settimeout(5)
    yield ours, peer
    ours.close()
    peer.close()


def received(peer: socket.socket, count: int) -> list[tuple[int, int]]:
    """The next ``count`` frames the peer reads."""
    data = b""
    while len(data) < count * FRAME.size:
        data += peer.recv(65536)
    return [FRAME.unpack_from(data, offset) for offset in range(0, len(data), FRAME.size)]


def writer_for(stream: RecordingStream, **tuning: float) -> FrameWriter:
    return FrameWriter(stream, "test-writer", lambda error: None, **tuning)


def test_a_lone_frame_is_due_and_its_sender_writes_it(pair: tuple[socket.socket, socket.socket]) -> None:
    stream = RecordingStream(pair[0])
    writer = writer_for(stream)
    assert writer.send(FRAME.pack(0, 1)) and writer.due
    writer.write_due()
    assert received(pair[1], 1) == [(0, 1)]
    assert stream.writes == [(threading.current_thread().name, 1)] and not writer.due
    writer.close()


def test_a_burst_after_a_write_gathers_for_the_writer_thread(pair: tuple[socket.socket, socket.socket]) -> None:
    stream = RecordingStream(pair[0])
    writer = writer_for(stream, burst_gap=60.0, max_gather=60.0)  # every frame after a write is part of a burst
    writer.send(FRAME.pack(0, 0))
    writer.write_now()
    for number in range(1, 201):
        writer.send(FRAME.pack(0, number))
        writer.write_due()  # as a producer does after each send: nothing is due
    assert received(pair[1], 201) == [(0, number) for number in range(201)]
    later = stream.writes[1:]
    assert {thread for thread, _ in later} == {"test-writer"} and len(later) <= 5, later
    writer.close()


def test_a_gathering_older_than_max_gather_is_due_to_its_sender(pair: tuple[socket.socket, socket.socket]) -> None:
    stream = RecordingStream(pair[0], hold_writer_thread=True)
    writer = writer_for(stream, burst_gap=60.0, max_gather=0.0)
    writer.send(FRAME.pack(0, 0))
    writer.write_now()
    writer.send(FRAME.pack(0, 1))  # follows a write: the thread takes it, and its write hangs
    assert stream.holding.wait(5)
    writer.send(FRAME.pack(0, 2))
    assert not writer.due, "one frame starts a gathering"
    writer.send(FRAME.pack(0, 3))
    assert writer.due, "the gathering waited max_gather"
    threading.Timer(0.1, stream.release.set).start()
    writer.write_due()  # waits for the write under way; then both leave in one write (this thread's or the writer's)
    assert received(pair[1], 4) == [(0, number) for number in range(4)]
    assert stream.writes[:2] == [(threading.current_thread().name, 1), ("test-writer", 1)]
    assert [count for _, count in stream.writes[2:]] == [2]
    writer.close()


def test_frames_keep_each_senders_order(pair: tuple[socket.socket, socket.socket]) -> None:
    writer = writer_for(RecordingStream(pair[0]))

    def sender(index: int) -> None:
        for number in range(500):
            writer.send(FRAME.pack(index, number))
            writer.write_due()

    threads = [threading.Thread(target=sender, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.write_now()
    frames = received(pair[1], 2000)
    for index in range(4):
        assert [number for who, number in frames if who == index] == list(range(500))
    writer.close()


def test_a_failed_write_is_reported_once_and_later_frames_are_refused(pair: tuple[socket.socket, socket.socket]) -> None:
    failures: list[OSError] = []
    writer = FrameWriter(RecordingStream(pair[0]), "test-writer", failures.append)
    pair[0].close()
    assert writer.send(FRAME.pack(0, 0))
    writer.write_now()
    assert len(failures) == 1
    assert not writer.send(FRAME.pack(0, 1))
    writer.write_now()
    assert len(failures) == 1
    writer.close()


def test_close_drops_what_is_queued_and_stops_the_thread(pair: tuple[socket.socket, socket.socket]) -> None:
    writer = FrameWriter(RecordingStream(pair[0]), "test-writer-closing", lambda error: None)
    writer.close()
    assert not writer.send(FRAME.pack(0, 0))
    deadline = time.monotonic() + 5
    while any(thread.name == "test-writer-closing" for thread in threading.enumerate()):
        assert time.monotonic() < deadline, "the writer thread did not stop"
        time.sleep(0.01)
