"""When a subscription's messages must be counted again: counting costs a few admin calls per
partition holding a backlog (internal stats, entry lookups, a peek for the oldest message), while
the topic's stats, read anyway, say whether anything moved. A count is reused while the stats
figures that change with every publish, dispatch, acknowledgement and cursor move are what they
were, and for at most :data:`MAX_REUSE_SECONDS`."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_REUSE_SECONDS = 60.0
# The subscription's stats figures that move when its backlog or its oldest message can change.
_SUBSCRIPTION_FIGURES = (
    "msgBacklog", "backlogSize", "msgOutCounter", "unackedMessages", "lastMarkDeleteAdvancedTimestamp", "lastAckedTimestamp",
)  # fmt: skip


@dataclass(frozen=True)
class Count:
    """A subscription's counted backlog: messages (exact or estimated), entries, and the publish
    time of its oldest message (epoch seconds; None without a backlog)."""

    messages: int
    exact: bool
    entries: int
    oldest_publish: float | None


def fingerprint(topic_stats: Mapping[str, Any], subscription_stats: Mapping[str, Any]) -> tuple[Any, ...]:
    """The figures whose change means the count may have changed."""
    return (topic_stats.get("msgInCounter"), *(subscription_stats.get(name) for name in _SUBSCRIPTION_FIGURES))


class CountMemo:
    """The last count of each subscription of one connection, with the fingerprint it was taken at."""

    def __init__(self, max_reuse_seconds: float = MAX_REUSE_SECONDS) -> None:
        self.max_reuse_seconds = max_reuse_seconds
        self._counts: dict[tuple[str, str], tuple[tuple[Any, ...], float, Count]] = {}

    def reusable(self, topic: str, subscription: str, now_fingerprint: tuple[Any, ...]) -> Count | None:
        """The last count, if nothing moved since and it is recent enough."""
        held = self._counts.get((topic, subscription))
        if held is None:
            return None
        taken_fingerprint, taken_at, count = held
        if taken_fingerprint != now_fingerprint or time.monotonic() - taken_at > self.max_reuse_seconds:
            return None
        return count

    def keep(self, topic: str, subscription: str, taken_fingerprint: tuple[Any, ...], count: Count) -> None:
        """Remember a fresh count."""
        self._counts[(topic, subscription)] = (taken_fingerprint, time.monotonic(), count)

    def forget_others(self, present: set[tuple[str, str]]) -> None:
        """Drop the counts of subscriptions no longer listed (keeps the memo as small as the page)."""
        for key in set(self._counts) - present:
            del self._counts[key]
