"""The batch containers: messages of one partition waiting to go out together as entries.

A container is flushed when it reaches ``max_messages`` or ``max_bytes`` (checked as messages are
added, on the sender's thread) or when its first message has waited ``max_publish_delay`` (the
client's timer). A message that would push it over ``max_bytes`` flushes it first; one larger
than ``max_bytes`` on its own does not enter a batch at all.

:class:`BatchContainer` makes one entry of its messages (``BatchingType.Default``);
:class:`KeyBasedBatchContainer` one entry per key (``BatchingType.KeyBased``), so that a
Key_Shared subscription, which dispatches a whole entry by its key, gives each consumer only
messages of its keys. An entry's metadata carries the keys of its first message, as the official
producers write it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Batch", "BatchContainer", "KeyBasedBatchContainer"]

SendCallback = Callable[[Any, Any], None]


@dataclass(slots=True)
class Batch:
    """The drained contents of a container, ready to become one SEND."""

    payload: bytes
    callbacks: list[SendCallback | None]
    first_sequence_id: int
    last_sequence_id: int
    payload_bytes: int
    first_added: float
    # The first message's keys, for the entry's metadata (Key_Shared dispatches on them).
    partition_key: str | None = None
    ordering_key: bytes | None = None

    @property
    def num_messages(self) -> int:
        """Messages in the batch."""
        return len(self.callbacks)


class _Limits:
    """What both containers share: their limits, the size they hold, and when their oldest
    message came."""

    __slots__ = ("max_messages", "max_bytes", "_size", "_first_added")

    def __init__(self, max_messages: int, max_bytes: int):
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._size = 0  # headers and payloads; every header has bytes, so 0 only when empty
        self._first_added = 0.0

    @property
    def first_added(self) -> float:
        """When (monotonic) the oldest message still in the container was added."""
        return self._first_added

    def accepts(self, payload_size: int) -> bool:
        """Whether a message of this payload size may be batched at all."""
        return payload_size <= self.max_bytes

    def has_space(self, encoded_size: int) -> bool:
        """Whether a message encoded to ``encoded_size`` (header and payload) fits without flushing first."""
        return not self._size or self._size + encoded_size <= self.max_bytes


class BatchContainer(_Limits):
    """Accumulates messages as ``[size][SingleMessageMetadata]`` headers and their payloads.

    A callback may be None (a ``send_async`` whose outcome nobody waits for).
    """

    __slots__ = ("_parts", "_callbacks", "_payload_bytes", "_first_seq", "_last_seq", "_partition_key", "_ordering_key")

    def __init__(self, max_messages: int, max_bytes: int):
        super().__init__(max_messages, max_bytes)
        self._parts: list[bytes] = []
        self._callbacks: list[SendCallback | None] = []
        self._payload_bytes = 0
        self._first_seq = -1
        self._last_seq = -1
        self._partition_key: str | None = None
        self._ordering_key: bytes | None = None

    def __len__(self) -> int:
        return len(self._callbacks)

    def add(
        self,
        header: bytes,
        payload: bytes,
        callback: SendCallback | None,
        sequence_id: int,
        partition_key: str | None = None,
        ordering_key: bytes | None = None,
    ) -> bool:
        """Add one message (its header from ``single_header``, its keys as sent); True when the
        batch is now full and must be flushed."""
        callbacks = self._callbacks
        if not callbacks:
            self._first_seq = sequence_id
            self._first_added = time.monotonic()
            self._partition_key = partition_key
            self._ordering_key = ordering_key
        self._parts += (header, payload)
        callbacks.append(callback)
        self._last_seq = sequence_id
        size = len(payload)
        self._payload_bytes += size
        self._size += len(header) + size
        return len(callbacks) >= self.max_messages or self._size >= self.max_bytes

    def drain(self) -> Batch:
        """Take everything out as a :class:`Batch` and start empty."""
        batch = Batch(
            b"".join(self._parts),
            self._callbacks,
            self._first_seq,
            self._last_seq,
            self._payload_bytes,
            self._first_added,
            self._partition_key,
            self._ordering_key,
        )
        self._parts = []
        self._callbacks = []
        self._size = 0
        self._payload_bytes = 0
        return batch

    def drain_all(self) -> list[Batch]:
        """The batch, as a list of one: what :meth:`KeyBasedBatchContainer.drain_all` gives for one key."""
        return [self.drain()]


class KeyBasedBatchContainer(_Limits):
    """One :class:`BatchContainer` per key, the ordering key if a message has one, else its
    partition key (no key is a key too); the limits count every key's messages together, and
    a flush drains all of them, in the order of their first sequence ids."""

    __slots__ = ("_batches", "_count")

    def __init__(self, max_messages: int, max_bytes: int):
        super().__init__(max_messages, max_bytes)
        self._batches: dict[bytes, BatchContainer] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(
        self,
        header: bytes,
        payload: bytes,
        callback: SendCallback | None,
        sequence_id: int,
        partition_key: str | None = None,
        ordering_key: bytes | None = None,
    ) -> bool:
        """Add one message to the batch of its key; True when the container is now full."""
        key = ordering_key if ordering_key is not None else (partition_key or "").encode()
        batch = self._batches.get(key)
        if batch is None:  # its own limits are never reached: this container's, over all keys, come first
            batch = self._batches[key] = BatchContainer(self.max_messages, self.max_bytes)
        if not self._count:
            self._first_added = time.monotonic()
        batch.add(header, payload, callback, sequence_id, partition_key, ordering_key)
        self._count += 1
        self._size += len(header) + len(payload)
        return self._count >= self.max_messages or self._size >= self.max_bytes

    def drain_all(self) -> list[Batch]:
        """Every key's batch, the one whose first message was sent first leading, and start empty."""
        batches = sorted((batch.drain() for batch in self._batches.values() if len(batch)), key=_first_sequence_id)
        self._batches = {}
        self._count = 0
        self._size = 0
        return batches


def _first_sequence_id(batch: Batch) -> int:
    return batch.first_sequence_id
