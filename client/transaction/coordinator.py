"""The client side of Pulsar's transaction coordinators (TCs).

A cluster runs as many coordinators as the partitioned topic
``persistent://pulsar/system/transaction_coordinator_assign`` has partitions: coordinator ``i``
lives on the broker that owns partition ``i``, found by an ordinary lookup. A client introduces
itself to each with TC_CLIENT_CONNECT_REQUEST, opens transactions on them in turn (NEW_TXN; the
new id's most significant bits name the coordinator), and sends every later request about a
transaction to its coordinator: ADD_PARTITION_TO_TXN before the first send to a partition,
ADD_SUBSCRIPTION_TO_TXN before the first acknowledgement on a subscription, END_TXN to commit or
abort. Requests are retried, within the operation timeout, while a coordinator is not reachable
or still loading (as the Java client retries them).
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import TYPE_CHECKING, Any

from ..exceptions import RETRYABLE, PulsarException, Result, TransactionCoordinatorNotFoundError
from ..protocol.commands import type_name
from ..protocol.PulsarApi_pb2 import BaseCommand, Subscription, TxnAction
from ..topic_name import TopicName
from .ids import TxnId

if TYPE_CHECKING:
    from ..connection import Connection
    from ..services import ClientServices

__all__ = ["COORDINATOR_ASSIGN_TOPIC", "CoordinatorClient"]

log = logging.getLogger(__name__)

T = BaseCommand
COORDINATOR_ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
# Worth another try: the coordinator's broker is away or restarting, or the coordinator still loads its log.
_RETRYABLE = RETRYABLE | {Result.TransactionCoordinatorNotFoundError, Result.ConnectError}


class CoordinatorClient:
    """Requests to the cluster's transaction coordinators on behalf of one client (thread-safe).

    The coordinators are discovered on first use (:meth:`start`), not when the client is built.
    """

    def __init__(self, client: ClientServices):
        self._client = client
        self._lock = threading.Lock()
        self._coordinators = 0
        self._connections: dict[int, Connection] = {}
        self._next = itertools.count()

    def start(self) -> int:
        """Find the coordinators (once); returns how many there are.

        Raises:
            TransactionCoordinatorNotFoundError: the cluster runs no coordinator (transactions are
                off on the broker, or its coordinator metadata was never initialized).
        """
        with self._lock:
            if self._coordinators:
                return self._coordinators
        try:
            count = self._client.partition_count(COORDINATOR_ASSIGN_TOPIC)
        except PulsarException as exc:
            raise TransactionCoordinatorNotFoundError(f"no transaction coordinator found ({COORDINATOR_ASSIGN_TOPIC}: {exc})") from exc
        if count <= 0:
            raise TransactionCoordinatorNotFoundError(
                f"no transaction coordinator found: {COORDINATOR_ASSIGN_TOPIC} is not a partitioned topic "
                "(is transactionCoordinatorEnabled set on the brokers?)"
            )
        with self._lock:
            self._coordinators = count
        return count

    def new_transaction(self, timeout_ms: int) -> TxnId:
        """Open a transaction on the next coordinator in turn; the coordinator aborts it after ``timeout_ms``."""
        coordinator = next(self._next) % self.start()
        # The field is named in seconds, but Pulsar's coordinators and clients mean milliseconds.
        response = self._request(coordinator, T.NEW_TXN, txn_ttl_seconds=timeout_ms, tc_id=coordinator)
        return TxnId(response.txnid_most_bits, response.txnid_least_bits)

    def add_partition(self, txn: TxnId, topic: str) -> None:
        """Register a topic partition the transaction produces to (before the first send there)."""
        self._request(txn.coordinator_id, T.ADD_PARTITION_TO_TXN, partitions=[topic], **txn.fields())

    def add_subscription(self, txn: TxnId, topic: str, subscription: str) -> None:
        """Register a subscription the transaction acknowledges on (before the first acknowledgement there)."""
        entry = Subscription(topic=topic, subscription=subscription)
        self._request(txn.coordinator_id, T.ADD_SUBSCRIPTION_TO_TXN, subscription=[entry], **txn.fields())

    def end(self, txn: TxnId, commit: bool) -> None:
        """Commit or abort the transaction (END_TXN)."""
        action = TxnAction.COMMIT if commit else TxnAction.ABORT
        self._request(txn.coordinator_id, T.END_TXN, txn_action=action, **txn.fields())

    def forget_connections(self) -> None:
        """Let go of every coordinator connection (after a fork: they are the parent's)."""
        with self._lock:
            self._connections.clear()

    # ---- requests ----

    def _request(self, coordinator: int, command_type: int, **fields: Any) -> Any:
        """One request to ``coordinator``, retried while it cannot be reached, within the operation timeout."""
        timeout = self._client.operation_timeout

        def attempt() -> Any:
            try:
                return self._connection(coordinator, timeout).call(command_type, timeout, **fields)
            except PulsarException:
                self._drop(coordinator)  # the next attempt looks it up again: it may have moved
                raise

        return self._client.with_retries(f"{type_name(command_type)} to transaction coordinator {coordinator}", attempt, None, _RETRYABLE)

    def _connection(self, coordinator: int, timeout: float) -> Connection:
        """The connection to the broker of ``coordinator``, introduced to it once."""
        with self._lock:
            connection = self._connections.get(coordinator)
        if connection is not None and not connection.closed:
            return connection
        topic = str(TopicName.parse(COORDINATOR_ASSIGN_TOPIC).partition_name(coordinator))
        connection = self._client.lookup(topic)
        connection.call(T.TC_CLIENT_CONNECT_REQUEST, timeout, tc_id=coordinator)
        with self._lock:
            self._connections[coordinator] = connection
        return connection

    def _drop(self, coordinator: int) -> None:
        """Forget the coordinator's connection."""
        with self._lock:
            self._connections.pop(coordinator, None)

