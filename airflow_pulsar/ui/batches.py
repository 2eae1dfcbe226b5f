"""The ingest batches of a plan log (see :mod:`airflow_pulsar.spark.planning.plan_log`), as the
page lists them: each batch's ranges per partition, rows, state and when it reached each state.

The newest :data:`RECORDS_READ` records are looked at over the admin API (examine-message), so
nothing subscribes to the log or moves its cursor. The log keeps what its subscription has not
acknowledged and what retention keeps: on a broker that trims acknowledged ledgers the page may
show only the latest batches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from airflow_pulsar.client.admin import AsyncPulsarAdmin, PeekedMessage
from airflow_pulsar.spark.job.records import ACKED, COMMITTED, PLANNED, PlanRecord

PLAN_LOG_SUFFIX = "-ingest-plans"
RECORDS_READ = 30
_STATE_ORDER = {PLANNED: 0, COMMITTED: 1, ACKED: 2}


@dataclass(frozen=True)
class BatchRange:
    """What a batch reads from one partition: after ``after`` through ``through`` (ledger:entry),
    and the rows written from it once committed."""

    topic: str
    after: str
    through: str
    rows: int | None


@dataclass(frozen=True)
class RunLink:
    """The Airflow task instance that ran a batch."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1


@dataclass(frozen=True)
class IngestBatch:
    """One batch of a table as its newest records in the plan log give it.

    ``state`` is the furthest of ``planned``, ``committed`` and ``acknowledged`` its current
    attempt reached; the times are epoch milliseconds of the records' publication.
    """

    plan_log: str
    table: str
    subscription: str
    batch_id: str
    sequence: int
    attempt: int
    state: str
    ranges: tuple[BatchRange, ...]
    planned_ms: int | None = None
    committed_ms: int | None = None
    acked_ms: int | None = None
    run: RunLink | None = None

    @property
    def rows(self) -> int | None:
        """Rows written, once committed."""
        counted = [part.rows for part in self.ranges if part.rows is not None]
        return sum(counted) if counted else None


async def read_batches(
    admin: AsyncPulsarAdmin, plan_log: str, bounded: Callable[[Awaitable[Any]], Awaitable[Any]]
) -> list[IngestBatch]:
    """The batches of the newest records of ``plan_log``, newest batch first (empty when unreadable)."""
    peeked = await asyncio.gather(
        *(bounded(admin.examine_message(plan_log, "latest", position)) for position in range(1, RECORDS_READ + 1)),
        return_exceptions=True,
    )
    records: list[tuple[PeekedMessage, PlanRecord]] = []
    for message in peeked:
        if isinstance(message, BaseException):
            continue  # past the first record (AdminNotFoundError), or trimmed meanwhile
        try:
            records.append((message, PlanRecord.from_json(message.data)))
        except (ValueError, KeyError, TypeError):
            continue  # not a plan record
    records.sort(key=lambda item: item[0].publish_time_ms)
    batches: dict[str, IngestBatch] = {}
    for message, record in records:
        batches[record.batch_id] = _with_record(batches.get(record.batch_id), plan_log, message.publish_time_ms, record)
    return sorted(batches.values(), key=lambda batch: (batch.sequence, batch.planned_ms or 0), reverse=True)


def _with_record(batch: IngestBatch | None, plan_log: str, published_ms: int, record: PlanRecord) -> IngestBatch:
    """``batch`` as it stands after ``record`` (records come oldest first)."""
    if batch is None or record.attempt > batch.attempt:
        plan = record.plan
        ranges = tuple(BatchRange(part.topic, str(part.mark_delete), str(part.last), None) for part in plan.partitions)
        batch = IngestBatch(plan_log, plan.table, plan.subscription, plan.batch_id, plan.sequence, record.attempt, PLANNED, ranges)
    elif record.attempt < batch.attempt:
        return batch  # the report of an attempt given up since
    if record.outcome is not None:
        outcome = record.outcome
        batch = replace(
            batch,
            ranges=tuple(
                replace(part, through=str(outcome.ends.get(part.topic, part.through)), rows=outcome.rows.get(part.topic, 0))
                for part in batch.ranges
            ),
        )
    if _STATE_ORDER[record.state] >= _STATE_ORDER[batch.state]:
        batch = replace(batch, state=record.state)
    if record.state == PLANNED:
        return replace(batch, planned_ms=published_ms)
    if record.state == COMMITTED:
        return replace(batch, committed_ms=published_ms)
    return replace(batch, acked_ms=published_ms)
