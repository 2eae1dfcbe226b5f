"""The ingest plan: which entries of which topic partitions one batch takes, fixed before Spark runs.

Positions are whole entries (``ledger:entry``). A partition's part of the plan starts after the
subscription's mark-delete position and ends at the partition's newest entry a reader can be given
when it was planned (on a topic written in transactions, at its max read position, past the
markers and aborted messages that follow that entry), or earlier when a message budget stops its
reader (the job then reports where it stopped). The
plan travels as JSON: in the plan log on the broker, and as the Spark job's argument.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from airflow_pulsar.client import MessageId


@dataclass(frozen=True, order=True)
class Position:
    """An entry of a topic partition: ledger and entry id, ordered as the log is."""

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"

    @classmethod
    def parse(cls, text: str) -> Position:
        """Read ``"ledger:entry"`` (Pulsar's notation, as in internal stats)."""
        ledger, sep, entry = str(text).partition(":")
        try:
            if not sep:
                raise ValueError
            return cls(int(ledger), int(entry))
        except ValueError:
            raise ValueError(f"a position is 'ledger:entry', got {text!r}") from None

    @classmethod
    def of(cls, message_id: MessageId) -> Position:
        """The entry holding a message."""
        return cls(message_id.ledger_id(), message_id.entry_id())

    def message_id(self, partition: int) -> MessageId:
        """The whole entry as a MessageId (batch index -1), e.g. to start a reader after it."""
        return MessageId(partition, self.ledger_id, self.entry_id)


@dataclass(frozen=True)
class ReadRange:
    """The entries one reader reads from one topic partition: after ``after`` up to ``last``.

    ``message_budget`` (when set) stops the reader earlier, before the first entry that would
    take it past the budget; at least one entry is always read. ``last_message`` (when set) is the
    partition's newest entry a reader can be given: the entries after it up to ``last`` are
    transaction markers and aborted messages, which no reader is given, so the range ends there.
    """

    topic: str
    partition: int
    after: Position
    last: Position
    message_budget: int | None = None
    last_message: Position | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "after": str(self.after),
            "last": str(self.last),
            "message_budget": self.message_budget,
            "last_message": None if self.last_message is None else str(self.last_message),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReadRange:
        last_message = data.get("last_message")
        return cls(
            data["topic"],
            int(data["partition"]),
            Position.parse(data["after"]),
            Position.parse(data["last"]),
            data.get("message_budget"),
            None if last_message is None else Position.parse(last_message),
        )


@dataclass(frozen=True)
class PartitionPlan:
    """One topic partition's share of a batch.

    ``topic`` is the partition's own topic name (``...-partition-N``); ``source_topic`` the topic
    as the user named it, written to the table's ``topic`` column with ``partition``.
    """

    topic: str
    source_topic: str
    partition: int
    mark_delete: Position
    last: Position
    ranges: tuple[ReadRange, ...]
    message_budget: int | None = None

    @property
    def budgeted(self) -> bool:
        """Whether a message budget may end this partition's batch before ``last``."""
        return self.message_budget is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "source_topic": self.source_topic,
            "partition": self.partition,
            "mark_delete": str(self.mark_delete),
            "last": str(self.last),
            "message_budget": self.message_budget,
            "ranges": [r.to_dict() for r in self.ranges],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PartitionPlan:
        return cls(
            topic=data["topic"],
            source_topic=data["source_topic"],
            partition=int(data["partition"]),
            mark_delete=Position.parse(data["mark_delete"]),
            last=Position.parse(data["last"]),
            ranges=tuple(ReadRange.from_dict(r) for r in data["ranges"]),
            message_budget=data.get("message_budget"),
        )


@dataclass(frozen=True)
class IngestPlan:
    """One batch: its id, the subscription and table, and every partition's ranges.

    ``sequence`` grows with each batch the subscription plans for the table and stays with the
    batch when it is written again: Delta records it as the write's transaction version.
    """

    batch_id: str
    subscription: str
    table: str
    partitions: tuple[PartitionPlan, ...]
    planned_at: str = ""
    sequence: int = 0

    @property
    def ranges(self) -> list[ReadRange]:
        """Every range, in partition order: one reader each (Spark tasks take one or more, see :mod:`.read_tasks`)."""
        return [r for p in self.partitions for r in p.ranges]

    def partition(self, topic: str) -> PartitionPlan:
        """The plan of one partition topic."""
        for part in self.partitions:
            if part.topic == topic:
                return part
        raise KeyError(f"batch {self.batch_id} has no partition {topic}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "subscription": self.subscription,
            "table": self.table,
            "planned_at": self.planned_at,
            "sequence": self.sequence,
            "partitions": [p.to_dict() for p in self.partitions],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IngestPlan:
        return cls(
            batch_id=data["batch_id"],
            subscription=data["subscription"],
            table=data["table"],
            partitions=tuple(PartitionPlan.from_dict(p) for p in data["partitions"]),
            planned_at=data.get("planned_at", ""),
            sequence=int(data.get("sequence", 0)),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> IngestPlan:
        return cls.from_dict(json.loads(text))


def batch_id_for(subscription: str, table: str, starts: dict[str, Position]) -> str:
    """The batch id: a digest of the subscription, the table and where each partition starts.

    A batch planned again from the same positions (after a crash, or after the plan log was
    lost) gets the same id, so writing it replaces the partition an earlier attempt wrote.
    """
    key = json.dumps([subscription, table, sorted((t, str(p)) for t, p in starts.items())])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class BatchOutcome:
    """What the job wrote for a batch: rows and the last entry written, per partition topic."""

    rows: dict[str, int] = field(default_factory=dict)
    ends: dict[str, Position] = field(default_factory=dict)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    def to_dict(self) -> dict[str, Any]:
        return {"rows": dict(self.rows), "ends": {t: str(p) for t, p in self.ends.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchOutcome:
        return cls(
            rows={t: int(n) for t, n in data.get("rows", {}).items()},
            ends={t: Position.parse(p) for t, p in data.get("ends", {}).items()},
        )
