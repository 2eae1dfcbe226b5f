"""Why a connection is not being read right now (Pulsar's ServerCnxThrottleTracker): reading
stops with the first reason and starts again once the last one is gone."""

from __future__ import annotations

import asyncio
import enum


class PauseReason(enum.Enum):
    """What holds a connection's reading."""

    # maxPendingPublishRequestsPerConnection sends await their receipts.
    PENDING_PUBLISHES = "pending publish requests"
    # More waits to be written to the socket than the high water mark: a client that does not
    # read what it is sent is not read either (Pulsar's pulsarChannelPauseReceivingRequestsIfUnwritable).
    OUTBOUND_BUFFER_FULL = "outbound buffer full"


class ReadPauses:
    """The reasons one connection's reading is paused."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._reasons: set[PauseReason] = set()

    def attach(self, transport: asyncio.Transport) -> None:
        """Pause and resume this transport from now on."""
        self._transport = transport

    @property
    def paused(self) -> bool:
        """Whether any reason holds the reading now."""
        return bool(self._reasons)

    def pause(self, reason: PauseReason) -> None:
        """Stop reading for ``reason`` (idempotent)."""
        if not self._reasons and self._transport is not None:
            self._transport.pause_reading()
        self._reasons.add(reason)

    def resume(self, reason: PauseReason) -> None:
        """``reason`` no longer holds the reading; read again if nothing else does."""
        if reason not in self._reasons:
            return
        self._reasons.discard(reason)
        if not self._reasons and self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()
