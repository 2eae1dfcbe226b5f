"""The writing side of one connection: frames leave in the order they were queued, many per write.

A write to a socket costs a system call, and on loopback the receiving side's work too, whatever
its size; one write per frame made ``sendall`` the largest cost of sending small messages. So the
frames of a burst are gathered and leave in one write, the way the C++ and Go clients gather what
is queued while a write is in flight, and a lone frame still leaves at once:

- A frame queued when nothing was written for :data:`BURST_GAP` is *due*: its sender writes it
  right after (:meth:`FrameWriter.write_due`), as when every caller wrote its own frames.
- A frame that follows a write closer than that starts a gathering: the writer thread is woken
  to take everything queued in one write, while the sender goes on producing frames. The thread
  needs the GIL, which a sender busy in Python holds for up to the interpreter's switch interval
  (5 ms); so a gathering becomes due once its first frame has waited :data:`MAX_GATHER`, and the
  sender that finds it so writes it.
- A caller about to wait for an answer (a sync send, a flush, a request) writes what is queued
  itself (:meth:`FrameWriter.write_now`).

Whoever writes (the thread or a sender) holds the write lock through the write, so one write runs
at a time and frames keep their order. A sender that finds the thread writing blocks on that lock,
which hands the thread the GIL it needs to finish, rather than leaving it waiting a switch interval.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)

__all__ = ["BURST_GAP", "MAX_GATHER", "FrameWriter", "Stream"]

# A frame queued this soon after the last write belongs to a burst and is gathered (seconds).
BURST_GAP = 0.00005
# The longest the first frame of a gathering waits before its sender writes it (seconds).
MAX_GATHER = 0.0005


class Stream(Protocol):
    """What the writer needs of a socket (or a TLS stream over one)."""

    def sendall(self, data: bytes, /) -> None: ...


class FrameWriter:
    """Writes one connection's frames in order; ``failed(error)`` is called once when a write fails.

    After a failure, or :meth:`close`, frames are dropped and :meth:`send` returns False.
    ``burst_gap`` and ``max_gather`` are :data:`BURST_GAP` and :data:`MAX_GATHER` unless given.
    """

    __slots__ = (
        "due", "_stream", "_failed", "_burst_gap", "_max_gather", "_lock", "_write_lock", "_frames", "_signaled",
        "_first_queued", "_last_write", "_wake", "_closed", "_thread",
    )

    def __init__(
        self, stream: Stream, name: str, failed: Callable[[OSError], None], burst_gap: float = BURST_GAP, max_gather: float = MAX_GATHER
    ):
        self._stream = stream
        self._failed = failed
        self._burst_gap = burst_gap
        self._max_gather = max_gather
        self._lock = threading.Lock()  # the queue and the marks below
        self._write_lock = threading.Lock()  # held through a write, taken before the queue's lock
        self._frames: list[bytes] = []
        # Whether the queued frames are for their sender to write now (read without the lock:
        # a stale read only delays them to the next check or to the thread).
        self.due = False
        self._signaled = False  # the thread was woken and has not looked at the queue yet
        self._first_queued = 0.0  # when the first frame still queued was queued
        self._last_write = 0.0  # when the last write ended
        # Released once per wake-up; the thread blocks acquiring it.
        self._wake = threading.Lock()
        self._wake.acquire()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def send(self, data: bytes) -> bool:
        """Queue frames; False once the writer is closed.

        It never blocks on the socket, so it may be called under the caller's own locks (frames
        queued under one lock keep that lock's order); the caller then calls :meth:`write_due`,
        or :meth:`write_now`, once it holds none.
        """
        lock = self._lock
        lock.acquire()  # cheaper than ``with``: every frame comes through here
        if self._closed:
            lock.release()
            return False
        frames = self._frames
        frames.append(data)
        now = time.monotonic()
        wake = False
        if len(frames) == 1:
            self._first_queued = now
            if now - self._last_write >= self._burst_gap:
                self.due = True
            elif not self._signaled:
                self._signaled = wake = True
        elif now - self._first_queued >= self._max_gather:
            self.due = True
        lock.release()
        if wake:
            self._wake.release()
        return True

    def write_due(self) -> None:
        """Write the queued frames on this thread if they are due (see the module's description)."""
        if self.due:
            self.write_now()

    def write_now(self) -> None:
        """Write what is queued on this thread (after the write under way, if any).

        Call it outside any lock of the caller's.
        """
        with self._write_lock:
            self._write_queued()

    def _write_queued(self) -> None:
        # Under the write lock.
        lock = self._lock
        with lock:
            frames, self._frames = self._frames, []
            self.due = False
        if not frames or self._closed:
            return
        try:
            self._stream.sendall(frames[0] if len(frames) == 1 else b"".join(frames))
        except OSError as exc:
            with lock:
                self._closed = True
                self._frames = []
            self._failed(exc)
            return
        with lock:
            self._last_write = time.monotonic()

    @property
    def thread(self) -> threading.Thread:
        """The thread that writes gathered bursts; it ends once the writer is closed."""
        return self._thread

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
            with lock:
                self._signaled = False
            while self._frames and not self._closed:
                with self._write_lock:
                    self._write_queued()
            if self._closed:
                return
