"""The broker's transaction coordinators (TCs), as Pulsar's TransactionMetadataStoreService runs them.

Coordinator ``i`` is partition ``i`` of ``persistent://pulsar/system/transaction_coordinator_assign``;
a transaction's id names its coordinator (most significant bits) and its sequence there. A
transaction opens with a timeout, collects the partitions it produces to and the subscriptions it
acknowledges on, and ends by commit or abort: logged as COMMITTING or ABORTING first, then each
partition appends its marker and each subscription applies or releases its pending
acknowledgements, then logged as ended and forgotten (a later request about it finds nothing, as
with Pulsar). One still open at its timeout is aborted. Refusals carry Pulsar's error codes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from airflow_pulsar.client.protocol.PulsarApi_pb2 import ServerError
from airflow_pulsar.client.transaction.ids import TxnId

from .log import CoordinatorLog, TransactionMetadata, TxnStatus

log = logging.getLogger(__name__)

COORDINATOR_ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"


class Participants(Protocol):
    """The partitions and subscriptions a transaction touched, as the coordinator reaches them."""

    async def end_on_partition(self, topic: str, txn: TxnId, commit: bool) -> None:
        """Append the transaction's marker on the partition ``topic`` (once it has none)."""
        ...

    async def end_on_subscription(self, topic: str, subscription: str, txn: TxnId, commit: bool) -> None:
        """Apply or release what the transaction acknowledged on the subscription."""
        ...

    async def abort_unknown(self, known: set[TxnId]) -> None:
        """Abort what partitions and subscriptions hold of a transaction not in ``known`` (the
        coordinators' unfinished ones): a write the log lost, which nothing else would ever end."""
        ...


class TransactionRefused(Exception):
    """A coordinator's refusal, with its Pulsar ServerError code."""

    def __init__(self, error: int, message: str):
        super().__init__(message)
        self.error = error


def now_ms() -> int:
    """The wall clock in milliseconds: timeouts survive a restart."""
    return int(time.time() * 1000)


class TransactionCoordinators:
    """Every coordinator of the broker, with the transactions not yet ended."""

    def __init__(self, count: int, log: CoordinatorLog, participants: Participants):
        self.count = count
        self._log = log
        self._participants = participants
        self._transactions: dict[TxnId, TransactionMetadata] = {}
        self._next_sequence = [0] * count
        self._timers: dict[TxnId, asyncio.TimerHandle] = {}
        self._ending: dict[TxnId, asyncio.Future[None]] = {}
        self.recover_start = self.recover_end = 0

    # ---- loading ----

    def start(self) -> None:
        """Load the log: finish the ends a stop interrupted, time the open transactions out, and abort
        what partitions hold of a transaction the log does not know as open."""
        self.recover_start = now_ms()
        unfinished, last_sequence = self._log.load()
        for coordinator, sequence in last_sequence.items():
            if coordinator < self.count:
                self._next_sequence[coordinator] = sequence + 1
        self._log.prune(last_sequence)
        for meta in unfinished:
            self._transactions[meta.txn] = meta
            if meta.status is TxnStatus.OPEN:
                self._schedule_timeout(meta)
            else:
                self._spawn_end(meta.txn, meta.status is TxnStatus.COMMITTING)
        asyncio.ensure_future(self._participants.abort_unknown(set(self._transactions))).add_done_callback(_log_failure)
        self.recover_end = now_ms()

    # ---- requests ----

    def check_coordinator(self, tc_id: int) -> None:
        """Raise Pulsar's refusal unless coordinator ``tc_id`` runs here."""
        if not 0 <= tc_id < self.count:
            raise TransactionRefused(ServerError.TransactionCoordinatorNotFound, f"Transaction coordinator with id {tc_id} not found!")

    async def new_transaction(self, tc_id: int, timeout_ms: int) -> TxnId:
        """Open a transaction on coordinator ``tc_id``, aborted after ``timeout_ms`` unless ended."""
        self.check_coordinator(tc_id)
        txn = TxnId(tc_id, self._next_sequence[tc_id])
        self._next_sequence[tc_id] += 1
        opened = now_ms()
        meta = TransactionMetadata(txn, TxnStatus.OPEN, opened, opened + timeout_ms)
        await self._log.save(meta)
        self._transactions[txn] = meta
        self._schedule_timeout(meta)
        return txn

    def _open(self, txn: TxnId) -> TransactionMetadata:
        meta = self._found(txn)
        if meta.status is not TxnStatus.OPEN:
            raise TransactionRefused(
                ServerError.InvalidTxnStatus, f"Expect Txn `{txn}` to be in OPEN status but it is in {meta.status.value} status"
            )
        return meta

    def _found(self, txn: TxnId) -> TransactionMetadata:
        self.check_coordinator(txn.most_bits)
        meta = self._transactions.get(txn)
        if meta is None:
            raise TransactionRefused(ServerError.TransactionNotFound, f"The transaction with this txdID `{txn}`not found ")  # sic
        return meta

    def is_open(self, txn: TxnId) -> bool:
        """Whether ``txn`` is open: sends and acknowledgements in it are taken."""
        meta = self._transactions.get(txn)
        return meta is not None and meta.status is TxnStatus.OPEN

    async def add_partitions(self, txn: TxnId, partitions: list[str]) -> None:
        """Register partitions the open transaction produces to."""
        meta = self._open(txn)
        new = [p for p in partitions if p not in meta.partitions]
        if new:
            meta.partitions.extend(new)
            await self._log.save(meta)

    async def add_subscriptions(self, txn: TxnId, subscriptions: list[tuple[str, str]]) -> None:
        """Register subscriptions the open transaction acknowledges on."""
        meta = self._open(txn)
        new = [s for s in subscriptions if s not in meta.subscriptions]
        if new:
            meta.subscriptions.extend(new)
            await self._log.save(meta)

    async def end(self, txn: TxnId, commit: bool) -> None:
        """Commit or abort ``txn``; a second request for the same end waits for the first."""
        await self._end(self._found(txn), commit)

    async def _end(self, meta: TransactionMetadata, commit: bool) -> None:
        txn = meta.txn
        ending = TxnStatus.COMMITTING if commit else TxnStatus.ABORTING
        if meta.status is not TxnStatus.OPEN and meta.status is not ending:
            raise TransactionRefused(
                ServerError.InvalidTxnStatus,
                f"Expect Txn `{txn}` to be in OPEN or {ending.value} status but it is in {meta.status.value} status",
            )
        if meta.status is TxnStatus.OPEN:
            meta.status = ending
            timer = self._timers.pop(txn, None)
            if timer is not None:
                timer.cancel()
            await self._log.save(meta)
        self._spawn_end(txn, commit)  # again, after an end that failed part way
        await asyncio.shield(self._ending[txn])

    def _spawn_end(self, txn: TxnId, commit: bool) -> None:
        if txn not in self._ending:
            self._ending[txn] = asyncio.ensure_future(self._finish(txn, commit))

    async def _finish(self, txn: TxnId, commit: bool) -> None:
        meta = self._transactions[txn]
        try:
            await self._end_participants(meta, commit)
            meta.status = TxnStatus.COMMITTED if commit else TxnStatus.ABORTED
            await self._log.save(meta)
        finally:
            del self._ending[txn]
        del self._transactions[txn]

    async def _end_participants(self, meta: TransactionMetadata, commit: bool) -> None:
        await asyncio.gather(
            *(self._participants.end_on_partition(topic, meta.txn, commit) for topic in meta.partitions),
            *(self._participants.end_on_subscription(topic, sub, meta.txn, commit) for topic, sub in meta.subscriptions),
        )

    # ---- timeouts ----

    def _schedule_timeout(self, meta: TransactionMetadata) -> None:
        delay = max(0.0, (meta.timeout_at - now_ms()) / 1000)
        self._timers[meta.txn] = asyncio.get_running_loop().call_later(delay, self._time_out, meta.txn)

    def _time_out(self, txn: TxnId) -> None:
        self._timers.pop(txn, None)
        meta = self._transactions.get(txn)
        if meta is not None and meta.status is TxnStatus.OPEN:
            log.info("transaction %s timed out: aborting it", txn)
            # Not through end(): a coordinator no longer configured still aborts what its log left open.
            asyncio.ensure_future(self._end(meta, commit=False)).add_done_callback(_log_failure)

    def close(self) -> None:
        """Stop the timeout timers (the broker stops)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    # ---- admin ----

    def metadata(self, txn: TxnId) -> TransactionMetadata:
        """The transaction, not yet ended; raises TransactionRefused (TransactionNotFound) otherwise."""
        return self._found(txn)

    def transactions_of(self, tc_id: int) -> list[TransactionMetadata]:
        """The transactions of coordinator ``tc_id`` not yet ended."""
        return [meta for txn, meta in self._transactions.items() if txn.most_bits == tc_id]

    def next_sequence(self, tc_id: int) -> int:
        """The sequence the coordinator's next transaction gets."""
        return self._next_sequence[tc_id]


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("ending a transaction failed: %s", task.exception())
