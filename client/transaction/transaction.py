"""A transaction as the application holds it: its state, what it has touched, its pending operations.

Semantics follow the Java client's ``TransactionImpl``:

- a transaction is ``OPEN`` until ``commit()`` or ``abort()``; sends and acknowledgements in any
  other state fail with :class:`~..exceptions.InvalidTxnStatusError`, as do a second commit and an
  abort after a commit;
- each partition a send goes to, and each subscription an acknowledgement is made on, is
  registered with the transaction's coordinator once, before the first operation there;
- ``commit()`` first waits for every send and acknowledgement made in the transaction; if one of
  them failed, the transaction is aborted instead and ``commit()`` raises that operation's error;
- after its timeout the transaction is ``TIME_OUT`` here (the coordinator aborts it on its side);
- an abort has the consumers that acknowledged cumulatively in it take their messages again, as
  the broker redelivers what the aborted acknowledgements had covered.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from ..exceptions import InvalidTxnStatusError, PulsarException, Result, Timeout, exception_for
from .ids import TxnId

if TYPE_CHECKING:
    from ..timer import Timer, TimerHandle
    from .coordinator import CoordinatorClient

__all__ = ["CumulativeAcker", "Transaction", "TransactionState"]

log = logging.getLogger(__name__)
R = TypeVar("R")


class TransactionState(enum.Enum):
    """Where a transaction is in its life (the Java client's ``Transaction.State``)."""

    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    ABORTING = "ABORTING"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"
    ERROR = "ERROR"
    TIME_OUT = "TIME_OUT"


class CumulativeAcker(Protocol):
    """A partition consumer that acknowledged cumulatively in a transaction."""

    def redeliver_all(self) -> None:
        """Drop the messages it holds and have the broker deliver every unacknowledged one again."""
        ...


# End results after which the transaction cannot be ended again (the coordinator no longer knows it).
_FINAL_ERRORS = frozenset({Result.TransactionNotFound, Result.InvalidTxnStatusError})


class Transaction:
    """One open transaction, from ``Client.new_transaction``; thread-safe.

    Pass it as ``transaction=`` to ``Producer.send``/``send_async`` and to
    ``Consumer.acknowledge``/``acknowledge_cumulative``, then ``commit()`` or ``abort()`` it.
    """

    def __init__(self, coordinator: CoordinatorClient, txn_id: TxnId, timeout_ms: int, timer: Timer, operation_timeout: float):
        self._coordinator = coordinator
        self._id = txn_id
        self._timeout_ms = timeout_ms
        self._operation_timeout = operation_timeout
        self._state = TransactionState.OPEN
        self._lock = threading.Lock()
        self._ops_done = threading.Condition(self._lock)
        self._pending_ops = 0
        self._failure: PulsarException | None = None
        # Registrations are round trips to the coordinator: under a lock of their own, never the state's,
        # which the connections' reader threads take to complete operations.
        self._register_lock = threading.Lock()
        self._partitions: set[str] = set()
        self._subscriptions: set[tuple[str, str]] = set()
        self._cumulative_ackers: list[CumulativeAcker] = []
        self._timeout: TimerHandle | None = timer.call_later(timeout_ms / 1000, self._time_out)

    # ---- what the application sees ----

    @property
    def id(self) -> TxnId:
        """The transaction's id (most and least significant bits)."""
        return self._id

    def txn_id(self) -> tuple[int, int]:
        """``(most_bits, least_bits)`` of the id, as Java's ``getTxnID()`` gives them."""
        return (self._id.most_bits, self._id.least_bits)

    @property
    def state(self) -> TransactionState:
        """The transaction's state."""
        return self._state

    @property
    def timeout_ms(self) -> int:
        """The timeout the transaction was opened with, in milliseconds."""
        return self._timeout_ms

    def commit(self) -> None:
        """Make every send and acknowledgement of the transaction take effect.

        Raises:
            InvalidTxnStatusError: the transaction is not open (committed, aborted, timed out).
            PulsarException: an operation in the transaction failed: it was aborted instead.
        """
        self._begin_end(TransactionState.COMMITTING)
        failure = self._wait_for_ops()
        if failure is not None:
            log.warning("transaction %s: an operation failed (%s); aborting instead of committing", self._id, failure)
            self._end(commit=False)
            raise exception_for(failure.result, f"transaction {self._id} was aborted, an operation in it failed: {failure}") from failure
        self._end(commit=True)

    def abort(self) -> None:
        """Undo every send and acknowledgement of the transaction.

        Raises:
            InvalidTxnStatusError: the transaction is not open (committed, aborted, timed out).
        """
        self._begin_end(TransactionState.ABORTING)
        self._wait_for_ops()
        self._end(commit=False)

    # ---- what sends and acknowledgements use ----

    def check_open(self) -> None:
        """Raise InvalidTxnStatusError unless operations may still join the transaction."""
        state = self._state
        if state is not TransactionState.OPEN:
            raise InvalidTxnStatusError(f"transaction {self._id} is {state.value}, expected OPEN")

    def register_partition(self, topic: str) -> None:
        """Tell the coordinator (once per partition) that the transaction sends to ``topic``."""
        self._register(self._partitions, topic, lambda: self._coordinator.add_partition(self._id, topic))

    def register_subscription(self, topic: str, subscription: str) -> None:
        """Tell the coordinator (once per pair) that the transaction acknowledges on ``subscription`` of ``topic``."""
        key = (topic, subscription)
        self._register(self._subscriptions, key, lambda: self._coordinator.add_subscription(self._id, topic, subscription))

    def register_cumulative_acker(self, consumer: CumulativeAcker) -> None:
        """Remember a consumer that acknowledged cumulatively, to have it take its messages again on abort."""
        with self._lock:
            if consumer not in self._cumulative_ackers:
                self._cumulative_ackers.append(consumer)

    def run_op(self, operation: Callable[[], R]) -> R:
        """Run an operation that completes before it returns (an acknowledgement awaiting its response),
        counted in the transaction: a failure makes ``commit()`` abort."""
        self.op_started()
        try:
            result = operation()
        except PulsarException as exc:
            self.op_finished(exc)
            raise
        self.op_finished(None)
        return result

    def op_started(self) -> None:
        """Count an operation in flight (a send until its receipt); ``op_finished`` ends it."""
        with self._lock:
            self.check_open()
            self._pending_ops += 1

    def op_finished(self, error: PulsarException | None) -> None:
        """End an operation counted by ``op_started``; ``error`` when it failed."""
        with self._lock:
            self._pending_ops -= 1
            if error is not None and self._failure is None:
                self._failure = error
            self._ops_done.notify_all()

    # ---- internals ----

    def _register(self, done: set[R], key: R, request: Callable[[], None]) -> None:
        self.check_open()
        with self._register_lock:
            if key in done:
                return
            try:
                request()
            except PulsarException as exc:
                with self._lock:
                    self._failure = self._failure or exc
                raise
            done.add(key)

    def _begin_end(self, ending: TransactionState) -> None:
        """Enter COMMITTING or ABORTING, from OPEN or from the same state (an end that failed may be retried)."""
        with self._lock:
            if self._state is not TransactionState.OPEN and self._state is not ending:
                raise InvalidTxnStatusError(f"transaction {self._id} is {self._state.value}, expected OPEN")
            self._state = ending
            if self._timeout is not None:
                self._timeout.cancel()
                self._timeout = None

    def _wait_for_ops(self) -> PulsarException | None:
        """Wait for the operations in flight; the first failure among them, if any."""
        deadline = time.monotonic() + self._operation_timeout
        with self._lock:
            while self._pending_ops > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return Timeout(f"{self._pending_ops} operations of transaction {self._id} did not complete")
                self._ops_done.wait(left)
            return self._failure

    def _end(self, commit: bool) -> None:
        try:
            self._coordinator.end(self._id, commit)
        except PulsarException as exc:
            if exc.result in _FINAL_ERRORS:
                self._state = TransactionState.ERROR
            raise
        self._state = TransactionState.COMMITTED if commit else TransactionState.ABORTED
        if not commit:
            with self._lock:
                ackers, self._cumulative_ackers = self._cumulative_ackers, []
            for consumer in ackers:
                consumer.redeliver_all()

    def _time_out(self) -> None:
        with self._lock:
            if self._state is TransactionState.OPEN:
                self._state = TransactionState.TIME_OUT
                self._timeout = None

    def __repr__(self) -> str:
        return f"Transaction(id={self._id}, state={self._state.value})"
