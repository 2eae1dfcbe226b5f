"""Pulsar transactions (PIP-31): sends to several topics and acknowledgements on several
subscriptions that take effect together on commit, or not at all on abort.

:class:`~.transaction.Transaction` is what ``Client.new_transaction`` returns and what ``send`` and
``acknowledge`` take as ``transaction=``; :class:`~.coordinator.CoordinatorClient` speaks to the
brokers' transaction coordinators; :class:`~.ids.TxnId` names a transaction on the wire.
"""

from __future__ import annotations

from .coordinator import COORDINATOR_ASSIGN_TOPIC, CoordinatorClient
from .ids import TxnId
from .transaction import Transaction, TransactionState

__all__ = ["COORDINATOR_ASSIGN_TOPIC", "CoordinatorClient", "Transaction", "TransactionState", "TxnId"]
