"""MessageBatch: the messages of a batch payload, outside any consumer (``pulsar.MessageBatch``).

For tools that hold a batch entry's uncompressed payload themselves (a dump of a ledger, a test's
hand-built batch) and want it as messages::

    messages = MessageBatch().with_message_id(entry_id).parse_from(payload, count)

Each message gets the entry's id with its index in the batch.
"""

from __future__ import annotations

from ..protocol.batch import read_batch
from ..protocol.message_id import MessageId, MessagePosition
from ..protocol.PulsarApi_pb2 import MessageMetadata
from .message import Delivery, Message

__all__ = ["MessageBatch"]


class MessageBatch:
    """Splits a batch payload into :class:`~.message.Message` objects carrying the entry's id."""

    def __init__(self) -> None:
        self._message_id = MessageId()

    def with_message_id(self, msg_id: MessagePosition) -> MessageBatch:
        """The id of the entry the batch was stored as (ours or the official client's)."""
        try:
            self._message_id = MessageId.wrap(msg_id)
        except ValueError:
            raise TypeError("unknown message id type") from None
        return self

    def parse_from(self, data: bytes, size: int) -> list[Message]:
        """The ``size`` messages of the uncompressed batch payload ``data``.

        Raises:
            ValueError: the payload does not hold ``size`` well-formed messages.
        """
        entry = self._message_id
        delivery = Delivery(
            None, 0, entry.ledger_id(), entry.entry_id(), entry.partition(), size, MessageMetadata(num_messages_in_batch=size), ""
        )
        return read_batch(data, size, Message, delivery)
