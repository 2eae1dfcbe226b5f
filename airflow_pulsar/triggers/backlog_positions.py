"""Where a backlog event fired, per partition, and how much of a backlog lies beyond those positions.

The backlog event trigger remembers, for each partition, the newest entry it saw when it fired
(its ``ledger:entry`` and broker entry index). Later it counts only the backlog's messages
published after that entry: the arrivals since (the difference of the two entries' broker entry
indexes, PIP-90), capped by the partition's backlog. That is exact for a consumer that
acknowledges in order (cumulatively, as ``PulsarToTableOperator`` does), and an upper bound when
messages after the position are acknowledged before older ones. Without a broker entry index the
arrivals are estimated from the entry ids within one ledger (the backlog's messages per entry);
once the ledger rolled over, the whole backlog counts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_pulsar.client.admin import AdminError, AdminNotFoundError, AsyncPulsarAdmin, PartitionMessageBacklog, PeekedMessage, Position


def entry_position(message_id: str) -> Position:
    """The ``ledger:entry`` of a message id text (``ledger:entry[:partition[:batch]]``)."""
    ledger, entry = message_id.split(":")[:2]
    return Position(int(ledger), int(entry))


@dataclass(frozen=True)
class FiredPosition:
    """The newest entry of a partition when the trigger fired: ``ledger:entry`` and broker entry index."""

    message_id: str
    index: int | None

    @property
    def position(self) -> Position:
        """The entry's managed-ledger position."""
        return entry_position(self.message_id)

    def as_json(self) -> dict[str, Any]:
        """Plain JSON, for the event and the asset state store."""
        return {"message_id": self.message_id, "index": self.index}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> FiredPosition:
        """Read back :meth:`as_json`."""
        index = value.get("index")
        return cls(str(value["message_id"]), None if index is None else int(index))


async def newest_entry(admin: AsyncPulsarAdmin, partition: str) -> FiredPosition | None:
    """The newest entry of a partition (acknowledged or not); None while it has none."""
    try:
        entry = await admin.examine_message(partition, "latest", 1)
    except AdminError:  # Pulsar answers "no messages" with an error status
        return None
    return FiredPosition(entry.message_id, entry.index)


def messages_beyond(backlog: PartitionMessageBacklog, fired: FiredPosition | None, newest: FiredPosition | None) -> int:
    """The partition's backlog messages published after ``fired`` (all of them if it never fired)."""
    if fired is None:
        return backlog.messages
    if newest is None or newest.message_id == fired.message_id:
        return 0
    if newest.index is not None and fired.index is not None:
        arrivals = newest.index - fired.index
    elif newest.position.ledger_id == fired.position.ledger_id:
        per_entry = backlog.messages / backlog.entries if backlog.entries else 1.0
        arrivals = round((newest.position.entry_id - fired.position.entry_id) * max(per_entry, 1.0))
    else:
        return backlog.messages
    return max(min(backlog.messages, arrivals), 0)


async def oldest_age_beyond(
    admin: AsyncPulsarAdmin, partition: str, subscription: str, fired: FiredPosition | None
) -> float | None:
    """Seconds the oldest unacknowledged message after ``fired`` has waited; None if unknown or none."""
    try:
        oldest: PeekedMessage | None = await admin.peek_message(partition, subscription)
    except AdminNotFoundError:  # nothing unacknowledged
        return None
    if oldest is not None and fired is not None and entry_position(oldest.message_id) <= fired.position:
        after = fired.position
        try:
            oldest = await admin.get_message_by_id(partition, after.ledger_id, after.entry_id + 1)
        except AdminError:  # not written yet, or in a later ledger: no age to go by
            return None
    return None if oldest is None else max(time.time() - oldest.publish_time_ms / 1000, 0.0)


async def read_beyond(
    admin: AsyncPulsarAdmin,
    subscription: str,
    partitions: list[PartitionMessageBacklog],
    fired: Mapping[str, FiredPosition],
    with_age: bool,
) -> tuple[dict[str, FiredPosition | None], dict[str, int], dict[str, float]]:
    """For each partition: its newest entry, its backlog messages beyond ``fired``, and (with
    ``with_age``) the age of the oldest of those; partitions read concurrently."""

    async def one(part: PartitionMessageBacklog) -> tuple[FiredPosition | None, int, float | None]:
        newest = await newest_entry(admin, part.topic)
        beyond = messages_beyond(part, fired.get(part.topic), newest)
        age = await oldest_age_beyond(admin, part.topic, subscription, fired.get(part.topic)) if with_age and beyond else None
        return newest, beyond, age

    results = await asyncio.gather(*(one(part) for part in partitions))
    newest = {part.topic: result[0] for part, result in zip(partitions, results, strict=True)}
    beyond = {part.topic: result[1] for part, result in zip(partitions, results, strict=True)}
    ages = {part.topic: result[2] for part, result in zip(partitions, results, strict=True) if result[2] is not None}
    return newest, beyond, ages
