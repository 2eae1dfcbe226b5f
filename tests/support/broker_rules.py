"""Pulsar's broker-side rules that tests need to predict, written from Pulsar's documented behaviour.

Both brokers must follow them, so a test asks these functions what to expect instead of assuming
one broker's choice.
"""

from __future__ import annotations

import bisect

from airflow_pulsar.client.hashing import murmur3_32


def failover_active(topic: str, names: list[str]) -> str:
    """The active consumer of a Failover subscription on a NON-partitioned topic, among consumers
    of equal priority: the owner of the first point at or after the Murmur3 hash of the topic's
    full name, on a ring where each consumer owns the hashes of its name followed by 0 to 99."""
    full = topic if "://" in topic else f"persistent://public/default/{topic}"
    ranked = sorted(names)
    ring = {murmur3_32(f"{name}{replica}"): index for index, name in enumerate(ranked) for replica in range(100)}
    points = sorted(ring)
    at = bisect.bisect_left(points, murmur3_32(full))
    return ranked[ring[points[at % len(points)]]]
