"""The send path of one partition producer up to its pending queue: batching, entries, send ops.

A message that may be batched waits in the batch container until a trigger fires: the batch is
full (messages or bytes), the next message does not fit, a sync send asks for it, or the first
message has waited the max publish delay (checked on each send here, and on the producer's batch
timer through :meth:`MessageAccumulator.flush_if_due`). A message for other clusters than the
batch's (its replicate_to) starts a new batch. A message whose sequence id the broker may already
hold (at most the highest one this producer sent, or the broker's ``last_sequence_id`` for the
producer's name) goes in a batch of its own, as the Java client sends it: the broker deduplicates a
batch by its first sequence id, so a batch reaching from a stored id to new ones would be taken for
a duplicate as a whole and its new messages never stored. Any other message, a delayed one among
them, becomes one op, or one per chunk, after the batch before it. Entries come from the
:class:`~.entry_builder.EntryBuilder`; each op is handed to ``queue`` as soon as it is formed, so
ops are queued in write order.

Not thread-safe: the partition producer calls it under its lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..crypto import MessageEncryptor
from ..protocol.batch import single_header, single_header_with
from .batch_container import BatchContainer, KeyBasedBatchContainer, SendCallback
from .config import BatchingType, ProducerConfig
from .delivery import Delivery
from .entry_builder import EntryBuilder
from .message import Outgoing, OutgoingMessage
from .pending import OpSend
from .stats import ProducerStats

__all__ = ["MessageAccumulator"]

# Room left under the broker's max message size for a batch's metadata and compression overhead.
_BATCH_HEADROOM = 16 * 1024
# A batch due within this many seconds is flushed now rather than on one more timer round.
_DUE_SLACK = 0.0005


class MessageAccumulator:
    """Turns one partition producer's messages into send ops, batching those it may.

    ``queue`` receives each op as it is formed; ``batch_delay`` is the max publish delay in seconds.
    """

    __slots__ = (
        "_queue",
        "_entries",
        "_key_b64",
        "_batch",
        "_batch_delivery",
        "_max_batch_bytes",
        "batch_delay",
        "_send_timeout",
        "_pushed_sequence_id",
        "_batch_may_be_duplicate",
    )

    def __init__(self, config: ProducerConfig, stats: ProducerStats, queue: Callable[[OpSend], None]):
        self._queue = queue
        reader = config.crypto_key_reader
        encryptor = MessageEncryptor(config.encryption_key, reader) if reader is not None and config.encrypted else None
        self._entries = EntryBuilder(config.compression_type, config.chunking_enabled, stats, config.key_value_separated, encryptor)
        # Partition keys are base64 (the keys of a SEPARATED key/value schema).
        self._key_b64 = config.key_value_separated
        self._batch: BatchContainer | KeyBasedBatchContainer | None = None
        if config.batching_enabled:
            container = KeyBasedBatchContainer if config.batching_type == BatchingType.KeyBased else BatchContainer
            self._batch = container(config.batching_max_messages, config.batching_max_allowed_size_in_bytes)
        # The delivery of the batch's messages (their replicate_to), None for none; plain messages
        # joining a plain batch pass with one identity test.
        self._batch_delivery: Delivery | None = None
        self._max_batch_bytes = config.batching_max_allowed_size_in_bytes
        self.batch_delay = config.batching_max_publish_delay_ms / 1000
        self._send_timeout = config.send_timeout
        # The highest sequence id the broker may hold, and whether the batch's message is at or below it.
        self._pushed_sequence_id = -1
        self._batch_may_be_duplicate = False

    def __len__(self) -> int:
        """Messages waiting in the batch."""
        return len(self._batch) if self._batch is not None else 0

    def connected(self, producer_name: str, max_message_size: int, schema_version: bytes = b"", last_sequence_id: int = -1) -> None:
        """Build entries for the producer the broker accepted, within its connection's max message size,
        stamped with its schema version; ``last_sequence_id`` is the broker's for the producer's name."""
        self._entries.connected(producer_name, max_message_size, schema_version)
        self._pushed_sequence_id = max(self._pushed_sequence_id, last_sequence_id)
        if self._batch is not None:
            self._batch.max_bytes = min(self._max_batch_bytes, max(1, max_message_size - _BATCH_HEADROOM))

    def add(self, message: Outgoing, sequence_id: int, callback: SendCallback | None, flush: bool) -> bool:
        """Take one message (bytes for one of nothing but its content), numbered ``sequence_id``;
        True when it waits in the batch (the batch timer must be running).

        A message without content is a null value: an empty payload flagged ``null_value``.
        ``flush`` sends the batch at once (a sync send has nothing to wait for).

        Raises:
            MessageTooBig: an unbatched message exceeds the max message size and chunking is off.
            CryptoError: the producer encrypts and its public keys cannot be read or used.
        """
        batch = self._batch
        if isinstance(message, bytes):
            content: bytes | None = message
            properties = partition_key = ordering = event_timestamp = delivery = None
        else:
            content, properties, partition_key, ordering = message.content, message.props, message.key, message.ordering
            event_timestamp, delivery = message.event_time, message.delivery
        if (
            batch is None and content is not None and properties is None and partition_key is None
            and ordering is None and event_timestamp is None and delivery is None
        ):  # the common unbatched message, spelled out; None when it needs more than the plain entry
            entry = self._entries.plain_entry(content, sequence_id)
            if entry is not None:
                now = time.monotonic()
                timeout = self._send_timeout
                # A send_async(..., None) has nothing to call back: no container to build (nor to collect).
                callbacks = () if callback is None else (callback,)
                # In OpSend's order: sequence ids (first, highest), messages, batched, entry, callbacks, permits, memory, created, deadline.
                self._queue(OpSend(sequence_id, sequence_id, 1, False, entry, callbacks, 1, len(content),
                                   now, None if timeout is None else now + timeout))
                return False
        encryptor = self._entries.encryptor
        if encryptor is not None:
            encryptor.check_ready()  # now, not when the batch is built: the send fails, nothing goes out unencrypted
        null_value = content is None
        payload = b"" if content is None else content
        size = len(payload)
        if batch is not None and batch.accepts(size) and (delivery is self._batch_delivery or self._joins_batch(delivery)):
            ordering_key = None if ordering is None else ordering.encode()
            if properties is None and partition_key is None and ordering_key is None and event_timestamp is None and not null_value:
                header = single_header(size, sequence_id)
            else:
                header = single_header_with(
                    size,
                    sequence_id,
                    properties,
                    partition_key,
                    ordering_key,
                    event_timestamp,
                    self._key_b64 and partition_key is not None,
                    null_value,
                )
            may_be_duplicate = sequence_id <= self._pushed_sequence_id
            if may_be_duplicate or self._batch_may_be_duplicate or not batch.has_space(len(header) + size):
                self.flush()
            self._batch_may_be_duplicate = may_be_duplicate
            self._pushed_sequence_id = max(self._pushed_sequence_id, sequence_id)
            # Past its max delay the batch goes now, from the sender's thread, rather than on the timer's.
            full = batch.add(header, payload, callback, sequence_id, partition_key, ordering_key)
            if full or flush or time.monotonic() - batch.first_added >= self.batch_delay:
                self.flush()
                return False
            return True
        self.flush()  # keep order: the batch was sent first
        now = time.monotonic()
        deadline = self._deadline(now)
        entries = self._entries.message_entries(OutgoingMessage(message) if isinstance(message, bytes) else message, sequence_id)
        txn = None if delivery is None or delivery.transaction is None else delivery.transaction.id
        last = len(entries) - 1
        for index, entry in enumerate(entries):
            # Only the last chunk completes the message: its callback, slot and memory.
            done = index == last
            self._queue(
                OpSend(
                    sequence_id=sequence_id,
                    highest_sequence_id=sequence_id,
                    num_messages=1,
                    batched=False,
                    entry=entry,
                    callbacks=(callback,) if done and callback is not None else (),
                    permits=1 if done else 0,
                    memory=size if done else 0,
                    created=now,
                    deadline=deadline,
                    chunk=last > 0,
                    txn=txn,
                )
            )
        return False

    def flush(self) -> None:
        """Queue the batch as one op (one per key for key-based batching), if it holds any message."""
        batch = self._batch
        if batch is None or not len(batch):
            return
        replicate_to = _replicate_to(self._batch_delivery)
        ranged = not isinstance(batch, KeyBasedBatchContainer)
        for drained in batch.drain_all():
            count = drained.num_messages
            self._queue(
                OpSend(
                    sequence_id=drained.first_sequence_id,
                    highest_sequence_id=drained.last_sequence_id,
                    num_messages=count,
                    batched=True,
                    entry=self._entries.batch_entry(drained, replicate_to),
                    callbacks=drained.callbacks,
                    permits=count,
                    memory=drained.payload_bytes,
                    created=drained.first_added,
                    deadline=self._deadline(drained.first_added),
                    ranged=ranged,
                )
            )

    def _joins_batch(self, delivery: Delivery | None) -> bool:
        """Whether a message with ``delivery`` goes into the batch: not when delayed or in a transaction
        (it leaves as its own entry, as the official producers send a delayed one). The batch is sent first when the message
        goes to other clusters, replicate_to being a field of the whole entry."""
        if delivery is not None and delivery.own_entry:
            return False
        if _replicate_to(delivery) != _replicate_to(self._batch_delivery):
            self.flush()
        self._batch_delivery = delivery
        return True

    def flush_if_due(self) -> float | None:
        """Queue the batch if its first message has waited the max publish delay.

        Returns the seconds it still has to wait, or None when nothing waits.
        """
        batch = self._batch
        if batch is None or not len(batch):
            return None
        wait = batch.first_added + self.batch_delay - time.monotonic()
        if wait > _DUE_SLACK:
            return wait
        self.flush()
        return None

    def _deadline(self, created: float) -> float | None:
        return None if self._send_timeout is None else created + self._send_timeout


def _replicate_to(delivery: Delivery | None) -> tuple[str, ...]:
    return () if delivery is None else delivery.replicate_to
