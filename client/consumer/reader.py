"""Readers: a non-durable, exclusive subscription that starts at a chosen message id.

The broker starts delivery at the start entry itself; the partition consumer drops what lies
before the start id (or at it, unless ``start_message_id_inclusive``), batch index included. A
reader of a partitioned topic reads every partition, from earliest or latest.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..arguments import check_type
from ..protocol.message_id import MessageId
from .consumer import Consumer
from .message import Message
from .partition_consumer import PartitionConsumer
from .settings import ConsumerSettings, ConsumerType


class Reader:
    """Mirrors ``pulsar.Reader``: read_next, has_message_available, seek, close.

    ``open_consumer(reader)`` subscribes the consumer behind it; it gets the reader first, so a
    reader listener can be handed the reader.
    """

    def __init__(self, open_consumer: Callable[[Reader], Consumer], start_message_id: MessageId):
        self._consumer = open_consumer(self)
        if start_message_id == MessageId.latest:
            for child in self._consumer.partition_consumers:
                _include_last_message(child)

    @property
    def consumer(self) -> Consumer:
        """The non-durable consumer the reader reads through."""
        return self._consumer

    def topic(self) -> str:
        """The topic read."""
        return self._consumer.topic()

    def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message; raises Timeout after ``timeout_millis`` (None: wait forever)."""
        message = self._consumer.receive(timeout_millis)
        mark_read(message)
        return message

    def has_message_available(self) -> bool:
        """Whether a read_next would find a message now (asks the broker for the last message id)."""
        self._consumer.check_open()
        children = self._consumer.partition_consumers
        queue = self._consumer.receiver_queue
        # Entries queued before a seek are stale: they will be dropped, not read.
        if any(sum(queue.counts(child)) for child in children):
            return True
        return any(_child_has_more(child) for child in children)

    def seek(self, messageid: MessageId | int) -> None:
        """Read from a message id or a publish timestamp (ms) next."""
        self._consumer.seek(messageid)

    def get_last_message_ids(self) -> dict[str, tuple[MessageId, MessageId | None]]:
        """Per partition: (last message id, the reader's position)."""
        return self._consumer.get_last_message_ids()

    def is_connected(self) -> bool:
        """Whether every partition is subscribed right now."""
        return self._consumer.is_connected()

    def close(self) -> None:
        """Close the reader (its subscription vanishes with it)."""
        self._consumer.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def mark_read(message: Message) -> None:
    """Acknowledge cumulatively up to a message a reader returned, so the broker forgets what it
    has delivered (the reader's cursor is not stored).

    Inside a batch that still has unread messages the ack stops before the entry, as a consumer's
    cumulative ack does: acking the entry would let the broker skip the unread rest when it
    redelivers from the start id after a reconnect.
    """
    delivery = message.delivery
    owner = delivery.owner
    if owner is not None:
        owner.acks.add_cumulative_message(delivery.ledger_id, delivery.entry_id, message.batch_index, delivery.batch_size)


def _include_last_message(child: PartitionConsumer) -> None:
    """A reader at ``latest`` with ``start_message_id_inclusive`` starts at the last message, as the
    official client does: the broker's ``latest`` is past it, so the reader seeks to its id."""
    if not child.start.inclusive:
        return
    last, _ = child.get_last_message_id()
    if last.entry_id() >= 0:
        child.seek(last)


def _child_has_more(child: PartitionConsumer) -> bool:
    last, mark_delete = child.get_last_message_id()
    if last.entry_id() < 0:
        return False
    dequeued = child.last_dequeued
    # The start a seek set, if any, else the reader's own.
    if dequeued is None and child.start.message_id == MessageId.latest:
        return mark_delete is not None and (last.ledger_id(), last.entry_id()) > (mark_delete.ledger_id(), mark_delete.entry_id())
    reference = dequeued or child.start.message_id or MessageId.earliest
    if dequeued is None and child.start.inclusive:
        return _position(last) >= _position(reference)
    return _position(last) > _position(reference)


def _position(message_id: MessageId) -> tuple[int, int, int]:
    return (message_id.ledger_id(), message_id.entry_id(), message_id.batch_index())


def reader_settings(
    receiver_queue_size: int,
    reader_name: str | None,
    subscription_role_prefix: str | None,
    is_read_compacted: bool,
    start_message_id_inclusive: bool,
    subscription_name: str | None = None,
) -> ConsumerSettings:
    """The consumer settings behind a reader: a random subscription name after the role prefix, unless named."""
    prefix = subscription_role_prefix or "reader"
    return ConsumerSettings(
        subscription_name=subscription_name or f"{prefix}-{os.urandom(5).hex()}",
        consumer_type=ConsumerType.Exclusive,
        receiver_queue_size=receiver_queue_size,
        consumer_name=reader_name,
        is_read_compacted=is_read_compacted,
        start_message_id_inclusive=start_message_id_inclusive,
        durable=False,
    )


def check_start(start_message_id: Any) -> MessageId:
    """The start id, or a clear error."""
    check_type(MessageId, start_message_id, "start_message_id")
    return start_message_id
