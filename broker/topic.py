"""A topic partition on the broker: producers, deduplication, subscriptions and stats."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from airflow_pulsar.client.protocol.frames import FrameError, split_entry
from airflow_pulsar.client.protocol.PulsarApi_pb2 import MessageMetadata
from airflow_pulsar.client.topic_name import TopicName
from airflow_pulsar.client.transaction.ids import TxnId

from .client_limits import ClientLimits
from .commit import Commit
from .compaction import Compaction
from .cursor import Cursor
from .ledger import CHECKSUM_HEADER_BYTES, Ledger
from .producer_access import ProducerAccess, ServerProducer
from .rates import RateMeter
from .storage import LedgerFencedError, Storage, StoredEntry
from .subscription import Subscription
from .subscription_rules import SubscriptionError
from .topic_stats import epoch_stats, subscription_stats, traffic_stats
from .transactions.buffer import TransactionBuffer

DUPLICATE = (-1, -1)


def entry_of(metadata: MessageMetadata, num_messages: int, checksum: int, data: bytes, entry_id: int = -1) -> StoredEntry:
    """An entry (by default not yet given its id), keyed as Pulsar keys it for Key_Shared: by the ordering
    key, else by the partition key."""
    key = metadata.ordering_key if metadata.HasField("ordering_key") else None
    if key is None and metadata.HasField("partition_key"):
        partition_key: str | bytes = metadata.partition_key  # bytes when not UTF-8: hashed as they came
        key = partition_key.encode() if isinstance(partition_key, str) else partition_key
    return StoredEntry(entry_id, metadata.publish_time, num_messages, checksum, key, data)


class Topic(ProducerAccess):
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
        transaction_entries: list[tuple[int, int, int, int | None]] = (),  # type: ignore[assignment]
        pending_acks: dict[str, dict[str, Any]] | None = None,
    ):
        super().__init__(name, limits)
        self.storage = storage
        self.ledger = ledger
        self.dedup = dedup
        self.transactions = TransactionBuffer(ledger, transaction_entries)
        self.compaction = Compaction(ledger, self.transactions)
        self.transactions.on_end.append(self._dispatch_all)
        self.subscriptions: dict[str, Subscription] = {}
        for sub_name, state in (cursors or {}).items():
            self.subscriptions[sub_name] = Subscription(self, Cursor.from_state(sub_name, state), 0)
        for sub_name, held in (pending_acks or {}).items():
            if sub_name in self.subscriptions:
                self.subscriptions[sub_name].pending_acks.load(held)
        # Deduplication: highest sequence id accepted and highest committed, per producer name.
        self._persisted_seq: dict[str, int] = dict(last_sequence_ids or {})
        self._pushed_seq: dict[str, int] = dict(self._persisted_seq)
        self._last_append: dict[str, Commit] = {}
        self.msg_in = 0
        self.bytes_in = 0
        # Entries appended since the topic was loaded, as Pulsar's entriesAddedCounter (the
        # companion of msgInCounter, which also starts from zero at every load).
        self.entries_added = 0
        self.in_rate = RateMeter()
        ledger.on_committed.append(self._dispatch_all)
        ledger.on_unfenced.append(self._forget_unpersisted_sequences)

    # ---- deduplication ----

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

    async def add_producer(self, producer: ServerProducer, epoch: int | None = None, queued: Callable[[], None] | None = None) -> None:
        """Attach a producer as :meth:`ProducerAccess.add_producer` does, unless a failed write has
        fenced the topic: as Pulsar, it takes producers again once the entries in flight settled."""
        if self.ledger.fenced:
            raise SubscriptionError("ServiceNotReady", "Topic is temporarily unavailable")
        await super().add_producer(producer, epoch, queued)

    def disconnect_clients(self) -> None:
        """Close every producer and consumer (the topic is being deleted by force); clients are told."""
        self.close_producers()
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
        txn: TxnId | None = None,
    ) -> None:
        """Append one entry durably, then call ``done((ledger id, entry id), None)``; one sent in
        ``txn`` is held by the topic's transaction buffer until the transaction ends.

        A duplicate (dedup on) gets ``(-1, -1)``, after the original is committed if it is
        still in flight; a storage failure gets ``done(None, error)``. A malformed entry, or a
        count of messages below one, raises FrameError before anything is stored.

        A storage failure fences the ledger and, as Pulsar on a failed BookKeeper write, closes
        every producer: each reconnects and resends what has no receipt, after the entries in
        flight have settled, so nothing sent after a failed entry is stored ahead of it.
        """
        if num_messages < 1:
            raise FrameError(f"a SEND carries at least one message, not {num_messages}")
        if self.ledger.fenced:
            done(None, LedgerFencedError("Topic is temporarily unavailable: a write failed"))
            return
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
                    # The duplicate shares the original's fate: stored, or failed and to be sent again.
                    in_flight.add_done_callback(
                        lambda c: done(None, c.exception()) if c.exception() else done(DUPLICATE, None)
                    )
                else:
                    done(DUPLICATE, None)
                return
            if records_sequence:
                self._pushed_seq[name] = highest
        entry = entry_of(metadata, num_messages, checksum, data)
        if txn is not None:
            entry.txn = (txn.most_bits, txn.least_bits)
        future = self.ledger.append(entry, name, highest if records_sequence else None)
        if self.dedup and records_sequence:
            self._last_append[name] = future

        def committed(f: Commit) -> None:
            error = f.exception()
            if error is not None:
                self.close_producers()
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
            if txn is not None:
                self.transactions.add(txn, entry.entry_id)
            done((self.ledger.ledger_id, entry.entry_id), None)

        future.add_done_callback(committed)

    def _forget_unpersisted_sequences(self) -> None:
        # As Pulsar's resetHighestSequenceIdPushed on unfencing: resends of failed entries are new.
        self._pushed_seq = dict(self._persisted_seq)
        self._last_append = {}

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
        subscription.pending_acks.forget()
        return self.storage.delete_cursor(self.ledger.ledger_id, name)

    def _dispatch_all(self) -> None:
        for subscription in list(self.subscriptions.values()):
            if subscription.consumers:
                subscription.dispatch()

    # ---- stats ----

    def stats(self) -> dict[str, Any]:
        """Pulsar's topic stats document (a subset of its fields, with its names)."""
        subscriptions = {name: subscription_stats(sub) for name, sub in self.subscriptions.items()}
        return traffic_stats(self.msg_in, self.bytes_in, self.in_rate, subscriptions) | {
            "storageSize": self.ledger.total_bytes,
            "backlogSize": max((s["backlogSize"] for s in subscriptions.values()), default=0),
            "publishers": [p.stats() for p in self.producers],
            "subscriptions": subscriptions,
            "replication": {},
            "deduplicationStatus": "Enabled" if self.dedup else "Disabled",
        } | self.transactions.stats() | epoch_stats(self.topic_epoch)
