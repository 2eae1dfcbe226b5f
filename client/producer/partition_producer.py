"""The producer of one partition (or of a non-partitioned topic).

It owns the partition's batch container and pending queue, its sequence ids and its broker
connection. Sends run on the caller's thread under the producer's lock: the message is appended
to the batch container and, when a trigger fires, the batch is built, compressed and queued right
there; its frame is written by that thread once the lock is released (one thread writes at a
time, in queue order), so a socket that is slow to drain never holds up receipts. Receipts arrive on the connection's reader thread, which completes the head
op and runs its callbacks. The client's single timer flushes batches on their max delay and fails
ops whose send timeout passed. A lost connection starts a reconnect (with backoff); once the
broker accepts the producer again, every pending op is written again in order, and new sequence
ids continue after the broker's ``last_sequence_id`` so broker dedup keeps each message once.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..backoff import Backoff
from ..connection import Connection
from ..exceptions import (
    RETRYABLE,
    AlreadyClosed,
    ConnectError,
    MessageTooBig,
    PulsarException,
    Result,
    Timeout,
    exception_for,
    result_for_server_error,
)
from ..protocol import commands
from ..protocol.batch import set_message_fields, single_header, single_header_with
from ..protocol.checksum import crc32c
from ..protocol.compression import CompressionType, compress
from ..protocol.frames import encode_entry, encode_payload_command, encode_plain_metadata
from ..protocol.message_id import MessageId
from ..protocol.PulsarApi_pb2 import BaseCommand, KeyValue, MessageMetadata
from .batch_container import BatchContainer
from .chunking import chunk_size_for, split_into_chunks
from .config import ProducerConfig
from .limits import MemoryLimit, PendingLimit
from .pending import OpSend, PendingQueue
from .stats import ProducerStats

__all__ = ["PartitionProducer", "SendCallback"]

log = logging.getLogger(__name__)

# Command types read off the message class: the same ints, without the enum wrapper's slow lookup.
T = BaseCommand
SendCallback = Callable[[Result, "MessageId | None"], None]
_U64 = 1 << 64
# Producer ids only need to be unique per connection; one process-wide counter makes them so.
_PRODUCER_IDS = itertools.count(1)
# Room left under the broker's max message size for a batch's metadata and compression overhead.
_BATCH_HEADROOM = 16 * 1024
# Reconnect attempts stop on these: retrying cannot help.
_RECONNECT_RETRYABLE = RETRYABLE | {Result.LookupError, Result.ProducerBusy}


class PartitionProducer:
    """Sends to one topic partition; used through :class:`~.producer.Producer`."""

    def __init__(
        self,
        client: Any,
        topic: str,
        partition: int,
        config: ProducerConfig,
        pending_limit: PendingLimit,
        memory: MemoryLimit,
        stats: ProducerStats,
    ):
        self.topic = topic
        self.partition = partition
        self.pending_limit = pending_limit
        self._client = client
        self._config = config
        self._memory = memory
        self._stats = stats
        self._timer = client.timer
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._flush_waiters = 0
        self._pending = PendingQueue()
        self._batch = (
            BatchContainer(config.batching_max_messages, config.batching_max_allowed_size_in_bytes)
            if config.batching_enabled
            else None
        )
        self._batch_timer_armed = False
        self._batch_delay = config.batching_max_publish_delay_ms / 1000
        self._compression = config.compression_type
        self._send_timeout = config.send_timeout
        self._timeout_armed = False
        self._connection: Connection | None = None
        self._ready = False
        # Frames queued under the lock, written after it by one thread at a time.
        self._unsent: list[bytes] = []
        self._writing = False
        self._producer_id = -1
        self._max_message_size = 0
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
                epoch=self._epoch,
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
            self._max_message_size = connection.max_message_size
            if self._batch is not None:
                self._batch.max_bytes = min(
                    self._config.batching_max_allowed_size_in_bytes,
                    max(1, connection.max_message_size - _BATCH_HEADROOM),
                )
            self._unsent = []  # for the old connection: every pending op goes out again below
            if len(self._pending):
                log.info("%s: resending %d pending ops", self.topic, len(self._pending))
                connection.send(b"".join(self._frame(op) for op in self._pending))
            self._ready = True

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

    def send_async(
        self,
        content: bytes,
        callback: SendCallback,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        flush: bool = False,
    ) -> None:
        """Queue one message; ``callback(result, message_id)`` runs when it completes (None: nobody waits).

        ``flush`` sends the batch at once (a sync send has nothing to wait for).
        """
        size = len(content)
        error = self._reserve(size)
        if error is not None:
            _call_failed(callback, error)
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
            batch = self._batch
            if batch is not None and batch.accepts(size):
                if properties is None and partition_key is None and ordering_key is None and event_timestamp is None:
                    header = single_header(size, sequence_id)
                else:
                    header = single_header_with(size, sequence_id, properties, partition_key, ordering_key, event_timestamp)
                if not batch.has_space(len(header) + size):
                    self._flush_batch_locked()
                if not self._batch_timer_armed:
                    self._arm_batch_timer(self._batch_delay)
                # Past its max delay the batch goes now, from this thread, rather than on the timer's.
                if (
                    batch.add(header, content, callback, sequence_id)
                    or flush
                    or time.monotonic() - batch.first_added >= self._batch_delay
                ):
                    self._flush_batch_locked()
            else:
                if batch is not None and len(batch):
                    self._flush_batch_locked()  # keep order: the batch was sent first
                self._send_single_locked(
                    content, callback, sequence_id, properties, partition_key, ordering_key, event_timestamp
                )
        except BaseException as exc:
            lock.release()
            self._release(1, size)
            if not isinstance(exc, PulsarException):
                raise
            _call_failed(callback, exc)
        else:
            lock.release()
            if self._unsent:
                self._write_unsent()

    def _reserve(self, size: int) -> PulsarException | None:
        """Take a pending slot and ``size`` bytes of client memory, or say why not."""
        pending = self.pending_limit
        if pending.try_acquire(1):  # the common case: both fit at once
            if self._memory.try_acquire(size):
                return None
            pending.release(1)
        if self._config.block_if_queue_full:
            timeout = self._send_timeout
            deadline = None if timeout is None else time.monotonic() + timeout
            if not self.pending_limit.acquire(1, deadline):
                return Timeout(f"no pending slot on {self.topic} within the send timeout of {timeout:g} s")
            if not self._memory.acquire(size, deadline):
                self.pending_limit.release(1)
                return Timeout(f"no client memory for {size} bytes within the send timeout of {timeout:g} s")
            return None
        if not self.pending_limit.try_acquire(1):
            return exception_for(
                Result.ProducerQueueIsFull,
                f"{self.topic} has {self.pending_limit.limit} messages pending (max_pending_messages)",
            )
        if not self._memory.try_acquire(size):
            self.pending_limit.release(1)
            return exception_for(
                Result.MemoryBufferIsFull,
                f"client memory limit of {self._memory.limit} bytes is used up (memory_limit_bytes)",
            )
        return None

    def _release(self, permits: int, memory: int) -> None:
        if permits:
            self.pending_limit.release(permits)
        if memory:
            self._memory.release(memory)

    def _arm_batch_timer(self, delay: float) -> None:
        # One timer at a time, not one per batch: when it fires it flushes the batch if its first
        # message has waited long enough, and otherwise waits for the rest of that time.
        try:
            self._timer.call_later(delay, self._on_batch_timer)
            self._batch_timer_armed = True
        except RuntimeError:  # the client's timer is closed: the client is closing
            pass

    def _on_batch_timer(self) -> None:
        with self._lock:
            self._batch_timer_armed = False
            batch = self._batch
            if batch is not None and len(batch):
                wait = batch.first_added + self._batch_delay - time.monotonic()
                if wait > 0.0005:
                    self._arm_batch_timer(wait)
                else:
                    self._flush_batch_locked()
        self._write_unsent()

    def _flush_batch_locked(self) -> None:
        assert self._batch is not None
        batch = self._batch.drain()
        count = batch.num_messages
        payload = compress(self._compression, batch.payload)
        metadata = encode_plain_metadata(
            self._name,  # type: ignore[arg-type]  # set once the broker accepted the producer
            batch.first_sequence_id,
            int(time.time() * 1000),
            int(self._compression),
            len(batch.payload),
            count,
            batch.last_sequence_id if batch.last_sequence_id > batch.first_sequence_id else None,
        )
        self._stats.record_written(count, len(batch.payload), len(payload), True)
        entry = encode_entry(metadata, payload)
        self._append_locked(
            OpSend(
                batch.first_sequence_id,
                batch.last_sequence_id,
                count,
                True,
                entry,
                crc32c(entry),
                batch.callbacks,
                count,
                batch.payload_bytes,
                batch.first_added,
                self._deadline(batch.first_added),
            )
        )

    def _send_single_locked(
        self,
        content: bytes,
        callback: SendCallback,
        sequence_id: int,
        properties: Mapping[str, str] | None,
        partition_key: str | None,
        ordering_key: bytes | None,
        event_timestamp: int | None,
    ) -> None:
        payload = compress(self._compression, content)
        size = len(content)
        self._stats.record_written(1, size, len(payload), False)
        now = time.monotonic()
        deadline = self._deadline(now)
        limit = self._max_message_size
        plain = properties is None and partition_key is None and ordering_key is None and event_timestamp is None
        if len(payload) <= limit and plain:
            metadata = encode_plain_metadata(
                self._name, sequence_id, int(time.time() * 1000), int(self._compression), size  # type: ignore[arg-type]
            )
            entry = encode_entry(metadata, payload)
            op = OpSend(sequence_id, sequence_id, 1, False, entry, crc32c(entry), [callback], 1, size, now, deadline)
            self._append_locked(op)
            return
        metadata = self._new_metadata(sequence_id, size)
        set_message_fields(metadata, properties, partition_key, ordering_key, event_timestamp)
        if len(payload) <= limit:
            entry = encode_entry(metadata, payload)
            op = OpSend(sequence_id, sequence_id, 1, False, entry, crc32c(entry), [callback], 1, size, now, deadline)
            self._append_locked(op)
            return
        if not self._config.chunking_enabled:
            raise MessageTooBig(
                f"message of {len(payload)} bytes exceeds the broker's max message size of {limit} bytes "
                "(enable chunking_enabled with batching off to send it in chunks)"
            )
        payload = bytes(payload)
        chunks = list(split_into_chunks(payload, metadata, chunk_size_for(limit, metadata)))
        last = len(chunks) - 1
        for chunk_id, (chunk_metadata, part) in enumerate(chunks):
            entry = encode_entry(chunk_metadata, part.tobytes())
            # Only the last chunk completes the message: its callback, slot and memory.
            done = chunk_id == last
            op = OpSend(
                sequence_id,
                sequence_id,
                1,
                False,
                entry,
                crc32c(entry),
                [callback] if done else [],
                1 if done else 0,
                size if done else 0,
                now,
                deadline,
                chunk=True,
            )
            self._append_locked(op)

    def _new_metadata(self, sequence_id: int, uncompressed_size: int) -> MessageMetadata:
        metadata = MessageMetadata(
            producer_name=self._name, sequence_id=sequence_id, publish_time=int(time.time() * 1000)
        )
        if self._compression != CompressionType.NONE:
            metadata.compression = int(self._compression)
            metadata.uncompressed_size = uncompressed_size
        return metadata

    def _deadline(self, created: float) -> float | None:
        return None if self._send_timeout is None else created + self._send_timeout

    def _append_locked(self, op: OpSend) -> None:
        """Queue an op; its frame waits in ``_unsent`` until the caller, out of the lock, writes it."""
        self._pending.append(op)
        if self._ready and self._connection is not None:
            self._unsent.append(self._frame(op))
        if self._send_timeout is not None and not self._timeout_armed:
            self._arm_timeout(op.deadline)

    def _write_unsent(self) -> None:
        """Write the queued frames, in order, without holding the lock (call it after releasing it).

        One thread writes at a time; frames queued meanwhile by others are written by it too.
        """
        lock = self._lock
        with lock:
            if self._writing or not self._unsent:
                return
            self._writing = True
        try:
            while True:
                with lock:
                    frames, self._unsent = self._unsent, []
                    connection = self._connection
                    if not frames or connection is None:
                        self._writing = False
                        return
                # Lost frames (a closed connection) go out again with every pending op on reconnect.
                connection.send(frames[0] if len(frames) == 1 else b"".join(frames))
        except BaseException:
            with lock:
                self._writing = False
            raise

    def _frame(self, op: OpSend) -> bytes:
        command = commands.encode_send(
            self._producer_id,
            op.sequence_id,
            op.num_messages,
            op.highest_sequence_id if op.batched else None,
            op.chunk,
        )
        return encode_payload_command(command, op.entry, op.checksum)

    # ---- timeouts ----

    def _arm_timeout(self, deadline: float | None) -> None:
        if deadline is None:
            return
        try:
            self._timer.call_later(max(0.0, deadline - time.monotonic()), self._on_send_timeout)
            self._timeout_armed = True
        except RuntimeError:  # client closing
            pass

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

    def handle_receipt(self, body: Any) -> None:
        """A SEND_RECEIPT: complete the head op if it matches (reader thread)."""
        sequence_id = body.sequence_id
        stale_connection = None
        with self._lock:
            op = self._pending.head()
            if op is None or sequence_id < op.sequence_id:
                return  # the receipt of an op that already timed out
            if not op.matches(sequence_id):
                # A receipt from the future: the broker lost ops; resend from a new connection.
                log.warning(
                    "%s: receipt for sequence id %d while expecting %d..%d; reconnecting",
                    self.topic,
                    sequence_id,
                    op.sequence_id,
                    op.highest_sequence_id,
                )
                stale_connection = self._connection
            else:
                self._pending.pop_head()
                if op.highest_sequence_id > self._last_published:
                    self._last_published = op.highest_sequence_id
        if stale_connection is not None:
            stale_connection.close()
            return
        message_id = body.message_id
        self._succeed(op, _signed(message_id.ledgerId), _signed(message_id.entryId))

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

    def _succeed(self, op: OpSend, ledger_id: int, entry_id: int) -> None:
        self._release(op.permits, op.memory)
        if op.permits:
            self._stats.record_acked(op.permits, time.monotonic() - op.created)
        callbacks = op.callbacks
        partition = self.partition
        ok = Result.Ok
        count = len(callbacks) if op.batched else 0
        # Message ids are built only for callbacks that exist.
        for index, callback in enumerate(callbacks) if any(callbacks) else ():
            if callback is None:
                continue
            try:
                if count:
                    callback(ok, MessageId(partition, ledger_id, entry_id, index, count))
                else:
                    callback(ok, MessageId(partition, ledger_id, entry_id))
            except Exception:  # one failing callback must not cost the others theirs, nor kill the reader
                log.exception("send callback failed")
        self._mark_done([op])

    def _fail(self, ops: list[OpSend], error: PulsarException) -> None:
        for op in ops:
            self._release(op.permits, op.memory)
            if op.permits:
                self._stats.record_failed(op.permits)
            for callback in op.callbacks:
                _call_failed(callback, error)
        self._mark_done(ops)

    def _mark_done(self, ops: list[OpSend]) -> None:
        # Only after the callbacks ran, so a flush() returns with every callback called.
        with self._lock:
            for op in ops:
                op.done = True
            if self._flush_waiters:
                self._drained.notify_all()

    # ---- flush and close ----

    def flush_batch(self) -> None:
        """Send the current batch now, without waiting for it."""
        with self._lock:
            if self._batch is not None and len(self._batch):
                self._flush_batch_locked()
        self._write_unsent()

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

    def close(self) -> None:
        """Flush, then close the producer on the broker; later sends fail with AlreadyClosed."""
        with self._lock:
            if self._closing:
                return
        self.flush()
        with self._lock:
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
            return self._pending.messages() + (len(self._batch) if self._batch is not None else 0)

    def is_full(self) -> bool:
        """Whether the next message would wait for (or fail on) a pending slot."""
        return self.pending_limit.is_full()


def _call_failed(callback: SendCallback | None, error: PulsarException) -> None:
    if callback is None:
        return
    fail = getattr(callback, "fail", None)
    try:
        if fail is not None:
            fail(error)  # our own waiters keep the exception's message
        else:
            callback(error.result, None)
    except Exception:
        log.exception("send callback failed")


def _signed(value: int) -> int:
    return value - _U64 if value >= 1 << 63 else value
