"""A subscription's pending acknowledgements: what open transactions acknowledged on it, held until
they end, as Pulsar's PendingAckHandleImpl holds them.

A message acknowledged in an open transaction is delivered to no consumer meanwhile; the commit
applies the acknowledgement to the cursor, the abort releases the message, which is delivered
again. A message of a batch is held by its index, so two transactions may hold two indexes of one
entry. What Pulsar refuses as a TransactionConflict is refused here too: a message already
acknowledged, or already held by a transaction (another index of a batch aside); a cumulative
acknowledgement at or before the mark-delete, while another transaction holds one, or over a
message another transaction holds. The state is saved with every change, so a restart keeps it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_pulsar.client.protocol.batch import ack_set_words, unacked_mask
from airflow_pulsar.client.transaction.ids import TxnId

from ..cursor import Cursor
from ..ledger import Ledger
from ..storage import Storage
from ..subscription_rules import SubscriptionError

# A mask of acknowledged batch indexes that means the whole entry.
WHOLE = -1


@dataclass(frozen=True)
class CumulativeAck:
    """A transaction's cumulative acknowledgement: up to ``entry_id``, inside it up to what ``ack_set`` leaves."""

    txn: TxnId
    entry_id: int
    ack_set: list[int] | None
    batch_size: int


class HeldSubscription(Protocol):
    """What pending acknowledgements need of their subscription."""

    cursor: Cursor

    @property
    def name(self) -> str: ...

    @property
    def ledger(self) -> Ledger: ...

    def ack(self, entry_id: int, ack_set: list[int] | None, batch_size: int) -> bool: ...

    def ack_cumulative(self, entry_id: int, ack_set: list[int] | None, batch_size: int) -> bool: ...

    def hand_over(self, entry_id: int) -> None: ...

    def release(self, entry_ids: list[int]) -> None: ...

    def persist(self) -> asyncio.Future[None] | None: ...


class PendingAcks:
    """The acknowledgements open transactions hold on one subscription."""

    def __init__(self, subscription: HeldSubscription, storage: Storage, label: str):
        self.subscription = subscription
        self.storage = storage
        self.label = label  # "[topic][subscription]", as Pulsar names them in its refusals
        # entry id -> transaction -> (acknowledged indexes, WHOLE for the entry; the entry's message count)
        self._individual: dict[int, dict[TxnId, tuple[int, int]]] = {}
        self._cumulative: CumulativeAck | None = None

    def _conflict(self, txn: TxnId, what: str) -> SubscriptionError:
        """Pulsar's TransactionConflict, in its words."""
        return SubscriptionError("TransactionConflict", f"{self.label} Transaction:{txn} {what}")

    def held(self, entry_id: int) -> int:
        """The indexes of the entry that transactions hold: 0 none, WHOLE the whole entry."""
        holders = self._individual.get(entry_id)
        if not holders:  # dispatch asks for every entry it reads: the usual answer comes first
            return 0
        mask = 0
        for held, _ in holders.values():
            mask |= held
        return mask

    def transactions(self) -> set[TxnId]:
        """The transactions holding acknowledgements here."""
        held = {txn for holders in self._individual.values() for txn in holders}
        return held | ({self._cumulative.txn} if self._cumulative else set())

    # ---- acknowledging ----

    def acknowledge(self, txn: TxnId, entry_id: int, ack_set: list[int] | None, batch_size: int) -> None:
        """Hold the entry (or, with ``ack_set``, the indexes it clears) for ``txn``; raise a conflict as Pulsar does."""
        cursor = self.subscription.cursor
        if cursor.is_acked(entry_id):
            raise self._conflict(txn, f"try to ack message:{entry_id} already acked before.")
        full = (1 << batch_size) - 1
        mask = full & ~unacked_mask(ack_set) if ack_set and batch_size > 1 else WHOLE
        unacked = cursor.unacked_bits(entry_id)
        if unacked is not None and mask != WHOLE and mask & ~unacked:
            raise self._conflict(txn, f"try to ack batch message:{entry_id} already acked before.")
        holders = self._individual.get(entry_id, {})
        if any(held == WHOLE or mask == WHOLE or held & mask for held, _ in holders.values()):
            raise self._conflict(txn, f"try to ack message:{entry_id} in pending ack status.")
        cumulative = self._cumulative
        if cumulative is not None and cumulative.txn != txn and entry_id <= cumulative.entry_id:
            raise self._conflict(txn, f"try to ack message:{entry_id} in pending cumulative ack status.")
        self._individual.setdefault(entry_id, {})[txn] = (mask, batch_size)
        held = self.held(entry_id)
        if held == WHOLE or (unacked is not None and unacked & full & ~held == 0) or (unacked is None and held & full == full):
            self.subscription.hand_over(entry_id)  # nothing of it is left for its consumer to acknowledge

    def acknowledge_cumulative(self, txn: TxnId, entry_id: int, ack_set: list[int] | None, batch_size: int) -> None:
        """Hold a cumulative acknowledgement up to the entry for ``txn``; raise a conflict as Pulsar does."""
        if entry_id <= self.subscription.cursor.mark_delete:
            raise self._conflict(txn, f"try to cumulative ack position:{entry_id} within the range of mark delete.")
        if self._cumulative is not None and self._cumulative.txn != txn:
            raise self._conflict(txn, f"try to cumulative ack position:{entry_id} in pending cumulative ack status.")
        if any(held <= entry_id and any(other != txn for other in holders) for held, holders in self._individual.items()):
            raise self._conflict(txn, f"try to cumulative ack position:{entry_id} over messages in pending ack status.")
        if self._cumulative is None or entry_id >= self._cumulative.entry_id:
            self._cumulative = CumulativeAck(txn, entry_id, ack_set or None, batch_size)

    # ---- ending ----

    def end(self, txn: TxnId, commit: bool) -> list[asyncio.Future[None]]:
        """Apply (commit) or release (abort) what ``txn`` holds; returns the saves this queued."""
        subscription = self.subscription
        mine = [(entry_id, holders.pop(txn)) for entry_id, holders in self._individual.items() if txn in holders]
        self._individual = {entry_id: holders for entry_id, holders in self._individual.items() if holders}
        cumulative, released = self._cumulative, []
        if cumulative is not None and cumulative.txn != txn:
            cumulative = None
        if cumulative is not None:
            self._cumulative = None
            if commit:
                subscription.ack_cumulative(cumulative.entry_id, cumulative.ack_set, cumulative.batch_size)
        for entry_id, (mask, size) in mine:
            if not commit:
                released.append(entry_id)
            elif mask == WHOLE:
                subscription.ack(entry_id, None, 0)
            else:
                subscription.ack(entry_id, ack_set_words(((1 << size) - 1) & ~mask, size), size)
        subscription.release(released)
        saves = [subscription.persist() if commit and (mine or cumulative) else None, self.save()]
        return [saved for saved in saves if saved is not None]

    # ---- stats ----

    def stats(self) -> dict[str, Any]:
        """Pulsar's TransactionPendingAckStats (loaded with the subscription)."""
        return {"state": "Ready", "ongoingTxnSize": len(self.transactions())}

    def transaction_stats(self, txn: TxnId) -> dict[str, Any]:
        """Pulsar's TransactionInPendingAckStats: the transaction's cumulative acknowledgement, if it holds one."""
        cumulative = self._cumulative
        if cumulative is None or cumulative.txn != txn:
            return {}
        return {"cumulativeAckPosition": f"{self.subscription.ledger.ledger_id}:{cumulative.entry_id}"}

    # ---- durability ----

    def state(self) -> dict[str, Any]:
        """A JSON-able snapshot for storage."""
        cumulative = self._cumulative
        return {
            "individual": [
                [entry_id, *txn, mask, size] for entry_id, holders in self._individual.items() for txn, (mask, size) in holders.items()
            ],
            "cumulative": None
            if cumulative is None
            else [*cumulative.txn, cumulative.entry_id, cumulative.ack_set, cumulative.batch_size],
        }

    def load(self, state: dict[str, Any]) -> None:
        """Take back a saved snapshot (at load, before any consumer)."""
        for entry_id, most, least, mask, size in state["individual"]:
            self._individual.setdefault(entry_id, {})[TxnId(most, least)] = (mask, size)
        if state["cumulative"] is not None:
            most, least, entry_id, ack_set, size = state["cumulative"]
            self._cumulative = CumulativeAck(TxnId(most, least), entry_id, ack_set, size)

    def forget(self) -> asyncio.Future[None]:
        """Queue the removal of the saved state (the subscription is deleted)."""
        return self.storage.submit(
            "DELETE FROM pending_acks WHERE ledger_id = ? AND subscription = ?",
            (self.subscription.ledger.ledger_id, self.subscription.name),
        )

    def save(self) -> asyncio.Future[None] | None:
        """Queue the state for storage (durable subscriptions only); the future resolves when saved."""
        subscription = self.subscription
        if not subscription.cursor.durable:
            return None
        state = json.dumps(self.state(), separators=(",", ":"))
        return self.storage.submit(
            "INSERT OR REPLACE INTO pending_acks (ledger_id, subscription, state) VALUES (?, ?, ?)",
            (subscription.ledger.ledger_id, subscription.name, state),
        )


def load_pending_acks(storage: Storage, ledger_id: int) -> dict[str, dict[str, Any]]:
    """The saved pending acknowledgements of each subscription of a ledger."""
    rows = storage.query("SELECT subscription, state FROM pending_acks WHERE ledger_id = ?", (ledger_id,))
    return {name: json.loads(state) for name, state in rows}
