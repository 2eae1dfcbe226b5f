"""Reassembly of chunked messages: a large message sent as several entries, one chunk each.

Chunks of one message share a ``uuid`` and must arrive in order 0..n-1. A message whose chunks
stop arriving is dropped after ``expire_seconds``; at most ``max_pending`` messages are assembled
at once, and when another starts the oldest is dropped (and, if asked, acknowledged so that the
broker does not redeliver it forever).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from ..protocol.message_id import MessageId
from ..protocol.PulsarApi_pb2 import MessageMetadata

log = logging.getLogger(__name__)

DEFAULT_EXPIRE_SECONDS = 60.0


@dataclass
class _Assembly:
    metadata: MessageMetadata
    parts: list[bytes] = field(default_factory=list)
    chunk_ids: list[MessageId] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)


@dataclass
class CompletedChunks:
    """A whole message: the first chunk's metadata, the joined payload and every chunk's id."""

    metadata: MessageMetadata
    payload: bytes
    chunk_ids: list[MessageId]


class ChunkedMessageCollector:
    """Collects chunks per uuid; returns the message when its last chunk arrives."""

    def __init__(self, max_pending: int = 10, auto_ack_oldest: bool = False, expire_seconds: float = DEFAULT_EXPIRE_SECONDS):
        self.max_pending = max(max_pending, 1)
        self.auto_ack_oldest = auto_ack_oldest
        self.expire_seconds = expire_seconds
        self._pending: OrderedDict[str, _Assembly] = OrderedDict()
        self.dropped: list[MessageId] = []  # chunk ids of dropped messages, to ack or let redeliver

    @property
    def pending(self) -> int:
        """Messages partly assembled."""
        return len(self._pending)

    def add(self, metadata: MessageMetadata, payload: bytes, message_id: MessageId) -> CompletedChunks | None:
        """Add one chunk; the whole message once complete, else None."""
        self._expire()
        uuid = metadata.uuid
        chunk_id = metadata.chunk_id
        assembly = self._pending.get(uuid)
        if chunk_id == 0:
            if assembly is not None:
                self._drop(uuid, "restarted from its first chunk")
            if len(self._pending) >= self.max_pending:
                oldest = next(iter(self._pending))
                self._drop(oldest, f"more than {self.max_pending} chunked messages pending", ack=self.auto_ack_oldest)
            assembly = self._pending[uuid] = _Assembly(metadata)
        elif assembly is None or chunk_id != len(assembly.parts):
            log.warning("dropping chunk %d of %s: out of order or its first chunk is missing", chunk_id, uuid)
            if assembly is not None:
                self._drop(uuid, "a chunk arrived out of order")
            return None
        assembly.parts.append(payload)
        assembly.chunk_ids.append(message_id)
        if len(assembly.parts) < metadata.num_chunks_from_msg:
            return None
        del self._pending[uuid]
        return CompletedChunks(assembly.metadata, b"".join(assembly.parts), assembly.chunk_ids)

    def clear(self) -> None:
        """Forget every partial message (after a reconnect the broker sends the chunks again)."""
        self._pending.clear()

    def _expire(self) -> None:
        deadline = time.monotonic() - self.expire_seconds
        while self._pending:
            uuid, assembly = next(iter(self._pending.items()))
            if assembly.started > deadline:
                break
            self._drop(uuid, f"incomplete after {self.expire_seconds:g} s")

    def _drop(self, uuid: str, reason: str, ack: bool = False) -> None:
        assembly = self._pending.pop(uuid)
        log.warning("dropping chunked message %s: %s", uuid, reason)
        if ack:
            self.dropped.extend(assembly.chunk_ids)
