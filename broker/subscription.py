"""A subscription on one topic partition: its cursor, its consumers, and dispatch by permits.

Dispatch sends one entry (a message or a whole batch) per MESSAGE to a consumer chosen by the
subscription type's selector, as long as that consumer has permits. Entries taken back from a
consumer (redelivery, disconnect) go to the *replay* set and are sent again, in entry order,
before anything new is read.

Key_Shared keeps each key in order when keys change hands (a consumer joins or leaves): an entry
goes to its key's new owner only once no other consumer still holds an unacknowledged entry of
that key, as with Pulsar's draining hashes.

Shared and Key_Shared subscriptions hold back an entry whose ``deliver_at_time`` lies in the
future (``delayed_delivery``), and send it from the replay set once it is due.

A consumer is sent entries only while it is *available*: it has permits, is not blocked on its
unacknowledged messages, and its connection's socket keeps up. On Shared and Key_Shared durable
subscriptions, as in Pulsar, a consumer holding ``maxUnackedMessagesPerConsumer`` unacknowledged
messages is blocked until acknowledgements bring them to half, and the whole subscription stops
at ``maxUnackedMessagesPerSubscription`` until they are below half.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from airflow_pulsar.client.protocol.batch import ack_set_words
from airflow_pulsar.client.protocol.PulsarApi_pb2 import CommandSubscribe
from airflow_pulsar.client.topic_name import TopicName

from .client_limits import ClientLimits
from .compaction import Compaction
from .consumer import ServerConsumer
from .cursor import Cursor
from .delayed_delivery import DelayedEntries
from .ledger import Ledger
from .rates import RateMeter
from .selectors import KeySharedSelector, SingleActiveSelector, selector_for
from .storage import Storage, StoredEntry
from .subscription_rules import SUB_TYPE_NAMES, SubscriptionError, check_can_join
from .transactions.buffer import TransactionBuffer
from .transactions.pending_acks import WHOLE, PendingAcks

_READ_BATCH = 100
# Key_Shared entries waiting for a busy consumer; past this, reading new entries pauses.
_MAX_REPLAY = 10_000
# The types acknowledged message by message: they count unacknowledged messages (and hold
# consumers to Pulsar's limits on them) and hold back delayed entries.
_INDIVIDUAL_ACK = (CommandSubscribe.Shared, CommandSubscribe.Key_Shared)
# Pulsar's activeConsumerFailoverDelayTimeMillis default: after a Failover subscription's active
# consumer changes, dispatch (and the change notice) waits this long, so acknowledgements the
# previous active consumer still has in flight land before the new one is given anything.
FAILOVER_DELAY_SECONDS = 1.0


class SubscriptionTopic(Protocol):
    """What a subscription needs from its topic: the name, the ledger it reads, where cursors are saved."""

    @property
    def name(self) -> TopicName: ...

    @property
    def ledger(self) -> Ledger: ...

    @property
    def storage(self) -> Storage: ...

    @property
    def limits(self) -> ClientLimits: ...

    @property
    def compaction(self) -> Compaction: ...

    @property
    def transactions(self) -> TransactionBuffer: ...


class Subscription:
    """Dispatch state of one subscription on one topic partition."""

    def __init__(self, topic: SubscriptionTopic, cursor: Cursor, sub_type: int):
        self.topic = topic
        self.ledger = topic.ledger
        self.cursor = cursor
        self.sub_type = sub_type
        self.selector = selector_for(sub_type, str(topic.name), topic.name.partition)
        self.read_position = cursor.mark_delete + 1
        self.replay: set[int] = set()
        self.redelivery_counts: dict[int, int] = {}
        self.holder: dict[int, ServerConsumer] = {}  # entry id -> consumer it is out with
        # Key_Shared: sticky key -> (consumer holding entries of it, how many); entry id -> its key.
        self._key_holders: dict[bytes | None, tuple[ServerConsumer, int]] = {}
        self._held_keys: dict[int, bytes | None] = {}
        self._keys_freed = False
        # Unacknowledged messages out with all the consumers, the limit on them (0: none), whether
        # they reached it, and whether acknowledgements just unblocked a consumer or the subscription.
        self.unacked_messages = 0
        self.max_unacked_messages = 0
        self.blocked_on_unacked = False
        self._unblocked = False
        self._dispatching = False
        self._again = False
        self.msg_out = 0
        self.bytes_out = 0
        self.out_rate = RateMeter()
        self.redeliver_rate = RateMeter()
        self.delayed = DelayedEntries(self._replay_due)
        # Pulsar reports a subscription's type from its first consumer on; "None" until then.
        self.typed = False
        self._failover_timer: asyncio.TimerHandle | None = None
        self.reads_compacted = False  # whether its consumers read the topic's compacted view
        self.pending_acks = PendingAcks(self, topic.storage, f"[{topic.name}][{cursor.name}]")
        self._hidden_acked = False  # dispatch acknowledged transaction markers or aborted entries

    @property
    def name(self) -> str:
        """The subscription name."""
        return self.cursor.name

    @property
    def consumers(self) -> list[ServerConsumer]:
        """The attached consumers, in arrival order."""
        return self.selector.consumers

    # ---- consumers ----

    def check_can_add(self, sub_type: int) -> None:
        """Raise SubscriptionError if a consumer of ``sub_type`` may not join now."""
        check_can_join(self.name, self.consumers, self.sub_type, sub_type, self.topic.limits)

    def add_consumer(self, consumer: ServerConsumer, sub_type: int) -> None:
        """Attach a consumer (check_can_add first); the type follows the first consumer."""
        if not self.consumers and sub_type != self.sub_type:
            self.sub_type = sub_type
            self.selector = selector_for(sub_type, str(self.topic.name), self.topic.name.partition)
            if sub_type not in _INDIVIDUAL_ACK:
                self.delayed.release_all()
        self.typed = True
        limits = self.topic.limits
        # As Pulsar: only individually acknowledged durable subscriptions are held to the limits.
        counted = self.sub_type in _INDIVIDUAL_ACK and self.cursor.durable
        consumer.max_unacked_messages = limits.max_unacked_messages_per_consumer if counted else 0
        self.max_unacked_messages = limits.max_unacked_messages_per_subscription if counted else 0
        before = self._active()
        self.selector.add(consumer)
        self._after_membership_change(before, consumer)

    def remove_consumer(self, consumer: ServerConsumer) -> None:
        """Detach a consumer; what it held unacknowledged is redelivered to the others."""
        if consumer not in self.consumers:
            return
        before = self._active()
        self.selector.remove(consumer)
        self._take_back(consumer, list(consumer.pending), count_redelivery=False)
        if not self.consumers:
            self.redelivery_counts.clear()  # as Pulsar: its redelivery tracker is cleared with the last consumer
        self._after_membership_change(before, None)
        self.dispatch()

    def _active(self) -> ServerConsumer | None:
        return self.selector.active if isinstance(self.selector, SingleActiveSelector) else None

    def _after_membership_change(self, before: ServerConsumer | None, joined: ServerConsumer | None) -> None:
        self.reads_compacted = any(c.read_compacted for c in self.consumers)
        if self.sub_type != CommandSubscribe.Failover:
            return
        active = self._active()
        if active is not before and before is not None and before in self.consumers:
            # The old active consumer's unacknowledged entries move to the new one.
            self._take_back(before, list(before.pending), count_redelivery=False)
        if active is not before and active is not None:
            if self._failover_timer is None:
                loop = asyncio.get_running_loop()
                self._failover_timer = loop.call_later(FAILOVER_DELAY_SECONDS, self._end_failover_delay)
        elif joined is not None and active is not None and self._failover_timer is None:
            joined.sink.active_consumer_change(joined.consumer_id, joined is active)

    def _end_failover_delay(self) -> None:
        self._failover_timer = None
        active = self._active()
        for consumer in self.consumers:
            consumer.sink.active_consumer_change(consumer.consumer_id, consumer is active)
        self.dispatch()

    def _take_back(self, consumer: ServerConsumer, entry_ids: list[int], count_redelivery: bool) -> None:
        for entry_id in entry_ids:
            if entry_id not in consumer.pending:
                continue
            self._count_off(consumer, entry_id)
            self._release(entry_id)
            if not self.cursor.is_acked(entry_id):
                self._replay(entry_id, count_redelivery)

    def _replay(self, entry_id: int, count_redelivery: bool) -> None:
        self.replay.add(entry_id)
        # As in Pulsar, only Shared and Key_Shared count redeliveries (for dead-lettering).
        if count_redelivery and self.sub_type in _INDIVIDUAL_ACK:
            self.redelivery_counts[entry_id] = self.redelivery_counts.get(entry_id, 0) + 1
            self.redeliver_rate.record(self.ledger.entry_messages(entry_id), 0)

    # ---- flow and dispatch ----

    def flow(self, consumer: ServerConsumer, permits: int) -> None:
        """The client granted ``permits`` more messages."""
        consumer.permits += permits
        self.dispatch()

    def dispatch(self) -> None:
        """Send entries to consumers while permits allow; safe to call from anywhere."""
        if self._failover_timer is not None:
            return  # a Failover subscription's new active consumer waits out the delay
        if self._dispatching:
            self._again = True
            return
        self._dispatching = True
        self._keys_freed = self._unblocked = False
        try:
            self._again = True
            while self._again:
                self._again = False
                self._dispatch_replay()
                self._dispatch_new()
        finally:
            self._dispatching = False

    def _dispatch_replay(self) -> None:
        if not self.replay:
            return
        for entry_id in sorted(self.replay):
            if self.cursor.is_acked(entry_id) or entry_id in self.holder or self.pending_acks.held(entry_id) == WHOLE:
                self.replay.discard(entry_id)
                continue
            if self.blocked_on_unacked or not any(c.available for c in self.consumers):
                return
            entries = self.ledger.read(entry_id, 1)
            sent = self._as_read(entries[0]) if entries else None
            if sent is None:
                self.replay.discard(entry_id)
                continue
            if self._send(sent):
                self.replay.discard(entry_id)

    def _dispatch_new(self) -> None:
        key_shared = self.selector if isinstance(self.selector, KeySharedSelector) else None
        # Key_Shared keeps per-key order: a consumer with entries still waiting in the replay
        # set gets nothing newer until those went out.
        waiting_owners = self._replay_owners() if key_shared is not None else set()
        transactions = self.topic.transactions
        while self.read_position <= (readable := transactions.max_read_entry()):
            permits = sum(c.permits for c in self.consumers if c.available)
            if not permits or self.blocked_on_unacked:
                return
            # Only what the permits can take (a batch costs a permit per message): a block read
            # from storage for every FLOW would otherwise be mostly thrown away. Key_Shared may
            # pass over entries whose key is busy, so it reads the whole block.
            limit = _READ_BATCH if key_shared is not None else self.ledger.entries_for(self.read_position, permits, _READ_BATCH)
            for entry in self.ledger.read(self.read_position, min(limit, readable - self.read_position + 1)):
                if self.blocked_on_unacked:
                    return
                entry_id = entry.entry_id
                if transactions.hides(entry_id):
                    # As Pulsar's dispatcher: a marker or an aborted transaction's entry is acknowledged as read.
                    self._hidden_acked = self.cursor.ack(entry_id) or self._hidden_acked
                    self.read_position = entry_id + 1
                    continue
                sent = self._as_read(entry)
                if self.cursor.is_acked(entry_id) or entry_id in self.holder or sent is None or self.pending_acks.held(entry_id) == WHOLE:
                    self.read_position = entry_id + 1
                    continue
                if self.sub_type in _INDIVIDUAL_ACK and self.delayed.hold_back(entry):
                    self.read_position = entry_id + 1
                    continue
                if key_shared is not None:
                    owner = key_shared.owner(entry.sticky_key)
                    if owner is None or id(owner) in waiting_owners or not self._send(sent):
                        if len(self.replay) >= _MAX_REPLAY:
                            return
                        self.replay.add(entry_id)
                        waiting_owners.add(id(owner))
                elif not self._send(sent):
                    return
                self.read_position = entry_id + 1
            # As Pulsar writes each read batch as it is dispatched: the consumer starts on it while
            # the next is read, rather than waiting for every entry its permits allow.
            self._flush_consumers()
        if self._hidden_acked:
            self._hidden_acked = False
            self.persist()

    def _flush_consumers(self) -> None:
        for consumer in self.consumers:
            consumer.sink.flush()

    def _replay_due(self, due: list[int]) -> None:
        """Send the held-back entries that came due, from the replay set."""
        for entry_id in due:
            if not self.cursor.is_acked(entry_id):
                self.replay.add(entry_id)
        if due:
            self.dispatch()

    def _replay_owners(self) -> set[int]:
        selector = self.selector
        assert isinstance(selector, KeySharedSelector)
        owners = set()
        for entry_id in self.replay:
            waiting = self.ledger.read(entry_id, 1)
            if waiting:
                owners.add(id(selector.owner(waiting[0].sticky_key)))
        return owners

    def _send(self, entry: StoredEntry) -> bool:
        consumer = self.selector.pick(entry)
        if consumer is None:
            return False
        if self.sub_type == CommandSubscribe.Key_Shared and not self._hold_key(entry, consumer):
            return False
        bits = self.cursor.unacked_bits(entry.entry_id)
        held = self.pending_acks.held(entry.entry_id)
        if held:  # indexes that transactions hold are not for this consumer
            bits = (((1 << entry.num_messages) - 1) if bits is None else bits) & ~held
        ack_set = ack_set_words(bits, entry.num_messages, clip=False) if bits is not None else None
        self.holder[entry.entry_id] = consumer
        consumer.deliver(entry, self.ledger.ledger_id, self.redelivery_counts.get(entry.entry_id, 0), ack_set)
        self.unacked_messages += entry.num_messages
        if self.max_unacked_messages and self.unacked_messages >= self.max_unacked_messages:
            self.blocked_on_unacked = True
        self.msg_out += entry.num_messages
        self.bytes_out += len(entry.data)
        self.out_rate.record(entry.num_messages, len(entry.data))
        return True

    def _as_read(self, entry: StoredEntry) -> StoredEntry | None:
        """The entry as this subscription's consumers read it: compacted readers get what the
        topic's compaction kept of it (None: nothing), the others the entry itself."""
        return self.topic.compaction.filter(entry) if self.reads_compacted else entry

    def _hold_key(self, entry: StoredEntry, consumer: ServerConsumer) -> bool:
        """Record that ``consumer`` holds an entry of its key; False if another consumer still does."""
        key = entry.sticky_key
        holder, count = self._key_holders.get(key, (consumer, 0))
        if holder is not consumer:
            return False
        self._key_holders[key] = (consumer, count + 1)
        self._held_keys[entry.entry_id] = key
        return True

    def _release(self, entry_id: int) -> ServerConsumer | None:
        """Forget which consumer holds an entry (and, for Key_Shared, its key); returns that consumer."""
        consumer = self.holder.pop(entry_id, None)
        if entry_id in self._held_keys:
            key = self._held_keys.pop(entry_id)
            holder, count = self._key_holders[key]
            if count > 1:
                self._key_holders[key] = (holder, count - 1)
            else:
                del self._key_holders[key]
                self._keys_freed = True
        return consumer

    def _count_off(self, consumer: ServerConsumer, entry_id: int) -> None:
        """The consumer no longer holds an entry: count its messages off, noting whether that
        unblocks the consumer or (below half its limit, as Pulsar) the subscription."""
        was_blocked = consumer.blocked
        messages = consumer.settle(entry_id)
        if was_blocked and not consumer.blocked:
            self._unblocked = True
        self.unacked_messages -= messages
        if self.blocked_on_unacked and self.unacked_messages < self.max_unacked_messages // 2:
            self.blocked_on_unacked = False
            self._unblocked = True

    def _dispatch_if_freed(self) -> None:
        # Entries waiting for their key's previous holder may go now, and so may a consumer or
        # the subscription that acknowledgements unblocked.
        keys_freed, self._keys_freed = self._keys_freed and bool(self.replay), False
        unblocked, self._unblocked = self._unblocked, False
        if keys_freed or unblocked:
            self.dispatch()

    # ---- acknowledgement ----

    def ack(self, entry_id: int, ack_set: list[int] | None, batch_size: int) -> bool:
        """Individual ack of an entry, or of some batch indexes when ``ack_set`` is given."""
        if ack_set:
            changed = self.cursor.ack_batch_indexes(entry_id, ack_set, batch_size)
            if not self.cursor.is_acked(entry_id):
                return changed
        else:
            changed = self.cursor.ack(entry_id)
        self._settle(entry_id)
        self._dispatch_if_freed()
        return changed

    def ack_cumulative(self, entry_id: int, ack_set: list[int] | None, batch_size: int) -> bool:
        """Cumulative ack up to an entry; with ``ack_set``, up to some index inside it."""
        if self.sub_type in (CommandSubscribe.Shared, CommandSubscribe.Key_Shared):
            raise SubscriptionError(
                "NotAllowedError",
                f"cumulative acknowledgement is not allowed on {SUB_TYPE_NAMES[self.sub_type]} subscription {self.name}",
            )
        if ack_set:
            changed = self.cursor.ack_cumulative(entry_id - 1)
            changed = self.cursor.ack_batch_indexes(entry_id, ack_set, batch_size) or changed
        else:
            changed = self.cursor.ack_cumulative(entry_id)
        for held in [e for e in self.holder if self.cursor.is_acked(e)]:
            self._settle(held)
        self.replay = {e for e in self.replay if not self.cursor.is_acked(e)}
        self._dispatch_if_freed()
        return changed

    def _settle(self, entry_id: int) -> None:
        holder = self._release(entry_id)
        if holder is not None:
            self._count_off(holder, entry_id)
        self.redelivery_counts.pop(entry_id, None)

    def hand_over(self, entry_id: int) -> None:
        """The entry's consumer is done with it (a transaction acknowledged it): no longer held, nor redelivered."""
        self._settle(entry_id)
        self._dispatch_if_freed()

    def release(self, entry_ids: list[int]) -> None:
        """Deliver again the entries an aborted transaction had acknowledged (those not acknowledged
        since), as Pulsar redelivers them, counting a redelivery: an entry its consumer still holds
        (the rest of a batch unacknowledged) too."""
        for entry_id in entry_ids:
            holder = self.holder.get(entry_id)
            if holder is not None:
                self._take_back(holder, [entry_id], count_redelivery=True)
            elif not self.cursor.is_acked(entry_id):
                self._replay(entry_id, count_redelivery=True)
        self.dispatch()

    def redeliver(self, consumer: ServerConsumer, entry_ids: list[int] | None) -> None:
        """Take back some or all of a consumer's unacknowledged entries and send them again."""
        consumer.unblock()
        self._take_back(consumer, list(consumer.pending) if entry_ids is None else entry_ids, count_redelivery=True)
        self.dispatch()

    def seek(self, entry_id: int) -> None:
        """Move the cursor so that ``entry_id`` is the next entry delivered."""
        self.cursor.reset(entry_id - 1)
        self.read_position = entry_id
        self.replay.clear()
        self.delayed.clear()
        self.redelivery_counts.clear()
        for consumer in self.consumers:
            for held in list(consumer.pending):
                self._count_off(consumer, held)
        self.holder.clear()
        self._key_holders.clear()
        self._held_keys.clear()

    def reset(self, entry_id: int) -> None:
        """Reset the cursor as Pulsar does: disconnect every consumer (they resubscribe and read
        from the new position), then seek to ``entry_id``."""
        for consumer in list(self.consumers):
            consumer.sink.close_consumer(consumer.consumer_id)
        self.seek(entry_id)

    def persist(self) -> asyncio.Future[None] | None:
        """Queue the cursor's state for storage if durable; the future resolves when saved."""
        if not self.cursor.durable:
            return None
        return self.topic.storage.save_cursor(self.ledger.ledger_id, self.name, self.cursor.state())
