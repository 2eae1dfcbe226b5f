"""Producer interceptors: see (and may replace) each message before it is sent, hear of its receipt."""

from __future__ import annotations

from typing import Any, Protocol

from ..exceptions import Result
from ..protocol.message_id import MessageId
from .message import OutgoingMessage

__all__ = ["ProducerInterceptor"]


class ProducerInterceptor(Protocol):
    """What ``create_producer(interceptors=[...])`` expects of each interceptor (Java's ``ProducerInterceptor``)."""

    def before_send(self, producer: Any, message: OutgoingMessage) -> OutgoingMessage:
        """Return the message to send: ``message`` itself or a replacement."""
        ...

    def on_send_acknowledgement(
        self, producer: Any, message: OutgoingMessage, message_id: MessageId | None, result: Result
    ) -> None:
        """The message completed with ``result`` (``Result.Ok`` and its id, or a failure and None)."""
        ...
