"""Which consumer of a subscription gets the next entry, one policy per subscription type."""

from __future__ import annotations

import bisect
from typing import Protocol

from airflow_pulsar.client.hashing import murmur3_32
from airflow_pulsar.client.protocol.PulsarApi_pb2 import CommandSubscribe, KeySharedMode

from .consumer import ServerConsumer
from .storage import StoredEntry

# Pulsar's Key_Shared hash space: sticky ranges cover 0..65535.
KEY_HASH_RANGE = 65536
NO_KEY = b"NONE_KEY"
_POINTS_PER_CONSUMER = 100


class ConsumerSelector(Protocol):
    """Chooses the consumer for an entry, or None when no suitable consumer is available (has
    permits, is not blocked on unacknowledged messages, and its connection keeps up)."""

    consumers: list[ServerConsumer]

    def add(self, consumer: ServerConsumer) -> None: ...

    def remove(self, consumer: ServerConsumer) -> None: ...

    def pick(self, entry: StoredEntry) -> ServerConsumer | None: ...


class SingleActiveSelector:
    """Exclusive and Failover: one active consumer receives everything.

    Consumers rank by (priority level, consumer name), and only those at the highest priority
    level are candidates. On a partition of a partitioned topic the active one is the candidate
    at ``partition mod candidates``, which spreads the partitions. On a non-partitioned topic it
    is chosen on a hash ring: each candidate owns the Murmur3 hashes of its name followed by 0 to
    99, and the topic's full name hashes to the first point at or after it (wrapping around).
    This is how Pulsar chooses, so a client sees the same active consumer on either broker.
    """

    def __init__(self, partition: int = -1, topic: str = ""):
        self.consumers: list[ServerConsumer] = []
        self.partition = partition
        self.topic_hash = murmur3_32(topic)
        self.active: ServerConsumer | None = None

    def add(self, consumer: ServerConsumer) -> None:
        self.consumers.append(consumer)
        self._elect()

    def remove(self, consumer: ServerConsumer) -> None:
        self.consumers.remove(consumer)
        self._elect()

    def _elect(self) -> None:
        ranked = sorted(self.consumers, key=lambda c: (c.priority, c.name))
        if not ranked:
            self.active = None
            return
        candidates = [c for c in ranked if c.priority == ranked[0].priority]
        if self.partition >= 0:
            self.active = candidates[self.partition % len(candidates)]
        else:
            self.active = candidates[self._ring_index(candidates)]

    def _ring_index(self, candidates: list[ServerConsumer]) -> int:
        ring: dict[int, int] = {}
        for index, consumer in enumerate(candidates):
            for replica in range(_POINTS_PER_CONSUMER):
                ring[murmur3_32(f"{consumer.name}{replica}")] = index
        points = sorted(ring)
        at = bisect.bisect_left(points, self.topic_hash)
        return ring[points[at % len(points)]]

    def pick(self, entry: StoredEntry) -> ServerConsumer | None:
        active = self.active
        return active if active is not None and active.available else None


class RoundRobinSelector:
    """Shared: entries rotate over the available consumers, highest priority level first."""

    def __init__(self) -> None:
        self.consumers: list[ServerConsumer] = []
        self._next = 0

    def add(self, consumer: ServerConsumer) -> None:
        self.consumers.append(consumer)

    def remove(self, consumer: ServerConsumer) -> None:
        self.consumers.remove(consumer)

    def pick(self, entry: StoredEntry) -> ServerConsumer | None:
        consumers = self.consumers
        count = len(consumers)
        best: ServerConsumer | None = None
        for step in range(count):
            candidate = consumers[(self._next + step) % count]
            if candidate.available and (best is None or candidate.priority < best.priority):
                best = candidate
                if candidate.priority == 0:
                    break
        if best is not None:
            self._next = (consumers.index(best) + 1) % count
        return best


class KeySharedSelector:
    """Key_Shared: each key hash belongs to one consumer.

    AUTO_SPLIT places every consumer at many points of a hash ring (consistent hashing, so a
    joining or leaving consumer moves only a share of the keys); STICKY uses the hash ranges the
    consumers declared.
    """

    def __init__(self) -> None:
        self.consumers: list[ServerConsumer] = []
        self._ring: list[int] = []
        self._owners: list[ServerConsumer] = []

    def add(self, consumer: ServerConsumer) -> None:
        self.consumers.append(consumer)
        self._rebuild()

    def remove(self, consumer: ServerConsumer) -> None:
        self.consumers.remove(consumer)
        self._rebuild()

    def _rebuild(self) -> None:
        points = []
        for consumer in self.consumers:
            for i in range(_POINTS_PER_CONSUMER):
                points.append((murmur3_32(f"{consumer.name}{consumer.consumer_id}{i}"), consumer.consumer_id, consumer))
        points.sort(key=lambda p: (p[0], p[1]))
        self._ring = [p[0] for p in points]
        self._owners = [p[2] for p in points]

    def owner(self, key: bytes | None) -> ServerConsumer | None:
        """The consumer that owns a key, whatever its permits."""
        if not self.consumers:
            return None
        key_hash = murmur3_32(key or NO_KEY)
        sticky = key_hash % KEY_HASH_RANGE
        for consumer in self.consumers:
            meta = consumer.key_shared_meta
            if meta is not None and meta.keySharedMode == KeySharedMode.STICKY:
                if any(r.start <= sticky <= r.end for r in meta.hashRanges):
                    return consumer
        index = bisect.bisect_left(self._ring, key_hash)
        return self._owners[index % len(self._owners)] if self._owners else None

    def pick(self, entry: StoredEntry) -> ServerConsumer | None:
        owner = self.owner(entry.sticky_key)
        return owner if owner is not None and owner.available else None


def selector_for(sub_type: int, topic: str, partition: int) -> ConsumerSelector:
    """The selector for a CommandSubscribe.SubType value on ``topic`` (its full name)."""
    if sub_type == CommandSubscribe.Shared:
        return RoundRobinSelector()
    if sub_type == CommandSubscribe.Key_Shared:
        return KeySharedSelector()
    return SingleActiveSelector(partition, topic)
