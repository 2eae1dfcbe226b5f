"""The transaction coordinators' log: every transaction's status and what it touched, in the
broker's database, as Pulsar's MLTransactionMetadataStore keeps them in a managed ledger.

A transaction's row is written when it opens and at every change; a commit or abort is logged as
COMMITTING or ABORTING before the partitions and subscriptions are told, so a restart finishes an
end it interrupted. Rows of ended transactions are dropped at load, but for the newest of each
coordinator, which keeps its sequence going: a transaction id is never given out twice.
"""

from __future__ import annotations

import asyncio
import enum
import json
from dataclasses import dataclass, field

from airflow_pulsar.client.transaction.ids import TxnId

from ..storage import Storage


class TxnStatus(enum.Enum):
    """Pulsar's TxnStatus of a transaction on its coordinator."""

    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    COMMITTED = "COMMITTED"
    ABORTING = "ABORTING"
    ABORTED = "ABORTED"

    @property
    def ended(self) -> bool:
        """Whether the transaction is over (committed or aborted on every participant)."""
        return self in (TxnStatus.COMMITTED, TxnStatus.ABORTED)


@dataclass
class TransactionMetadata:
    """One transaction as its coordinator knows it; times in milliseconds since the epoch."""

    txn: TxnId
    status: TxnStatus
    opened: int
    timeout_at: int
    partitions: list[str] = field(default_factory=list)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)


class CoordinatorLog:
    """The stored transactions of every coordinator."""

    def __init__(self, storage: Storage):
        self.storage = storage

    def load(self) -> tuple[list[TransactionMetadata], dict[int, int]]:
        """The transactions not yet ended, and the last sequence each coordinator gave out."""
        rows = self.storage.query(
            "SELECT coordinator, sequence, status, opened, timeout_at, partitions, subscriptions FROM transactions"
        )
        unfinished: list[TransactionMetadata] = []
        last_sequence: dict[int, int] = {}
        for coordinator, sequence, status, opened, timeout_at, partitions, subscriptions in rows:
            last_sequence[coordinator] = max(sequence, last_sequence.get(coordinator, -1))
            if not TxnStatus(status).ended:
                subs = [(topic, sub) for topic, sub in json.loads(subscriptions)]
                txn = TxnId(coordinator, sequence)
                unfinished.append(TransactionMetadata(txn, TxnStatus(status), opened, timeout_at, json.loads(partitions), subs))
        return unfinished, last_sequence

    def prune(self, last_sequence: dict[int, int]) -> None:
        """Drop the rows of ended transactions, but the newest of each coordinator."""
        for coordinator, sequence in last_sequence.items():
            self.storage.submit(
                "DELETE FROM transactions WHERE coordinator = ? AND sequence < ? AND status IN (?, ?)",
                (coordinator, sequence, TxnStatus.COMMITTED.value, TxnStatus.ABORTED.value),
            )

    def save(self, meta: TransactionMetadata) -> asyncio.Future[None]:
        """Queue the transaction's current state; the future resolves once it is committed."""
        return self.storage.submit(
            "INSERT OR REPLACE INTO transactions (coordinator, sequence, status, opened, timeout_at, partitions, subscriptions)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                meta.txn.most_bits,
                meta.txn.least_bits,
                meta.status.value,
                meta.opened,
                meta.timeout_at,
                json.dumps(meta.partitions),
                json.dumps(meta.subscriptions),
            ),
        )
