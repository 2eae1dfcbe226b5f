"""The admin REST paths of transactions, Pulsar's ``/admin/v3/transactions``: the coordinators'
stats, a transaction's metadata, the slow transactions, a topic's transaction buffer and a
subscription's pending acknowledgements, and one transaction's part in either.

As Pulsar: 503 when the broker runs no coordinator; 404 with the coordinator's own words for a
coordinator or a transaction it does not know (an ended transaction is forgotten).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from airflow_pulsar.client.transaction.ids import TxnId

from .admin_authorization import SuperuserOrTenantAdmin, requires
from .admin_resource import AdminResource, error
from .topic import Topic
from .transactions.coordinator import TransactionCoordinators, TransactionRefused, now_ms
from .transactions.log import TransactionMetadata

PATH = "/admin/v3/transactions"
_TOPIC = "/{tenant}/{namespace}/{topic}"
_TXN = "/{most}/{least}"
_NOT_ENABLED = "This Broker is not configured with transactionCoordinatorEnabled=true."


class Transactions(AdminResource):
    """``/admin/v3/transactions/...``."""

    def routes(self) -> list[web.RouteDef]:
        """The transaction paths."""
        return [
            web.get(PATH + "/coordinatorStats", self.coordinator_stats),
            web.get(PATH + "/transactionMetadata" + _TXN, self.transaction_metadata),
            web.get(PATH + "/slowTransactions/{timeout}", self.slow_transactions),
            web.get(PATH + "/transactionBufferStats" + _TOPIC, self.buffer_stats),
            web.get(PATH + "/transactionInBufferStats" + _TOPIC + _TXN, self.transaction_in_buffer),
            web.get(PATH + "/pendingAckStats" + _TOPIC + "/{subscription}", self.pending_ack_stats),
            web.get(PATH + "/transactionInPendingAckStats" + _TOPIC + "/{subscription}" + _TXN, self.transaction_in_pending_ack),
        ]

    def _coordinators(self) -> TransactionCoordinators:
        """The broker's coordinators; Pulsar's 503 when it runs none."""
        coordinators = self.service.transactions
        if coordinators is None:
            raise web.HTTPServiceUnavailable(text=json.dumps({"reason": _NOT_ENABLED}), content_type="application/json")
        return coordinators

    @requires(SuperuserOrTenantAdmin("GET_TRANSACTION_COORDINATOR_STATS"))
    async def coordinator_stats(self, request: web.Request) -> web.Response:
        """Every coordinator's stats by id, or with ``coordinatorId`` that coordinator's."""
        return await _answer(lambda: self._coordinator_stats(request.query.get("coordinatorId")))

    def _coordinator_stats(self, only: str | None) -> dict[str, Any]:
        coordinators = self._coordinators()
        if only is not None:
            coordinators.check_coordinator(int(only))
            return coordinator_stats(coordinators, int(only))
        return {str(tc_id): coordinator_stats(coordinators, tc_id) for tc_id in range(coordinators.count)}

    @requires(SuperuserOrTenantAdmin("GET_TRANSACTION_METADATA"))
    async def transaction_metadata(self, request: web.Request) -> web.Response:
        """An open (or ending) transaction: its status, times, and what it produced and acknowledged."""
        txn = _txn(request)
        return await _answer(lambda: self._metadata(self._coordinators().metadata(txn)))

    @requires(SuperuserOrTenantAdmin("GET_SLOW_TRANSACTIONS"))
    async def slow_transactions(self, request: web.Request) -> web.Response:
        """The transactions open longer than ``timeout`` milliseconds, by id."""
        timeout = int(request.match_info["timeout"])
        coordinators = self._coordinators()
        slow = [meta for tc_id in range(coordinators.count) for meta in coordinators.transactions_of(tc_id)]
        return web.json_response({str(m.txn): self._metadata(m) for m in slow if now_ms() - m.opened > timeout})

    def _metadata(self, meta: TransactionMetadata) -> dict[str, Any]:
        """Pulsar's TransactionMetadata (its ``timeoutAt`` is the timeout, not a time)."""
        produced = {name: self._in_buffer(name, meta.txn) for name in meta.partitions}
        acked: dict[str, dict[str, Any]] = {}
        for name, subscription in meta.subscriptions:
            acked.setdefault(name, {})[subscription] = self._in_pending_acks(name, subscription, meta.txn)
        return {
            "txnId": str(meta.txn),
            "status": meta.status.value,
            "openTimestamp": meta.opened,
            "timeoutAt": meta.timeout_at - meta.opened,
            "producedPartitions": produced,
            "ackedPartitions": acked,
        }

    def _loaded(self, name: str) -> Topic | None:
        return self.service.topics.get(name)

    def _in_buffer(self, name: str, txn: TxnId) -> dict[str, Any]:
        topic = self._loaded(name)
        return {"aborted": False} if topic is None else topic.transactions.transaction_stats(txn)

    def _in_pending_acks(self, name: str, subscription: str, txn: TxnId) -> dict[str, Any]:
        topic = self._loaded(name)
        held = None if topic is None else topic.subscriptions.get(subscription)
        return {} if held is None else held.pending_acks.transaction_stats(txn)

    @requires(SuperuserOrTenantAdmin("GET_TRANSACTION_BUFFER_STATS"))
    async def buffer_stats(self, request: web.Request) -> web.Response:
        """The topic's transaction buffer: its max read position and open and aborted transactions."""
        self._coordinators()
        topic = await self.existing(self.topic_name(request))
        return web.json_response(topic.transactions.buffer_stats())

    @requires(SuperuserOrTenantAdmin("GET_TRANSACTION_IN_BUFFER_STATS"))
    async def transaction_in_buffer(self, request: web.Request) -> web.Response:
        """Where a transaction's entries start on the topic while it is open, and whether it aborted."""
        self._coordinators()
        topic = await self.existing(self.topic_name(request))
        return web.json_response(topic.transactions.transaction_stats(_txn(request)))

    @requires(SuperuserOrTenantAdmin("GET_PENDING_ACK_STATS"))
    async def pending_ack_stats(self, request: web.Request) -> web.Response:
        """The subscription's pending acknowledgements: how many open transactions hold some."""
        self._coordinators()
        return web.json_response((await self._subscription(request)).pending_acks.stats())

    @requires(SuperuserOrTenantAdmin("GET_TRANSACTION_IN_PENDING_ACK_STATS"))
    async def transaction_in_pending_ack(self, request: web.Request) -> web.Response:
        """A transaction's cumulative acknowledgement on the subscription, if it holds one."""
        self._coordinators()
        return web.json_response((await self._subscription(request)).pending_acks.transaction_stats(_txn(request)))

    async def _subscription(self, request: web.Request) -> Any:
        topic = await self.existing(self.topic_name(request))
        name = request.match_info["subscription"]
        if name not in topic.subscriptions:
            raise LookupError(f"Subscription {name} not found")
        return topic.subscriptions[name]


def coordinator_stats(coordinators: TransactionCoordinators, tc_id: int) -> dict[str, Any]:
    """Pulsar's TransactionCoordinatorStats: the last sequence given out, the low water mark (every
    transaction at or below it has ended), the open transactions, when the log was loaded."""
    last = coordinators.next_sequence(tc_id) - 1
    open_ones = [meta.txn.least_bits for meta in coordinators.transactions_of(tc_id)]
    return {
        "state": "Ready",
        "leastSigBits": last,
        "lowWaterMark": min(open_ones) - 1 if open_ones else last,
        "ongoingTxnSize": len(open_ones),
        "recoverStartTime": coordinators.recover_start,
        "recoverEndTime": coordinators.recover_end,
    }


def _txn(request: web.Request) -> TxnId:
    return TxnId(int(request.match_info["most"]), int(request.match_info["least"]))


async def _answer(work: Callable[[], Any]) -> web.Response:
    """The JSON of ``work()``, or 404 with the coordinator's words for what it does not know."""
    try:
        return web.json_response(work())
    except TransactionRefused as exc:
        return error(404, str(exc))
