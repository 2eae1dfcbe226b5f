"""Partitions added to a topic while a producer or consumer is open on it.

Pulsar lets an administrator raise a partitioned topic's partition count (never lower it). The
official clients ask for the count of every partitioned topic they produce to or consume from once
a minute, and open a producer or consumer on each new partition. Here one thread per client does
that for every :class:`GrowingTopics` handler it watches: a partitioned producer, or a consumer or
reader over partitions. The broker gives the topic's existing subscriptions to the new partitions
when it adds them, so a consumer that joins a new partition a minute later has missed nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from .exceptions import PulsarException

__all__ = ["GrowingTopics", "PartitionWatch"]

log = logging.getLogger(__name__)


class GrowingTopics(Protocol):
    """A handler whose topics may gain partitions."""

    def partition_counts(self) -> dict[str, int]:
        """Each partitioned topic it is open on, with the partitions it is open on now."""
        ...

    def add_partitions(self, topic: str, partitions: int) -> None:
        """Open on the partitions of ``topic`` from its current count up to ``partitions``."""
        ...


class PartitionWatch:
    """Asks ``partition_count`` for the topics of the watched handlers every ``interval`` seconds
    (0: never), on a daemon thread started with the first handler."""

    def __init__(self, partition_count: Callable[[str], int], interval: float):
        self._partition_count = partition_count
        self.interval = interval
        self._handlers: list[GrowingTopics] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, handler: GrowingTopics) -> None:
        """Check ``handler``'s topics from now on, until :meth:`unwatch`."""
        if not self.interval:
            return
        with self._lock:
            self._handlers.append(handler)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="pulsar-partition-watch", daemon=True)
                self._thread.start()

    def unwatch(self, handler: GrowingTopics) -> None:
        """Stop checking ``handler``'s topics (it closed)."""
        with self._lock:
            if handler in self._handlers:
                self._handlers.remove(handler)

    def close(self) -> None:
        """Stop the thread; a check under way finishes first."""
        self._stop.set()
        with self._lock:
            self._handlers.clear()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def check(self) -> None:
        """One round: every watched topic's count, and the new partitions opened where it grew."""
        with self._lock:
            handlers = list(self._handlers)
        for handler in handlers:
            for topic, known in handler.partition_counts().items():
                if self._stop.is_set():
                    return
                try:
                    partitions = self._partition_count(topic)
                    if partitions > known:
                        log.info("%s: %d partitions, up from %d; opening the new ones", topic, partitions, known)
                        handler.add_partitions(topic, partitions)
                except PulsarException as exc:  # the next round tries again
                    log.warning("%s: checking for new partitions failed: %s", topic, exc)
                except Exception:  # one handler's failure must not stop the watch of the others
                    log.exception("%s: opening new partitions failed", topic)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.check()
