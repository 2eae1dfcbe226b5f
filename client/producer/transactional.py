"""Sends in a transaction: the partition registered with the coordinator first, the send counted
in the transaction until its receipt (a failed one makes the commit abort)."""

from __future__ import annotations

from ..exceptions import PulsarException, Result, exception_for
from ..protocol.message_id import MessageId
from ..transaction import Transaction
from .batch_container import SendCallback
from .pending import fail_callback

__all__ = ["TransactionalSend", "joined"]


def joined(transaction: Transaction, topic: str, callback: SendCallback | None) -> TransactionalSend:
    """Make a send to the partition ``topic`` part of ``transaction``: the partition is registered
    with the transaction's coordinator (once per transaction, blocking for that round trip) and the
    send counted until it completes; returns the callback that ends it, then calls ``callback``.

    Raises:
        InvalidTxnStatusError: the transaction is no longer open.
        PulsarException: the coordinator refused the partition or could not be reached.
    """
    transaction.register_partition(topic)
    transaction.op_started()
    return TransactionalSend(transaction, topic, callback)


class TransactionalSend:
    """The callback of a send in a transaction: ends the transaction's count of it, then tells the sender."""

    __slots__ = ("_transaction", "_topic", "_callback")

    def __init__(self, transaction: Transaction, topic: str, callback: SendCallback | None):
        self._transaction = transaction
        self._topic = topic
        self._callback = callback

    def __call__(self, result: Result, message_id: MessageId | None) -> None:
        self._transaction.op_finished(None if result is Result.Ok else exception_for(result, f"send to {self._topic} failed"))
        if self._callback is not None:
            self._callback(result, message_id)

    def fail(self, error: PulsarException) -> None:
        """Fail with the exception itself (a sync send's waiter keeps its message)."""
        self._transaction.op_finished(error)
        fail_callback(self._callback, error)
