"""The transaction commands of one client connection: TC_CLIENT_CONNECT_REQUEST, NEW_TXN,
ADD_PARTITION_TO_TXN, ADD_SUBSCRIPTION_TO_TXN and END_TXN to the coordinators, and the checks of a
SEND or an ACK that names a transaction.

As Pulsar: with transactions off (no coordinator) a request is refused with an ERROR,
``NotAllowed``; a coordinator's own refusal (TransactionCoordinatorNotFound, TransactionNotFound,
InvalidTxnStatus) travels in the response's error fields, where the clients look for it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from airflow_pulsar.client.protocol.PulsarApi_pb2 import (
    BaseCommand,
    CommandAck,
    CommandAddPartitionToTxn,
    CommandAddSubscriptionToTxn,
    CommandEndTxn,
    CommandNewTxn,
    CommandSubscribe,
    CommandTcClientConnectRequest,
    ServerError,
    TxnAction,
)
from airflow_pulsar.client.protocol.wire import signed64
from airflow_pulsar.client.transaction.ids import TxnId

from ..channel import Channel, Rejected
from .coordinator import TransactionCoordinators, TransactionRefused

if TYPE_CHECKING:
    from ..subscription import Subscription

T = BaseCommand
_NOT_ENABLED = "Transactions are not enabled."  # Pulsar's words


def coordinators_of(channel: Channel) -> TransactionCoordinators:
    """The broker's coordinators; refused as Pulsar refuses when transactions are off."""
    coordinators = channel.service.transactions
    if coordinators is None:
        raise Rejected(ServerError.NotAllowedError, _NOT_ENABLED)
    return coordinators


def open_transaction(channel: Channel, most_bits: int, least_bits: int) -> TxnId:
    """The open transaction a SEND or an ACK names; refused if transactions are off or it is not open."""
    txn = TxnId(most_bits, least_bits)
    if not coordinators_of(channel).is_open(txn):
        raise Rejected(ServerError.InvalidTxnStatus, f"Transaction {txn} is not open")
    return txn


def acknowledge_in_transaction(channel: Channel, subscription: Subscription, body: CommandAck) -> Awaitable[None] | None:
    """Hold an ACK's messages for its transaction on ``subscription``; returns the save of the
    pending acknowledgements. Raises Rejected, or SubscriptionError (TransactionConflict)."""
    txn = open_transaction(channel, body.txnid_most_bits, body.txnid_least_bits)
    cumulative = body.ack_type == CommandAck.Cumulative
    if cumulative and subscription.sub_type in (CommandSubscribe.Shared, CommandSubscribe.Key_Shared):
        raise Rejected(ServerError.NotAllowedError, "Cumulative acknowledge is not allowed on a Shared or Key_Shared subscription")
    ledger = subscription.ledger
    pending = subscription.pending_acks
    for message_id in body.message_id:
        entry_id = signed64(message_id.entryId)
        if message_id.ledgerId != ledger.ledger_id or not 0 <= entry_id <= ledger.last_entry_id:
            continue
        ack_set = list(message_id.ack_set) or None
        size = ledger.entry_messages(entry_id)
        if cumulative:
            pending.acknowledge_cumulative(txn, entry_id, ack_set, size)
        else:
            pending.acknowledge(txn, entry_id, ack_set, size)
    return pending.save()


class TransactionCommands:
    """Serves the coordinator requests of one connection."""

    def __init__(self, channel: Channel):
        self.channel = channel

    async def _answer(self, response_type: int, request_id: int, work: Awaitable[Any], **fields: Any) -> None:
        """Run ``work``, then answer; a coordinator's refusal goes in the response's error fields."""
        try:
            extra = await work
        except TransactionRefused as exc:
            self.channel.send(response_type, request_id=request_id, error=exc.error, message=str(exc), **fields)
            return
        self.channel.send(response_type, request_id=request_id, **fields, **(extra or {}))

    def on_tc_client_connect(self, body: CommandTcClientConnectRequest) -> Awaitable[None]:
        """TC_CLIENT_CONNECT_REQUEST: a client introduces itself to coordinator ``tc_id``."""
        coordinators = coordinators_of(self.channel)

        async def connect() -> None:
            coordinators.check_coordinator(body.tc_id)

        return self._answer(T.TC_CLIENT_CONNECT_RESPONSE, body.request_id, connect())

    def on_new_txn(self, body: CommandNewTxn) -> Awaitable[None]:
        """NEW_TXN: open a transaction (its timeout in milliseconds, whatever the field's name says)."""
        coordinators = coordinators_of(self.channel)

        async def open_one() -> dict[str, int]:
            txn = await coordinators.new_transaction(body.tc_id, body.txn_ttl_seconds)
            return {"txnid_least_bits": txn.least_bits, "txnid_most_bits": txn.most_bits}

        return self._answer(T.NEW_TXN_RESPONSE, body.request_id, open_one())

    def on_add_partition(self, body: CommandAddPartitionToTxn) -> Awaitable[None]:
        """ADD_PARTITION_TO_TXN: partitions the transaction produces to."""
        coordinators = coordinators_of(self.channel)
        txn = TxnId(body.txnid_most_bits, body.txnid_least_bits)
        work = coordinators.add_partitions(txn, list(body.partitions))
        return self._answer(T.ADD_PARTITION_TO_TXN_RESPONSE, body.request_id, work, **txn.fields())

    def on_add_subscription(self, body: CommandAddSubscriptionToTxn) -> Awaitable[None]:
        """ADD_SUBSCRIPTION_TO_TXN: subscriptions the transaction acknowledges on."""
        coordinators = coordinators_of(self.channel)
        txn = TxnId(body.txnid_most_bits, body.txnid_least_bits)
        work = coordinators.add_subscriptions(txn, [(s.topic, s.subscription) for s in body.subscription])
        return self._answer(T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, body.request_id, work, **txn.fields())

    def on_end_txn(self, body: CommandEndTxn) -> Awaitable[None]:
        """END_TXN: commit or abort; answered once every partition and subscription has it."""
        coordinators = coordinators_of(self.channel)
        txn = TxnId(body.txnid_most_bits, body.txnid_least_bits)
        work = coordinators.end(txn, commit=body.txn_action == TxnAction.COMMIT)
        return self._answer(T.END_TXN_RESPONSE, body.request_id, work, **txn.fields())
