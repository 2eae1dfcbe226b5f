"""The batch container: messages of one partition waiting to go out together as one entry.

A batch is flushed when it reaches ``max_messages`` or ``max_bytes`` (checked as messages are
added, on the sender's thread) or when its first message has waited ``max_publish_delay`` (the
client's timer). A message that would push the batch over ``max_bytes`` flushes the batch first;
one larger than ``max_bytes`` on its own does not enter a batch at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Batch", "BatchContainer"]

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

    @property
    def num_messages(self) -> int:
        """Messages in the batch."""
        return len(self.callbacks)


class BatchContainer:
    """Accumulates messages as ``[size][SingleMessageMetadata]`` headers and their payloads.

    A callback may be None (a ``send_async`` whose outcome nobody waits for).
    """

    __slots__ = (
        "max_messages",
        "max_bytes",
        "_parts",
        "_callbacks",
        "_size",
        "_payload_bytes",
        "_first_seq",
        "_last_seq",
        "_first_added",
    )

    def __init__(self, max_messages: int, max_bytes: int):
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._parts: list[bytes] = []
        self._callbacks: list[SendCallback | None] = []
        self._size = 0
        self._payload_bytes = 0
        self._first_seq = -1
        self._last_seq = -1
        self._first_added = 0.0

    def __len__(self) -> int:
        return len(self._callbacks)

    @property
    def first_added(self) -> float:
        """When (monotonic) the oldest message still in the container was added."""
        return self._first_added

    def accepts(self, payload_size: int) -> bool:
        """Whether a message of this payload size may be batched at all."""
        return payload_size <= self.max_bytes

    def has_space(self, encoded_size: int) -> bool:
        """Whether a message encoded to ``encoded_size`` (header and payload) fits without flushing first."""
        return not self._callbacks or self._size + encoded_size <= self.max_bytes

    def add(self, header: bytes, payload: bytes, callback: SendCallback | None, sequence_id: int) -> bool:
        """Add one message (its header from ``single_header``); True when the batch is now full and must be flushed."""
        callbacks = self._callbacks
        if not callbacks:
            self._first_seq = sequence_id
            self._first_added = time.monotonic()
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
        )
        self._parts = []
        self._callbacks = []
        self._size = 0
        self._payload_bytes = 0
        return batch
