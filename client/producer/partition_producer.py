"""The producer of one partition (or of a non-partitioned topic).

It owns the partition's pending queue, its sequence ids and its broker connection. Sends run on
the caller's thread under the producer's lock: the :class:`~.accumulator.MessageAccumulator`
batches the message and, when a trigger fires, queues the built op right there, and its frame
joins the connection's write queue under the same lock, so frames leave in queue order. The
connection's writer gathers the frames of a burst into one write; a sync send or a flush writes
them itself once the lock is released (see ``frame_writer``), so a lone message leaves at once. Receipts arrive on the connection's
reader thread, which completes the head op and runs its callbacks. The client's single timer
flushes batches on their max delay and fails ops whose send timeout passed. A lost connection
starts a reconnect (with backoff); once the broker accepts the producer again, every pending op
is written again in order, and new sequence ids continue after the broker's ``last_sequence_id``
so broker dedup keeps each message once.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..backoff import Backoff
from ..connection import Connection
from ..exceptions import (
    RETRYABLE,
    AlreadyClosed,
    ConnectError,
    PulsarException,
    Result,
    Timeout,
    exception_for,
    result_for_server_error,
)
from ..protocol.message_id import MessageId
from ..protocol.PulsarApi_pb2 import BaseCommand, KeyValue
from ..protocol.wire import SendEncoder, signed64
from .accumulator import MessageAccumulator
from .config import ProducerConfig
from .limits import PendingLimit, SendQuota
from .message import Outgoing
from .pending import OpSend, PendingQueue, fail_callback
from .stats import ProducerStats

if TYPE_CHECKING:
    from ..services import ClientServices

__all__ = ["PartitionProducer", "SendCallback"]

log = logging.getLogger(__name__)

# Command types read off the message class: the same ints, without the enum wrapper's slow lookup.
T = BaseCommand
SendCallback = Callable[[Result, "MessageId | None"], None]
# Producer ids only need to be unique per connection; one process-wide counter makes them so.
_PRODUCER_IDS = itertools.count(1)
# Reconnect attempts stop on these: retrying cannot help.
_RECONNECT_RETRYABLE = RETRYABLE | {Result.LookupError, Result.ProducerBusy}


class PartitionProducer:
    """Sends to one topic partition, within ``pending_limit`` and the client's memory limit; used through
    :class:`~.producer.Producer`."""

    def __init__(
        self,
        client: ClientServices,
        topic: str,
        partition: int,
        config: ProducerConfig,
        pending_limit: PendingLimit,
        stats: ProducerStats,
    ):
        self.topic = topic
        self.partition = partition
        self._client = client
        self._config = config
        self._quota = SendQuota(topic, pending_limit, client.memory_limit, config.block_if_queue_full, config.send_timeout)
        self._stats = stats
        self._timer = client.timer
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._flush_waiters = 0
        self._pending = PendingQueue()
        self._accumulator = MessageAccumulator(config, stats, self._append_locked)
        self._batch_timer_armed = False
        self._send_timeout = config.send_timeout
        self._timeout_armed = False
        self._connection: Connection | None = None
        self._ready = False
        self._producer_id = -1
        self._send = SendEncoder(0)  # replaced when the broker accepts the producer, before any frame is written
        self._epoch = 0
        self._name = config.producer_name
        initial = config.initial_sequence_id
        self._next_sequence_id = initial + 1 if initial is not None else 0
        self._last_published = initial if initial is not None else -1
        self._metadata = [KeyValue(key=k, value=v) for k, v in config.properties.items()]
        self._closing = False
        self._closed = threading.Event()
        self._failure: PulsarException | None = None
        self._reconnecting = False

    # ---- connecting ----

    def start(self) -> None:
        """Register with the broker (retrying retryable errors until the operation timeout)."""
        self._client.with_retries(f"creating a producer on {self.topic}", self._connect_once)

    def _connect_once(self) -> None:
        connection = self._client.lookup(self.topic)
        producer_id = next(_PRODUCER_IDS)
        connection.producers[producer_id] = self  # before PRODUCER, so no receipt can be missed
        try:
            response = connection.call(
                T.PRODUCER,
                self._client.operation_timeout,
                topic=self.topic,
                producer_id=producer_id,
                producer_name=self._name,
                user_provided_producer_name=self._config.producer_name is not None,
                producer_access_mode=int(self._config.access_mode),
                metadata=self._metadata or None,
                schema=self._config.declared_schema,
                epoch=self._epoch, encrypted=self._config.encrypted,
            )
        except BaseException as exc:
            connection.producers.pop(producer_id, None)
            if isinstance(exc, Timeout):
                # The broker may have made the producer after all; unclosed, it would hold the
                # topic (an Exclusive one would refuse every later producer).
                connection.request(T.CLOSE_PRODUCER, producer_id=producer_id)
            raise
        self._epoch += 1
        with self._lock:
            if self._closed.is_set():
                connection.producers.pop(producer_id, None)
                return
            if connection.closed:  # closed before it could tell us: connect again elsewhere
                raise ConnectError(f"connection to {connection.address} closed while creating the producer on {self.topic}")
            # Later connections reuse the broker-assigned name: dedup is keyed by it.
            self._name = response.producer_name
            broker_last = response.last_sequence_id
            if broker_last >= 0:
                self._last_published = max(self._last_published, broker_last)
                self._next_sequence_id = max(self._next_sequence_id, broker_last + 1)
            self._connection = connection
            self._producer_id = producer_id
            self._send = SendEncoder(producer_id)
            self._accumulator.connected(self._name, connection.max_message_size, response.schema_version, broker_last)
            if len(self._pending):
                log.info("%s: resending %d pending ops", self.topic, len(self._pending))
                connection.send(b"".join(op.frame(self._send) for op in self._pending))
            self._ready = True
        connection.write_now()

    def connection_lost(self, connection: Connection) -> None:
        """The connection closed: reconnect unless closing (called on its reader thread)."""
        with self._lock:
            if connection is not self._connection:
                return
            self._connection = None
            self._ready = False
        self._start_reconnect()

    def handle_broker_close(self) -> None:
        """The broker closed this producer (e.g. topic unloaded): reconnect."""
        with self._lock:
            self._connection = None
            self._ready = False
        self._start_reconnect()

    def _start_reconnect(self) -> None:
        with self._lock:
            if self._reconnecting or self._closing or self._closed.is_set():
                return
            self._reconnecting = True
        # Lookups block; a short-lived thread keeps them off the timer and reader threads.
        threading.Thread(target=self._reconnect_loop, name=f"pulsar-reconnect-{self.topic}", daemon=True).start()

    def _reconnect_loop(self) -> None:
        backoff = Backoff()
        while not self._closed.wait(backoff.next()):
            try:
                self._connect_once()
            except PulsarException as exc:
                if exc.result not in _RECONNECT_RETRYABLE:
                    log.error("%s: producer cannot reconnect: %s", self.topic, exc)
                    self._fail_permanently(exc)
                    break
                log.info("%s: reconnect failed (%s); retrying", self.topic, exc)
                continue
            with self._lock:
                # A loss while connecting found this loop running and left the reconnect to it.
                if self._connection is not None:
                    self._reconnecting = False
                    return
        with self._lock:
            self._reconnecting = False

    def _fail_permanently(self, error: PulsarException) -> None:
        with self._lock:
            self._failure = error
            failed = self._pending.pop_all()
        self._fail(failed, error)

    # ---- sending ----

    def send_async(self, message: Outgoing, callback: SendCallback | None, flush: bool = False) -> None:
        """Queue one message (an :class:`~.message.OutgoingMessage`, or bytes for a message of nothing
        but its content); ``callback(result, message_id)`` runs when it completes (None: nobody waits).

        ``flush`` sends the batch at once (a sync send has nothing to wait for). The message keeps
        the sequence id it asked for, if any; otherwise it gets the partition's next one.
        """
        content: bytes | None
        if isinstance(message, bytes):
            content, sequence_id = message, None
        else:
            content, sequence_id = message.content, message.sequence_id
        size = 0 if content is None else len(content)
        error = self._quota.reserve(size)
        if error is not None:
            fail_callback(callback, error)
            return
        lock = self._lock
        lock.acquire()  # cheaper than ``with`` on this path
        try:
            if self._closing or self._failure is not None:
                raise self._failure or AlreadyClosed(f"producer on {self.topic} is closed")
            if sequence_id is None:
                sequence_id = self._next_sequence_id
                self._next_sequence_id = sequence_id + 1
            elif sequence_id >= self._next_sequence_id:
                self._next_sequence_id = sequence_id + 1
            batched = self._accumulator.add(message, sequence_id, callback, flush)
            # One batch timer at a time, not one per batch: when it fires it flushes the batch if
            # its first message has waited long enough, and otherwise waits for the rest of that time.
            if batched and not self._batch_timer_armed:
                self._batch_timer_armed = self._call_later(self._accumulator.batch_delay, self._on_batch_timer)
        except BaseException as exc:
            lock.release()
            self._write_queued(flush)
            self._quota.release(1, size)
            if not isinstance(exc, PulsarException):
                raise
            fail_callback(callback, exc)
        else:
            lock.release()
            self._write_queued(flush)

    def _call_later(self, delay: float, callback: Callable[[], None]) -> bool:
        """Schedule ``callback`` on the client's timer; False when the timer is closed (the client is closing)."""
        try:
            self._timer.call_later(delay, callback)
        except RuntimeError:
            return False
        return True

    def _on_batch_timer(self) -> None:
        with self._lock:
            self._batch_timer_armed = False
            wait = self._accumulator.flush_if_due()
            if wait is not None:
                self._batch_timer_armed = self._call_later(wait, self._on_batch_timer)
        self._write_queued(True)

    def _append_locked(self, op: OpSend) -> None:
        """Queue an op, and its frame on the connection (frames queued under the lock keep its order)."""
        self._pending.append(op)
        connection = self._connection
        if self._ready and connection is not None:
            # Lost frames (a closed connection) go out again with every pending op on reconnect.
            connection.send(op.frame(self._send))
        if self._send_timeout is not None and not self._timeout_armed:
            self._arm_timeout(op.deadline)

    def _write_queued(self, now: bool) -> None:
        """After releasing the lock: write the queued frames from this thread if they are due (``now``:
        in any case, for a sync send or a flush), else leave them to gather (see ``frame_writer``)."""
        connection = self._connection
        if connection is not None:
            if now:
                connection.write_now()
            else:
                connection.write_due()

    # ---- timeouts ----

    def _arm_timeout(self, deadline: float | None) -> None:
        if deadline is not None:
            self._timeout_armed = self._call_later(max(0.0, deadline - time.monotonic()), self._on_send_timeout)

    def _on_send_timeout(self) -> None:
        with self._lock:
            self._timeout_armed = False
            expired = self._pending.pop_expired(time.monotonic())
            head = self._pending.head()
            if head is not None:
                self._arm_timeout(head.deadline)
        if expired:
            self._fail(expired, Timeout(f"no receipt from the broker for {self.topic} within the send timeout"))

    # ---- receipts ----

    def handle_receipts(self, receipts: list[Any]) -> None:
        """SEND_RECEIPTs, in arrival order: complete the ops they match (reader thread).

        A run of receipts costs one round of the lock, of the limits and of the stats.
        """
        with self._lock:
            completed, unexpected = self._pending.pop_receipted(receipts)
            if completed:
                highest = completed[-1][0].highest_sequence_id
                if highest > self._last_published:
                    self._last_published = highest
            stale_connection = self._connection if unexpected is not None else None
        if completed:
            self._succeed(completed)
        if unexpected is not None:  # a receipt from the future: the broker lost ops; resend from a new connection
            log.warning("%s: receipt for sequence id %d ahead of the pending ones; reconnecting", self.topic, unexpected.sequence_id)
            if stale_connection is not None:
                stale_connection.close()

    def handle_send_error(self, body: Any) -> None:
        """A SEND_ERROR: a bad message fails its op; anything else is retried on a new connection."""
        result = result_for_server_error(body.error)
        error = exception_for(result, f"broker refused a message on {self.topic}: {body.message}")
        with self._lock:
            op = self._pending.head()
            connection = self._connection
            retry = result not in (Result.ChecksumError, Result.UnknownError)
            if not retry and op is not None and op.matches(body.sequence_id):
                self._pending.pop_head()
            else:
                op = None
        if op is not None:
            self._fail([op], error)
        elif retry and connection is not None:
            log.warning("%s: %s; reconnecting to resend", self.topic, error)
            connection.close()

    def _succeed(self, completed: list[tuple[OpSend, Any]]) -> None:
        permits = memory = 0
        now = time.monotonic()
        latencies = []
        answered = []  # the ops with a callback: send_async(..., None) has none, its receipt's id is not read
        for completion in completed:
            op = completion[0]
            if op.permits:
                permits += op.permits
                memory += op.memory
                latencies.append(now - op.created)
            if op.callbacks and any(op.callbacks):
                answered.append(completion)
        self._quota.release(permits, memory)
        if permits:
            self._stats.record_acked_ops(permits, latencies)
        partition = self.partition
        for op, receipt in answered:
            message_id = receipt.message_id
            op.succeed(partition, signed64(message_id.ledgerId), signed64(message_id.entryId))
        self._mark_done([op for op, _ in completed])

    def _fail(self, ops: list[OpSend], error: PulsarException) -> None:
        for op in ops:
            self._quota.release(op.permits, op.memory)
            if op.permits:
                self._stats.record_failed(op.permits)
            op.fail(error)
        self._mark_done(ops)

    def _mark_done(self, ops: list[OpSend]) -> None:
        # Only after the callbacks ran, so a flush() returns with every callback called. The lock
        # is taken only to wake a flush: a flush counts itself a waiter (under the lock) before
        # it reads ``done``, so it either sees the mark or is woken here.
        for op in ops:
            op.done = True
        if self._flush_waiters:
            with self._lock:
                self._drained.notify_all()

    # ---- flush and close ----

    def flush_batch(self) -> None:
        """Send the current batch now, without waiting for it."""
        with self._lock:
            self._accumulator.flush()
        self._write_queued(True)

    def flush(self) -> None:
        """Send the current batch and wait until every op queued so far is completed."""
        self.flush_batch()
        with self._lock:
            target = self._pending.tail()
            if target is None:
                return
            self._flush_waiters += 1
            try:
                while not target.done:
                    self._drained.wait()
            finally:
                self._flush_waiters -= 1

    def close(self, graceful: bool = True) -> None:
        """Flush, then close on the broker (``graceful`` False: neither); pending and later sends fail AlreadyClosed."""
        with self._lock:
            if self._closing:
                return
        if graceful:
            self.flush()
        with self._lock:
            self._ready = False  # so the open batch below is not written: it fails with the pending ops
            self._accumulator.flush()  # an open batch (left only by a shutdown) fails with the pending ops
            self._closing = True
            self._closed.set()
            connection, producer_id = self._connection, self._producer_id
            self._connection = None
            self._ready = False
            leftovers = self._pending.pop_all()
        self._fail(leftovers, AlreadyClosed(f"producer on {self.topic} was closed"))
        if connection is not None:
            connection.producers.pop(producer_id, None)
            try:
                if graceful:
                    connection.call(T.CLOSE_PRODUCER, self._client.operation_timeout, producer_id=producer_id)
            except PulsarException as exc:
                log.info("%s: CLOSE_PRODUCER failed: %s", self.topic, exc)

    # ---- state ----

    @property
    def producer_name(self) -> str:
        """The producer name (assigned by the broker unless given)."""
        return self._name or ""

    @property
    def last_sequence_id(self) -> int:
        """The highest sequence id the broker acknowledged (or reported at connect), -1 if none."""
        return self._last_published

    def is_connected(self) -> bool:
        """Whether the producer is registered on a live connection."""
        return self._ready

    def pending_messages(self) -> int:
        """Messages queued or awaiting their receipt."""
        with self._lock:
            return self._pending.messages() + len(self._accumulator)

    def is_full(self) -> bool:
        """Whether the next message would wait for (or fail on) a pending slot."""
        return self._quota.is_full()
