"""The receiver queue between the connections' reader threads and the application.

The connection's reader thread appends whole entries, still packed, to the queue: each run of
them that one read brought for one partition consumer as one item. The thread that calls
``receive`` moves everything queued to its own side in one round of the lock, unpacks a run at a
time from there (a batch into its messages) and takes messages off the front: a message costs the
shared lock only when the queue ran dry. The unpacked messages of one run wait in a plain list
read by position, so ``batch_receive`` takes them with one slice. Each
message taken is reported to its partition consumer, which gives the broker a permit back for it
(see ``permits``).

Runs carry the *epoch* of their partition consumer; bumping the epoch (on reconnect, seek or
redeliver-all) drops everything queued for it without touching the other partitions' entries.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ..protocol.frames import MessageFrame
from .message import Delivery, Message
from .unpacker import ReceivedEntry

if TYPE_CHECKING:  # the asyncio API passes its loop in; the sync client never loads asyncio
    import asyncio


class QueueOwner(Protocol):
    """What the receiver queue calls on the partition consumer whose entries it holds.

    Every call but reading ``epoch`` comes from the thread holding the take lock, one at a time.
    """

    @property
    def epoch(self) -> int:
        """Entries and messages of any other epoch are stale: dropped unread."""
        ...

    def unpack(self, item: QueuedRun) -> list[Message]:
        """The messages of a current run of entries for the application (possibly none)."""
        ...

    def unpack_entries(self, item: QueuedRun) -> list[ReceivedEntry]:
        """The entries of a current run for a bulk reader, opened but not split (possibly none)."""
        ...

    def taken(self, message: Message) -> None:
        """The application took one message."""
        ...

    def entries_taken(self, entries: list[ReceivedEntry]) -> None:
        """A bulk reader took these whole entries."""
        ...

    def taken_many(self, messages: list[Message]) -> None:
        """The application took several messages at once."""
        ...

    def stale_run(self, item: QueuedRun) -> None:
        """A queued run of entries was dropped unread."""
        ...

    def stale_messages(self, epoch: int, count: int) -> None:
        """``count`` unpacked messages (or permits of opened entries) of ``epoch`` were dropped untaken."""
        ...


class QueuedRun(NamedTuple):
    """Consecutive MESSAGEs for one partition consumer as the reader thread queued them: entries not parsed yet."""

    owner: QueueOwner
    epoch: int
    frames: list[MessageFrame]


# Builds a QueuedRun from a plain tuple without NamedTuple's generated ``__new__``.
_new_run = tuple.__new__


class ReceiverQueue:
    """Entries from one or more partition consumers, and the messages unpacked from them."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._runs: deque[QueuedRun] = deque()
        # Runs moved over from _runs, read by the thread holding the take lock only.
        self._taking: deque[QueuedRun] = deque()
        # The unpacked messages of one run; those before _ready_pos are taken.
        self._ready: list[Message] = []
        self._ready_pos = 0
        self._ready_delivery: Delivery | None = None
        self._ready_owner: QueueOwner | None = None
        # The opened entries of one run for a bulk reader (``take_entries``); those before _entries_pos are taken.
        self._entries: list[ReceivedEntry] = []
        self._entries_pos = 0
        self._entries_epoch = 0
        self._entries_owner: QueueOwner | None = None
        # Held by whoever is taking messages, so entries unpack in arrival order.
        self._take_lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._closed = False

    # ---- the reader thread's side ----

    def put_many(self, owner: QueueOwner, epoch: int, messages: list[MessageFrame]) -> None:
        """Append the entries of MESSAGEs for ``owner`` at ``epoch``, in order, as one run (called
        on a connection's reader thread, which hands the list over)."""
        run = _new_run(QueuedRun, (owner, epoch, messages))
        with self._cond:
            self._runs.append(run)
            self._cond.notify()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            loop.call_soon_threadsafe(_wake, future)

    def close(self) -> None:
        """Wake every waiting receiver; they then see the consumer closed."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            loop.call_soon_threadsafe(_wake, future)

    # ---- the application's side ----

    def take(self, timeout: float | None, before_wait: Callable[[], None] | None = None) -> Message | None:
        """The next message, waiting up to ``timeout`` seconds (None: forever); None on timeout."""
        lock = self._take_lock
        lock.acquire()  # cheaper than ``with`` on this path
        try:
            # The hot paths, spelled out: a current message is ready, or the next run is queued.
            ready, pos = self._ready, self._ready_pos
            if pos < len(ready):
                owner = self._ready_owner
                if self._ready_delivery.epoch == owner.epoch:  # type: ignore[union-attr]
                    self._ready_pos = pos + 1
                    message = ready[pos]
                    owner.taken(message)  # type: ignore[union-attr]
                    return message
            deadline = None if timeout is None else time.monotonic() + timeout
            if pos < len(ready):  # messages of an older epoch: dropped here
                self._current()
            while True:
                messages = self._unpack_next(deadline, before_wait)
                if messages is None:
                    return None
                if messages:  # fresh, hence current: the first is taken at once
                    self._ready_pos = 1
                    message = messages[0]
                    self._ready_owner.taken(message)  # type: ignore[union-attr]
                    return message
        finally:
            lock.release()

    def take_many(self, max_messages: int, max_bytes: int, timeout: float) -> list[Message]:
        """Messages until ``max_messages`` or ``max_bytes`` (limits <= 0 are off) or the timeout."""
        deadline = time.monotonic() + timeout
        taken: list[Message] = []
        size = 0
        with self._take_lock:
            while True:
                if self._current():
                    ready, pos = self._ready, self._ready_pos
                    stop = len(ready)
                    if max_messages > 0:
                        stop = min(stop, pos + max_messages - len(taken))
                    if max_bytes > 0:
                        end, stop = stop, pos
                        while stop < end and size < max_bytes:
                            size += len(ready[stop].data())
                            stop += 1
                    part = ready[pos:stop]
                    self._ready_pos = stop
                    self._ready_owner.taken_many(part)  # type: ignore[union-attr]
                    taken += part
                    if (max_messages > 0 and len(taken) >= max_messages) or (max_bytes > 0 and size >= max_bytes):
                        return taken
                if self._unpack_next(deadline, None) is None:
                    return taken

    def take_entries(
        self, max_messages: int, max_bytes: int, timeout: float, until: tuple[int, int] | None = None
    ) -> list[ReceivedEntry]:
        """Whole entries, opened but not split into messages, until they count ``max_messages``
        messages or ``max_bytes`` payload bytes (limits <= 0 are off; the entry that reaches a limit
        is taken whole) or the timeout, or through the first entry at or past the position
        ``until`` (ledger id, entry id). For consumers read only this way: messages that ``take``
        unpacked are not handed out here."""
        deadline = time.monotonic() + timeout
        taken: list[ReceivedEntry] = []
        count = size = 0
        with self._take_lock:
            if self._ready_pos < len(self._ready):
                raise RuntimeError("take_entries on a consumer whose unpacked messages are waiting to be received")
            while True:
                entries, pos, owner = self._entries, self._entries_pos, self._entries_owner
                if pos < len(entries) and self._entries_epoch != owner.epoch:  # type: ignore[union-attr]
                    owner.stale_messages(self._entries_epoch, sum(entry.message_count() for entry in entries[pos:]))  # type: ignore[union-attr]
                    pos = len(entries)
                stop, reached = pos, False
                while stop < len(entries) and (max_messages <= 0 or count < max_messages) and (max_bytes <= 0 or size < max_bytes):
                    entry = entries[stop]
                    count += entry.message_count()
                    size += len(entry.payload)
                    stop += 1
                    if until is not None and (entry.ledger_id, entry.entry_id) >= until:
                        reached = True
                        break
                self._entries_pos = stop
                if stop > pos:
                    part = entries[pos:stop]
                    owner.entries_taken(part)  # type: ignore[union-attr]
                    taken += part
                if reached or stop < len(entries):  # ``until`` or a limit was reached
                    return taken
                if (max_messages > 0 and count >= max_messages) or (max_bytes > 0 and size >= max_bytes):
                    return taken
                item = self._next_run(deadline, None)
                if item is None:
                    return taken
                self._entries, self._entries_pos = item.owner.unpack_entries(item), 0
                self._entries_epoch, self._entries_owner = item.epoch, item.owner

    def try_take_nowait(self) -> tuple[bool, Message | None]:
        """For asyncio: (False, None) if another thread is receiving, else (True, message or None)."""
        if not self._take_lock.acquire(blocking=False):
            return False, None
        try:
            while True:
                message = self._next_ready()
                if message is not None or self._unpack_next(0.0, None) is None:
                    return True, message
        finally:
            self._take_lock.release()

    def wait_async(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """A future that completes when entries arrive (at once if some are already queued)."""
        future: asyncio.Future[None] = loop.create_future()
        with self._cond:
            if self._runs or self._taking or self._ready_pos < len(self._ready) or self._entries_pos < len(self._entries) or self._closed:
                future.set_result(None)
            else:
                self._waiters.append((loop, future))
        return future

    def counts(self, owner: QueueOwner | None = None) -> tuple[int, int]:
        """(entries still packed, messages unpacked and ready), for one owner or for all."""
        with self._cond:
            queued = [*self._taking, *self._runs]  # copies in one step: the taking thread may pop meanwhile
        entries = sum(len(run.frames) for run in queued if owner is None or (run.owner is owner and run.epoch == owner.epoch))
        opened, entries_owner = self._entries[self._entries_pos :], self._entries_owner
        if opened and entries_owner is not None and self._entries_epoch == entries_owner.epoch and owner in (None, entries_owner):
            entries += len(opened)
        delivery, ready_owner = self._ready_delivery, self._ready_owner
        ready = len(self._ready) - self._ready_pos
        if delivery is None or (owner is not None and (ready_owner is not owner or delivery.epoch != owner.epoch)):
            ready = 0
        return entries, ready

    def _current(self) -> bool:
        """Whether messages of a current run are ready; those of a stale one are dropped."""
        ready, pos = self._ready, self._ready_pos
        if pos >= len(ready):
            return False
        delivery, owner = self._ready_delivery, self._ready_owner
        if delivery.epoch == owner.epoch:  # type: ignore[union-attr]
            return True
        owner.stale_messages(delivery.epoch, len(ready) - pos)  # type: ignore[union-attr]
        self._ready, self._ready_pos = [], 0
        return False

    def _next_ready(self) -> Message | None:
        if not self._current():
            return None
        pos = self._ready_pos
        self._ready_pos = pos + 1
        message = self._ready[pos]
        self._ready_owner.taken(message)  # type: ignore[union-attr]
        return message

    def _unpack_next(self, deadline: float | None, before_wait: Callable[[], None] | None) -> list[Message] | None:
        """Unpack the next current run into the ready queue and return its messages (possibly
        none); None on timeout or close."""
        item = self._next_run(deadline, before_wait)
        if item is None:
            return None
        owner = item.owner
        # Unpacking happens outside the shared lock, so the reader thread can keep queueing meanwhile.
        messages = owner.unpack(item)
        if messages:
            self._ready, self._ready_pos = messages, 0
            self._ready_delivery, self._ready_owner = messages[0].delivery, owner
        return messages

    def _next_run(self, deadline: float | None, before_wait: Callable[[], None] | None) -> QueuedRun | None:
        """The next run of a current epoch, stale ones dropped on the way; None on timeout or close."""
        while True:
            if self._closed:
                return None
            taking = self._taking
            if not taking:
                if not self._take_queued(deadline, before_wait):
                    return None
                taking = self._taking
            item = taking.popleft()
            if item.epoch != item.owner.epoch:
                item.owner.stale_run(item)
                continue
            return item

    def _take_queued(self, deadline: float | None, before_wait: Callable[[], None] | None) -> bool:
        """Move every queued run to the taking side, waiting for one until ``deadline``; False on timeout or close."""
        with self._cond:
            while True:
                if self._closed:
                    return False
                if self._runs:
                    self._taking, self._runs = self._runs, self._taking
                    return True
                if before_wait is not None:
                    before_wait()
                if deadline is None:
                    self._cond.wait()
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
