"""A topic partition on the broker: producers, deduplication, subscriptions and stats."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_pulsar.client.protocol.frames import FrameError, split_entry
from airflow_pulsar.client.protocol.PulsarApi_pb2 import ProducerAccessMode
from airflow_pulsar.client.topic_name import TopicName

from .client_limits import ClientLimits
from .cursor import Cursor
from .ledger import CHECKSUM_HEADER_BYTES, Ledger
from .rates import RateMeter
from .storage import Commit, Storage, StoredEntry
from .subscription import Subscription, SubscriptionError

ACCESS_MODE_NAMES: dict[int, str] = {v: k for k, v in ProducerAccessMode.items()}


class ProducerSink(Protocol):
    """What a producer needs from its connection."""

    def close_producer(self, producer_id: int) -> None: ...

    def drop_producer(self, producer_id: int) -> None: ...

    @property
    def remote_address(self) -> str: ...


@dataclass(eq=False)
class ServerProducer:
    """A producer attached to a topic."""

    sink: ProducerSink
    producer_id: int
    name: str
    access_mode: int = ProducerAccessMode.Shared
    # The version of the schema it declared (Pulsar's 8 bytes), empty without one.
    schema_version: bytes = b""
    connected_since: float = field(default_factory=time.time)
    msg_in: int = 0
    bytes_in: int = 0
    in_rate: RateMeter = field(default_factory=RateMeter)

    def stats(self) -> dict[str, Any]:
        """The producer's entry in Pulsar's ``publishers`` list."""
        msg_rate, byte_rate = self.in_rate.rates()
        return {
            "producerId": self.producer_id,
            "producerName": self.name,
            "accessMode": ACCESS_MODE_NAMES.get(self.access_mode, "Shared"),
            "msgRateIn": msg_rate,
            "msgThroughputIn": byte_rate,
            "address": self.sink.remote_address,
            "connectedSince": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.connected_since)),
        }


DUPLICATE = (-1, -1)


class Topic:
    """One topic partition (or non-partitioned topic)."""

    def __init__(
        self,
        name: TopicName,
        storage: Storage,
        ledger: Ledger,
        *,
        dedup: bool,
        cursors: dict[str, dict[str, Any]] | None = None,
        last_sequence_ids: dict[str, int] | None = None,
        limits: ClientLimits,
    ):
        self.name = name
        self.storage = storage
        self.ledger = ledger
        self.dedup = dedup
        self.limits = limits
        self.producers: list[ServerProducer] = []
        self.subscriptions: dict[str, Subscription] = {}
        for sub_name, state in (cursors or {}).items():
            self.subscriptions[sub_name] = Subscription(self, Cursor.from_state(sub_name, state), 0)
        # Deduplication: highest sequence id accepted and highest committed, per producer name.
        self._persisted_seq: dict[str, int] = dict(last_sequence_ids or {})
        self._pushed_seq: dict[str, int] = dict(self._persisted_seq)
        self._last_append: dict[str, Commit] = {}
        # Producer access (Pulsar's rules): the exclusive producer, if any; the topic epoch, which
        # each exclusive producer raises (None until the first); WaitForExclusive producers queued.
        self._exclusive: ServerProducer | None = None
        self.topic_epoch: int | None = None
        self._exclusive_waiters: list[asyncio.Future[None]] = []
        self.msg_in = 0
        self.bytes_in = 0
        # Entries appended since the topic was loaded, as Pulsar's entriesAddedCounter (the
        # companion of msgInCounter, which also starts from zero at every load).
        self.entries_added = 0
        self.in_rate = RateMeter()
        ledger.on_committed.append(self._dispatch_all)

    # ---- producers ----

    def last_sequence_id(self, producer_name: str) -> int:
        """The highest committed sequence id of a producer name, -1 if none (or dedup off)."""
        return self._persisted_seq.get(producer_name, -1) if self.dedup else -1

    def set_deduplication(self, enabled: bool) -> None:
        """Turn deduplication on or off (a policy changed). Either way the topic starts without
        sequence ids, as Pulsar does: it drops them when turned off and, turned on, knows only the
        sends that follow."""
        if enabled == self.dedup:
            return
        self.dedup = enabled
        self._persisted_seq = {}
        self._pushed_seq = {}
        self._last_append = {}

    async def add_producer(
        self, producer: ServerProducer, epoch: int | None = None, queued: Callable[[], None] | None = None
    ) -> None:
        """Attach a producer, enforcing its access mode as Pulsar does (WaitForExclusive may wait,
        and ``queued`` is called once when it starts to).

        ``epoch`` is the topic epoch a reconnecting exclusive producer had: one older than the
        topic's means another exclusive producer came in between, and it stays fenced.
        """
        self.check_producer_room()
        mode = producer.access_mode
        holder = self._exclusive.name if self._exclusive is not None else None
        if mode == ProducerAccessMode.Shared:
            if self._exclusive is not None or self._exclusive_waiters:
                raise SubscriptionError("ProducerBusy", f"Topic has an existing exclusive producer: {holder}")
            self.producers.append(producer)
            return
        if mode == ProducerAccessMode.Exclusive:
            if self._exclusive is not None or self._exclusive_waiters:
                raise SubscriptionError("ProducerFenced", f"Topic has an existing exclusive producer: {holder}")
            if self.producers:
                raise SubscriptionError("ProducerFenced", "Topic has existing shared producers")
            self._check_epoch(epoch)
        elif mode == ProducerAccessMode.ExclusiveWithFencing:
            if self._exclusive is not None or self.producers:
                self._fence_everyone()
            self._check_epoch(epoch)
        elif self._exclusive is None and not self.producers:  # WaitForExclusive, the topic free
            self._check_epoch(epoch)
        else:
            # WaitForExclusive, queued until the topic is free. As in Pulsar, a queued producer is
            # promoted with the epoch it brings, unchecked: a fenced one waits and gets back in.
            if queued is not None:
                queued()
            while self._exclusive is not None or self.producers:
                waiter = asyncio.get_running_loop().create_future()
                self._exclusive_waiters.append(waiter)
                await waiter  # raises when fenced out meanwhile
        self._exclusive = producer
        self.topic_epoch = epoch if epoch is not None else (-1 if self.topic_epoch is None else self.topic_epoch) + 1
        self.producers.append(producer)

    def check_producer_room(self) -> None:
        """Refuse another producer when the topic has Pulsar's maxProducersPerTopic already."""
        limit = self.limits.max_producers_per_topic
        if limit and len(self.producers) >= limit:
            raise SubscriptionError("ProducerBusy", f"Topic '{self.name}' reached max producers limit")  # Pulsar's words

    def _check_epoch(self, epoch: int | None) -> None:
        if epoch is not None and self.topic_epoch is not None and epoch < self.topic_epoch:
            raise SubscriptionError(
                "ProducerFenced",
                f"Topic epoch has already moved. Current epoch: {self.topic_epoch}, Producer epoch: {epoch}",
            )

    def _fence_everyone(self) -> None:
        """ExclusiveWithFencing: fail the queued exclusive producers and drop every producer.

        As Pulsar does, the dropped producers' clients are not told: one told would reconnect at
        once and, were it ExclusiveWithFencing too, fence the newcomer back. A fenced producer
        learns it at its next SEND, which fails and makes it reconnect into the epoch check.
        """
        waiters, self._exclusive_waiters = self._exclusive_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(SubscriptionError("ProducerFenced", "Fenced out"))
        for other in list(self.producers):
            self.remove_producer(other)
            other.sink.drop_producer(other.producer_id)

    def remove_producer(self, producer: ServerProducer) -> None:
        """Detach a producer; once none is left, the first queued exclusive producer gets in."""
        if producer in self.producers:
            self.producers.remove(producer)
        if producer is self._exclusive:
            self._exclusive = None
        if not self.producers:
            while self._exclusive_waiters:
                waiter = self._exclusive_waiters.pop(0)
                if not waiter.done():
                    waiter.set_result(None)
                    break

    def disconnect_clients(self) -> None:
        """Close every producer and consumer (the topic is being deleted by force); clients are told."""
        for producer in list(self.producers):
            self.remove_producer(producer)
            producer.sink.close_producer(producer.producer_id)
        for subscription in list(self.subscriptions.values()):  # a reader's goes with its consumer
            for consumer in list(subscription.consumers):
                consumer.sink.close_consumer(consumer.consumer_id)

    def publish(
        self,
        producer: ServerProducer,
        sequence_id: int,
        highest_sequence_id: int,
        num_messages: int,
        checksum: int,
        data: bytes,
        done: Callable[[tuple[int, int] | None, BaseException | None], None],
    ) -> None:
        """Append one entry durably, then call ``done((ledger id, entry id), None)``.

        A duplicate (dedup on) gets ``(-1, -1)``, after the original is committed if it is
        still in flight; a storage failure gets ``done(None, error)``. A malformed entry, or a
        count of messages below one, raises FrameError before anything is stored.
        """
        if num_messages < 1:
            raise FrameError(f"a SEND carries at least one message, not {num_messages}")
        name = producer.name
        highest = max(sequence_id, highest_sequence_id)
        metadata, _ = split_entry(data)
        # Every chunk of a chunked message carries the message's sequence id: only the last
        # chunk records it, so the earlier ones are not mistaken for duplicates.
        records_sequence = not metadata.HasField("chunk_id") or metadata.chunk_id >= metadata.num_chunks_from_msg - 1
        if self.dedup:
            # As Pulsar, the entry's first sequence id decides: a batch that starts at or below the
            # highest id seen is a duplicate as a whole, even if it reaches past it.
            if sequence_id <= self._pushed_seq.get(name, -1):
                in_flight = self._last_append.get(name)
                if sequence_id > self._persisted_seq.get(name, -1) and in_flight is not None and not in_flight.done():
                    in_flight.add_done_callback(lambda _: done(DUPLICATE, None))
                else:
                    done(DUPLICATE, None)
                return
            if records_sequence:
                self._pushed_seq[name] = highest
        key = metadata.ordering_key if metadata.HasField("ordering_key") else None
        if key is None and metadata.HasField("partition_key"):
            partition_key: str | bytes = metadata.partition_key  # bytes when not UTF-8: hashed as they came
            key = partition_key.encode() if isinstance(partition_key, str) else partition_key
        entry = StoredEntry(-1, metadata.publish_time, num_messages, checksum, key, data)
        future = self.ledger.append(entry, name, highest if records_sequence else None)
        if self.dedup and records_sequence:
            self._last_append[name] = future

        def committed(f: Commit) -> None:
            error = f.exception()
            if error is not None:
                if self.dedup and records_sequence:
                    self._pushed_seq[name] = self._persisted_seq.get(name, -1)
                done(None, error)
                return
            if self.dedup and records_sequence and highest > self._persisted_seq.get(name, -1):
                self._persisted_seq[name] = highest
            size = len(data) + CHECKSUM_HEADER_BYTES  # as Pulsar counts bytes in: with the checksum header
            producer.msg_in += num_messages
            producer.bytes_in += size
            producer.in_rate.record(num_messages, size)
            self.msg_in += num_messages
            self.bytes_in += size
            self.entries_added += 1
            self.in_rate.record(num_messages, size)
            done((self.ledger.ledger_id, entry.entry_id), None)

        future.add_done_callback(committed)

    # ---- subscriptions ----

    def subscription(self, name: str, sub_type: int, durable: bool, start_entry: int | None) -> Subscription:
        """The named subscription, created at ``start_entry`` (next entry to deliver) if new."""
        existing = self.subscriptions.get(name)
        if existing is not None:
            return existing
        if start_entry is None:
            start_entry = self.ledger.last_entry_id + 1
        subscription = Subscription(self, Cursor(name, durable, start_entry - 1), sub_type)
        self.subscriptions[name] = subscription
        return subscription

    def remove_subscription(self, name: str) -> asyncio.Future[None] | None:
        """Forget a subscription; for a durable one returns the storage future."""
        subscription = self.subscriptions.pop(name, None)
        if subscription is None or not subscription.cursor.durable:
            return None
        return self.storage.delete_cursor(self.ledger.ledger_id, name)

    def _dispatch_all(self) -> None:
        for subscription in list(self.subscriptions.values()):
            if subscription.consumers:
                subscription.dispatch()

    # ---- stats ----

    def last_entry_batch_size(self) -> int:
        """The message count of the newest entry (0 if the topic is empty)."""
        last = self.ledger.last_entry_id
        return self.ledger.entry_messages(last) if last >= 0 else 0

    def stats(self) -> dict[str, Any]:
        """Pulsar's topic stats document (a subset of its fields, with its names)."""
        msg_rate_in, byte_rate_in = self.in_rate.rates()
        subscriptions = {name: sub.stats() for name, sub in self.subscriptions.items()}
        return {
            "msgRateIn": msg_rate_in,
            "msgThroughputIn": byte_rate_in,
            "msgRateOut": sum(s["msgRateOut"] for s in subscriptions.values()),
            "msgThroughputOut": sum(s["msgThroughputOut"] for s in subscriptions.values()),
            "msgInCounter": self.msg_in,
            "bytesInCounter": self.bytes_in,
            "msgOutCounter": sum(s["msgOutCounter"] for s in subscriptions.values()),
            "bytesOutCounter": sum(s["bytesOutCounter"] for s in subscriptions.values()),
            "averageMsgSize": self.bytes_in / self.msg_in if self.msg_in else 0.0,
            "storageSize": self.ledger.total_bytes,
            "backlogSize": max((s["backlogSize"] for s in subscriptions.values()), default=0),
            "publishers": [p.stats() for p in self.producers],
            "subscriptions": subscriptions,
            "replication": {},
            "deduplicationStatus": "Enabled" if self.dedup else "Disabled",
        } | ({} if self.topic_epoch is None else {"topicEpoch": self.topic_epoch})  # absent until an exclusive producer came
