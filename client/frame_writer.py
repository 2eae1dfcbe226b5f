"""The writing side of one connection: frames leave in the order they were queued, many per write.

A write to a socket costs a system call, and on loopback the receiving side's work too, whatever
its size; one write per frame made ``sendall`` the largest cost of sending small messages. Here
callers only queue their frames, and a writer thread takes everything queued in one write, while
callers go on producing the next frames: the way the C++ and Go clients gather the writes of a
burst. A caller that waits for an answer right after (a sync send, a request) calls
:meth:`FrameWriter.write_now`, which writes what is queued on its own thread when nobody is writing,
so a lone frame leaves as soon as it did when every caller wrote its own.

The writer thread needs the GIL to take the queue; a caller busy in Python holds it for up to the
interpreter's switch interval, and meanwhile its frames gather. Whoever writes (the thread or a
caller in :meth:`FrameWriter.write_now`) holds the *writing* mark, so one write runs at a time and
frames keep their order.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)

__all__ = ["FrameWriter", "Stream"]


class Stream(Protocol):
    """What the writer needs of a socket (or a TLS stream over one)."""

    def sendall(self, data: bytes, /) -> None: ...


class FrameWriter:
    """Writes one connection's frames in order; ``failed(error)`` is called once when a write fails.

    After a failure, or :meth:`close`, frames are dropped and :meth:`send` returns False.
    """

    __slots__ = ("_stream", "_failed", "_lock", "_frames", "_writing", "_signaled", "_wake", "_closed", "_thread")

    def __init__(self, stream: Stream, name: str, failed: Callable[[OSError], None]):
        self._stream = stream
        self._failed = failed
        self._lock = threading.Lock()
        self._frames: list[bytes] = []
        self._writing = False  # a write is under way (by the thread or by write_now)
        self._signaled = False  # the thread was woken and has not looked at the queue yet
        # Released once per wake-up; the thread blocks acquiring it.
        self._wake = threading.Lock()
        self._wake.acquire()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def send(self, data: bytes, gather: bool = True) -> bool:
        """Queue frames; False once the writer is closed.

        ``gather`` leaves them to the writer thread; False leaves them to the caller, who must
        call :meth:`write_now` next (a sync send saves waking the thread). It never blocks on the
        socket, so it may be called under the caller's own locks: frames queued under one lock
        keep that lock's order.
        """
        lock = self._lock
        lock.acquire()  # cheaper than ``with``: every frame comes through here
        if self._closed:
            lock.release()
            return False
        self._frames.append(data)
        wake = gather and not self._writing and not self._signaled
        if wake:
            self._signaled = True
        lock.release()
        if wake:
            self._wake.release()
        return True

    def write_now(self) -> None:
        """Write what is queued on this thread, unless a write is under way (it then takes the rest).

        For a caller about to wait for an answer: call it outside any lock of the caller's.
        """
        lock = self._lock
        with lock:
            if self._writing or not self._frames or self._closed:
                return
            frames, self._frames = self._frames, []
            self._writing = True
        self._write(frames)
        with lock:
            self._writing = False
            wake = bool(self._frames) and not self._signaled and not self._closed
            if wake:
                self._signaled = True
        if wake:
            self._wake.release()

    def close(self) -> None:
        """Drop what is queued and stop the thread (the connection is closing)."""
        with self._lock:
            self._closed = True
            self._frames = []
            wake = not self._signaled
            self._signaled = True
        if wake:
            self._wake.release()

    def _run(self) -> None:
        lock = self._lock
        while True:
            self._wake.acquire()
            lock.acquire()
            self._signaled = False
            while not self._closed and self._frames and not self._writing:
                frames, self._frames = self._frames, []
                self._writing = True
                lock.release()
                self._write(frames)
                lock.acquire()
                self._writing = False
            closed = self._closed
            lock.release()
            if closed:
                return

    def _write(self, frames: list[bytes]) -> None:
        try:
            self._stream.sendall(frames[0] if len(frames) == 1 else b"".join(frames))
        except OSError as exc:
            with self._lock:
                self._closed = True
                self._frames = []
            self._failed(exc)
