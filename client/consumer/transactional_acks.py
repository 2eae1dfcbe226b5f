"""Acknowledgements in a transaction: sent at once (never grouped), each awaiting the broker's ACK_RESPONSE.

As the Java client makes them: the subscription is registered with the transaction's coordinator
before the first acknowledgement on it; the ACK names the transaction and asks for a response, so a
conflict (the message already acknowledged in another open transaction) fails the call with
``TransactionConflict``. A message of a batch is acknowledged by its index: the ack_set has every
bit set but the acknowledged ones (a set bit means "not acknowledged"). The broker keeps the
acknowledgement pending until the transaction ends: a commit makes it count, an abort releases the
message, which the broker then delivers again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.message_id import MessageId
from ..protocol.PulsarApi_pb2 import BaseCommand, CommandAck
from ..transaction import Transaction
from .ack_grouping import id_data
from .message import Message

if TYPE_CHECKING:
    from .partition_consumer import PartitionConsumer

__all__ = ["acknowledge_in_transaction"]

T = BaseCommand


def acknowledge_in_transaction(
    consumer: PartitionConsumer, target: Message | MessageId, transaction: Transaction, cumulative: bool
) -> None:
    """Acknowledge ``target`` (cumulatively: it and everything before it) on ``consumer``'s
    subscription as part of ``transaction``; returns once the broker accepted it.

    Raises:
        InvalidTxnStatusError: the transaction is no longer open.
        TransactionConflict: another open transaction already acknowledged the message.
    """
    message_id = target.message_id() if type(target) is Message else target
    assert isinstance(message_id, MessageId)
    transaction.register_subscription(consumer.topic, consumer.settings.subscription_name)
    ledger, entry, index, size = message_id.ledger_id(), message_id.entry_id(), message_id.batch_index(), message_id.batch_size()
    every = (1 << size) - 1
    if index < 0 or size <= 1:
        ids = id_data(ledger, entry)  # a whole entry
    elif cumulative:
        ids = id_data(ledger, entry, every & ~((1 << (index + 1)) - 1), size) if index < size - 1 else id_data(ledger, entry)
    else:
        ids = id_data(ledger, entry, every & ~(1 << index), size)
    ack_type = CommandAck.Cumulative if cumulative else CommandAck.Individual
    timeout = consumer.client.operation_timeout

    def send() -> None:
        connection = consumer.connection_handler.wait(timeout)
        fields = transaction.id.fields()
        connection.call(T.ACK, timeout, consumer_id=consumer.consumer_id, ack_type=ack_type, message_id=[ids], **fields)

    transaction.run_op(send)
    if consumer.unacked is not None:
        if cumulative:
            consumer.unacked.remove_up_to(message_id)
        else:
            consumer.unacked.remove(message_id)
    if cumulative:
        transaction.register_cumulative_acker(consumer)
