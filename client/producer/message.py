"""A message on its way out, as routers and interceptors see it."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["OutgoingMessage"]


class OutgoingMessage:
    """Content and per-message fields of one ``send``.

    The accessor methods are those of the official ``pulsar.Message`` (``data()``,
    ``partition_key()``, ...), so a ``message_router`` written for that client works unchanged;
    the plain attributes are for our own code.
    """

    __slots__ = ("content", "props", "key", "ordering", "event_time", "seq")

    def __init__(
        self,
        content: bytes | None,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
    ):
        self.content = content
        self.props = properties
        self.key = partition_key
        self.ordering = ordering_key
        self.event_time = event_timestamp
        self.seq = sequence_id

    def data(self) -> bytes | None:
        """The payload; None for a null value."""
        return self.content

    def properties(self) -> dict[str, str]:
        """Application properties."""
        return dict(self.props or {})

    def partition_key(self) -> str:
        """The partition key, or "" (as the official client returns for none)."""
        return self.key or ""

    def ordering_key(self) -> str:
        """The ordering key, or ""."""
        return self.ordering or ""

    def event_timestamp(self) -> int:
        """Event time in ms, 0 if not set."""
        return self.event_time or 0
