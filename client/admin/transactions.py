"""The admin operations of transactions that a topic's readers need: Pulsar's
``/admin/v3/transactions`` stats of a topic's transaction buffer."""

from __future__ import annotations

from typing import Any

from .calls import AdminCall, Operation, decode_document
from .paths import topic_name, transactions_path


def transaction_buffer_stats(topic: str) -> Operation[dict[str, Any]]:
    """The topic partition's transaction buffer, as Pulsar's ``getTransactionBufferStats`` gives
    it: ``maxReadPosition`` (``"ledger:entry"``; nothing after it is delivered while a transaction
    that wrote there is open), ``ongoingTxnSize``, ``totalAbortedTransactions`` and ``state``.
    A broker without transaction coordinators answers 503 (AdminServerError)."""
    path = transactions_path("transactionBufferStats", topic_name(topic))
    return (yield AdminCall("transaction_buffer_stats", "GET", path, decode=decode_document))
