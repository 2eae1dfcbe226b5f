"""Non-persistent topics (``non-persistent://tenant/ns/topic``), as Pulsar serves them.

Nothing is stored: a message goes, as it is published, to each subscription's consumer that the
subscription type's selector picks among those with permits, and is dropped (counted in
``msgDropRate``) where there is none, so a subscription hears only what is published while a
consumer of it is connected, and a slow consumer loses what comes beyond its permits. Every
message id is ``0:0`` (Pulsar's), acknowledgements change nothing, and redelivery has nothing
to send again. Subscriptions live in memory as long as the broker runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_pulsar.client.protocol.frames import FrameError, split_entry
from airflow_pulsar.client.protocol.PulsarApi_pb2 import CommandSubscribe
from airflow_pulsar.client.topic_name import TopicName

from .client_limits import ClientLimits
from .consumer import ServerConsumer
from .ledger import CHECKSUM_HEADER_BYTES
from .producer_access import ProducerAccess, ServerProducer
from .rates import RateMeter
from .selectors import SingleActiveSelector, selector_for
from .storage import StoredEntry
from .subscription_rules import SUB_TYPE_NAMES, check_can_join
from .topic import entry_of
from .topic_stats import epoch_stats, traffic_stats

# Pulsar's position of every non-persistent message: ledger 0, entry 0.
NON_PERSISTENT_POSITION = (0, 0)


class NonPersistentSubscription:
    """One subscription on a non-persistent topic: its consumers and what it dropped."""

    def __init__(self, topic: NonPersistentTopic, name: str, sub_type: int):
        self.topic = topic
        self.name = name
        self.sub_type = sub_type
        self.selector = selector_for(sub_type, str(topic.name), topic.name.partition)
        # Pulsar reports the type of the dispatcher its first consumer made; "None" until then.
        self.typed = False
        self.msg_out = 0
        self.bytes_out = 0
        self.out_rate = RateMeter()
        self.redeliver_rate = RateMeter()  # stays at zero: nothing is redelivered
        self.drop_rate = RateMeter()

    @property
    def consumers(self) -> list[ServerConsumer]:
        """The attached consumers, in arrival order."""
        return self.selector.consumers

    def check_can_add(self, sub_type: int) -> None:
        """Raise SubscriptionError if a consumer of ``sub_type`` may not join now."""
        check_can_join(self.name, self.consumers, self.sub_type, sub_type, self.topic.limits)

    def add_consumer(self, consumer: ServerConsumer, sub_type: int) -> None:
        """Attach a consumer (check_can_add first); the type follows the first consumer."""
        if not self.consumers and sub_type != self.sub_type:
            self.sub_type = sub_type
            self.selector = selector_for(sub_type, str(self.topic.name), self.topic.name.partition)
        self.typed = True
        before = self._active()
        self.selector.add(consumer)
        self._tell_active(before, consumer)

    def remove_consumer(self, consumer: ServerConsumer) -> None:
        """Detach a consumer; what it was sent is gone with it."""
        if consumer in self.consumers:
            before = self._active()
            self.selector.remove(consumer)
            self._tell_active(before, None)

    def _active(self) -> ServerConsumer | None:
        return self.selector.active if isinstance(self.selector, SingleActiveSelector) else None

    def _tell_active(self, before: ServerConsumer | None, joined: ServerConsumer | None) -> None:
        """Failover: every consumer hears of a change of the active one (without the persistent
        dispatcher's delay: there are no acknowledgements in flight to wait for), a newcomer of
        where it stands."""
        if self.sub_type != CommandSubscribe.Failover:
            return
        active = self._active()
        told = self.consumers if active is not before else [joined] if joined is not None else []
        for consumer in told:
            consumer.sink.active_consumer_change(consumer.consumer_id, consumer is active)

    def flow(self, consumer: ServerConsumer, permits: int) -> None:
        """The client granted ``permits`` more messages; they take what is published next."""
        consumer.permits += permits

    def redeliver(self, consumer: ServerConsumer, entry_ids: list[int] | None) -> None:
        """Nothing is kept, so nothing is sent again (as with Pulsar)."""

    def persist(self) -> None:
        """Nothing to store: the subscription lives in memory."""

    def backlog(self) -> tuple[int, int]:
        """(entries, bytes) waiting: always none."""
        return 0, 0

    def send(self, entry: StoredEntry) -> None:
        """Send a just-published entry to the consumer the selector picks, or drop it."""
        consumer = self.selector.pick(entry)
        if consumer is None:
            self.drop_rate.record(entry.num_messages, len(entry.data))
            return
        consumer.forward(entry, NON_PERSISTENT_POSITION[0])
        self.msg_out += entry.num_messages
        self.bytes_out += len(entry.data)
        self.out_rate.record(entry.num_messages, len(entry.data))

    def stats(self) -> dict[str, Any]:
        """The subscription's entry in Pulsar's non-persistent topic stats."""
        msg_rate, byte_rate = self.out_rate.rates()
        return {
            "msgRateOut": msg_rate,
            "msgThroughputOut": byte_rate,
            "msgOutCounter": self.msg_out,
            "bytesOutCounter": self.bytes_out,
            "msgRateRedeliver": 0.0,
            "msgBacklog": 0,
            "msgBacklogNoDelayed": 0,
            "backlogSize": 0,
            "unackedMessages": 0,
            "type": SUB_TYPE_NAMES.get(self.sub_type, "Exclusive") if self.typed else "None",
            "isDurable": False,
            "msgDropRate": self.drop_rate.rates()[0],
            "consumers": [consumer.stats() for consumer in self.consumers],
        }


class NonPersistentTopic(ProducerAccess):
    """One non-persistent topic (or partition): producers, subscriptions, and the counters."""

    def __init__(self, name: TopicName, limits: ClientLimits):
        super().__init__(name, limits)
        self.subscriptions: dict[str, NonPersistentSubscription] = {}
        self.msg_in = 0
        self.bytes_in = 0
        self.in_rate = RateMeter()

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
        """Acknowledge one entry at Pulsar's ``0:0``, then hand it to every subscription.

        The sequence ids are not checked: Pulsar deduplicates persistent topics only.
        """
        if num_messages < 1:
            raise FrameError(f"a SEND carries at least one message, not {num_messages}")
        metadata, _ = split_entry(data)
        entry = entry_of(metadata, num_messages, checksum, data, NON_PERSISTENT_POSITION[1])
        size = len(data) + CHECKSUM_HEADER_BYTES  # counted as the persistent topic counts bytes in
        producer.msg_in += num_messages
        producer.bytes_in += size
        producer.in_rate.record(num_messages, size)
        self.msg_in += num_messages
        self.bytes_in += size
        self.in_rate.record(num_messages, size)
        done(NON_PERSISTENT_POSITION, None)
        for subscription in list(self.subscriptions.values()):
            subscription.send(entry)

    def subscription(self, name: str, sub_type: int) -> NonPersistentSubscription:
        """The named subscription, created if new."""
        existing = self.subscriptions.get(name)
        if existing is None:
            existing = self.subscriptions[name] = NonPersistentSubscription(self, name, sub_type)
        return existing

    def remove_subscription(self, name: str) -> None:
        """Forget a subscription (unsubscribed)."""
        self.subscriptions.pop(name, None)

    def disconnect_clients(self) -> None:
        """Close every producer and consumer (the topic is being deleted by force); clients are told."""
        self.close_producers()
        for subscription in self.subscriptions.values():
            for consumer in list(subscription.consumers):
                consumer.sink.close_consumer(consumer.consumer_id)

    def stats(self) -> dict[str, Any]:
        """Pulsar's non-persistent topic stats (a subset of its fields, with its names)."""
        subscriptions = {name: sub.stats() for name, sub in self.subscriptions.items()}
        return traffic_stats(self.msg_in, self.bytes_in, self.in_rate, subscriptions) | {
            "storageSize": 0,
            "backlogSize": 0,
            "msgDropRate": sum(s["msgDropRate"] for s in subscriptions.values()),
            "publishers": [producer.stats() | {"msgDropRate": 0.0} for producer in self.producers],
            "subscriptions": subscriptions,
            "replication": {},
        } | epoch_stats(self.topic_epoch)
