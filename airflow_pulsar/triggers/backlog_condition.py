"""What the backlog sensor waits for: reading a subscription's backlog over admin REST, and judging it.

The backlog is counted in messages, as a user's ``threshold`` means them, where Pulsar's
``msgBacklog`` counts entries (a batch is one): exactly from the broker entry index where the
broker appends it, else estimated (see ``airflow_pulsar.client.message_count``). Only Pulsar's
admin paths are used (stats, internal stats, header-only entry lookups, and peek-messages for the
age of the oldest unacknowledged message), so nothing ever attaches a consumer to the
subscription. Used by the trigger (in the triggerer) and by the sensor's poke mode (in a worker).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from airflow_pulsar import times
from airflow_pulsar.client.admin import AdminNotFoundError, AsyncPulsarAdmin, MessageBacklog


def counted_as(exact: bool, lower_bound: bool) -> str:
    """How a figure of messages was had, in words: exact, estimated, or at least (a lower bound)."""
    return "at least" if lower_bound else "exact" if exact else "estimated"


@dataclass(frozen=True)
class BacklogReading:
    """One look at the backlog: figures in total and per partition, and when they were read.

    ``oldest_message_age`` (seconds) is read only when the condition needs it, else None.
    """

    backlog: MessageBacklog
    oldest_ages: dict[str, float] = field(default_factory=dict)
    read_at: float = 0.0  # epoch seconds

    @property
    def messages(self) -> int:
        """Messages in the backlog, each message of a batch counted (exact or estimated)."""
        return self.backlog.messages

    @property
    def entries(self) -> int:
        """Entries in the backlog (Pulsar's ``msgBacklog``: a batch counts once)."""
        return self.backlog.entries

    @property
    def exact(self) -> bool:
        """Whether ``messages`` is exact on every partition (else estimated, or a lower bound, somewhere)."""
        return self.backlog.exact

    @property
    def lower_bound(self) -> bool:
        """Whether ``messages`` is the entries, a lower bound: the entries already met the threshold,
        so the messages were not counted."""
        return self.backlog.lower_bound

    @property
    def backlog_size(self) -> int:
        """Bytes in the backlog."""
        return self.backlog.backlog_size

    @property
    def oldest_message_age(self) -> float | None:
        """Seconds the oldest unacknowledged message has waited, when read."""
        return max(self.oldest_ages.values()) if self.oldest_ages else None

    @property
    def counted(self) -> str:
        """How ``messages`` was had, in words (see :func:`counted_as`)."""
        return counted_as(self.exact, self.lower_bound)

    def describe(self) -> str:
        """The figures in words, for logs."""
        return f"{self.messages} messages ({self.counted}) in {self.entries} entries, {self.backlog_size} bytes"

    def as_xcom(self) -> dict[str, Any]:
        """Plain JSON: totals, and per partition (empty for a non-partitioned topic)."""
        age = self.oldest_message_age
        return {
            "topic": self.backlog.topic,
            "subscription": self.backlog.subscription,
            "messages": self.messages,
            "entries": self.entries,
            "exact": self.exact,
            "lower_bound": self.lower_bound,
            "backlog_size": self.backlog_size,
            "oldest_message_age": age,
            "partitions": {
                part.topic: {
                    "messages": part.messages,
                    "entries": part.entries,
                    "exact": part.exact,
                    "lower_bound": part.lower_bound,
                    "backlog_size": part.backlog_size,
                    "oldest_message_age": self.oldest_ages.get(part.topic),
                }
                for part in self.backlog.partitions
            },
            "read_at": self.read_at,
            # The same instants as ISO 8601 UTC text (pendulum.parse reads them back).
            "read_time": times.iso_time(round(self.read_at * 1000)),
            "oldest_publish_time": None if age is None else times.iso_time(round((self.read_at - age) * 1000)),
        }


@dataclass(frozen=True)
class BacklogCondition:
    """When a backlog is ready.

    Ready once it holds at least ``threshold`` messages (each message of a batch counted) and
    (if set) ``min_backlog_bytes`` bytes, or, if ``max_message_age`` (seconds) is set, once its
    oldest unacknowledged message has waited that long, however small the backlog is then.
    """

    threshold: int
    min_backlog_bytes: int | None = None
    max_message_age: float | None = None

    def met(self, reading: BacklogReading) -> bool:
        """Whether ``reading`` satisfies the condition."""
        enough = reading.messages >= self.threshold and reading.backlog_size >= (self.min_backlog_bytes or 0)
        age = reading.oldest_message_age
        return enough or (self.max_message_age is not None and age is not None and age >= self.max_message_age)

    def describe(self) -> str:
        """The condition in words, for logs."""
        text = f">= {self.threshold} messages"
        if self.min_backlog_bytes:
            text += f" and >= {self.min_backlog_bytes} bytes"
        if self.max_message_age is not None:
            text += f", or the oldest message >= {self.max_message_age:g} s old"
        return text

    async def read(self, admin: AsyncPulsarAdmin, topic: str, subscription: str, settle_early: bool = False) -> BacklogReading:
        """Read the backlog figures (and the oldest message's age when the condition needs it).

        With ``settle_early`` the messages are counted only when the count can decide: where the
        entries already reach the threshold (every entry holds at least one message), the
        reading's messages are the entries, a lower bound (``lower_bound``).
        """
        backlog = await admin.message_backlog(topic, subscription, at_least=self.threshold if settle_early else None)
        read_at = time.time()
        ages: dict[str, float] = {}
        if self.max_message_age is not None:
            parts = [(part.topic, part.entries, part.oldest_publish_ms) for part in backlog.partitions] or [
                (backlog.topic, backlog.entries, backlog.oldest_publish_ms)
            ]
            # The count looked up the oldest unacknowledged entry of most partitions; the rest are peeked.
            known = {name: published for name, entries, published in parts if entries > 0 and published is not None}
            waiting = [name for name, entries, published in parts if entries > 0 and published is None]
            peeked = await asyncio.gather(*(_oldest_publish_ms(admin, part, subscription) for part in waiting))
            published_at = known | dict(zip(waiting, peeked, strict=True))
            ages = {part: max(read_at - publish_ms / 1000, 0.0) for part, publish_ms in published_at.items() if publish_ms}
        return BacklogReading(backlog, ages, read_at)


async def _oldest_publish_ms(admin: AsyncPulsarAdmin, topic: str, subscription: str) -> int | None:
    try:
        return (await admin.peek_message(topic, subscription)).publish_time_ms
    except AdminNotFoundError:  # acknowledged since the stats were read
        return None
