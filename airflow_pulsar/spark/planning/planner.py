"""Planning a batch from where each partition stands: ranges, budgets and the batch id.

Without a message cap, each partition's backlog (after its mark-delete position, up to its newest
entry) is taken whole and cut into sub-ranges so at least ``min_partitions`` Spark tasks share it
(see :mod:`.allocation`). With ``max_messages``, the cap is shared evenly across the partitions
with a backlog and each partition is read by one reader that stops at its share: where a share
ends is only known while reading, so a capped partition is not cut.

On a topic written in transactions, a partition with messages to read is taken up to its max read
position where that lies past its last message (see :mod:`.read_limits`): the batch's cumulative
acknowledgement then also covers the transaction markers and aborted messages that follow it.

A batch's sequence number is the time it was planned, in microseconds, and always above the
previous batch's: it grows from batch to batch even when the plan log that held the previous one
was lost (a Delta table skips a write whose transaction version is not above the last one).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone

from airflow_pulsar.client.admin import AdminError, PulsarAdmin

from ..job.plan import IngestPlan, PartitionPlan, Position, ReadRange, batch_id_for
from .allocation import average_shares, backlog_segments, pieces_per_partition, split_segments
from .hold import PartitionState

# (ledger id, entries) of a partition topic's ledgers, in log order (from Pulsar's internal stats).
LedgerLayout = Callable[[str], Sequence[tuple[int, int]]]

log = logging.getLogger(__name__)


def ledger_layout(admin: PulsarAdmin, topic: str) -> list[tuple[int, int]]:
    """A partition topic's ledgers from the admin API's internal stats; empty if unavailable."""
    try:
        stats = admin.internal_stats(topic)
    except AdminError as exc:
        log.warning("No ledger layout of %s (%s): its range is read by one task.", topic, exc)
        return []
    return [(int(ledger["ledgerId"]), int(ledger["entries"])) for ledger in stats.get("ledgers", [])]


def plan_batch(
    states: Sequence[PartitionState],
    subscription: str,
    table: str,
    *,
    min_partitions: int = 1,
    max_messages: int | None = None,
    ledgers_of: LedgerLayout | None = None,
    previous: IngestPlan | None = None,
    max_reads: Mapping[str, Position] | None = None,
) -> IngestPlan | None:
    """The next batch after ``previous`` (the newest one planned, if any), or None when no
    partition has a backlog. ``max_reads``: partitions' max read positions, read before ``states``."""
    if min_partitions < 1:
        raise ValueError(f"min_partitions must be >= 1, got {min_partitions}")
    if max_messages is not None and max_messages < 1:
        raise ValueError(f"max_messages must be >= 1 or None, got {max_messages}")
    pending = [_through_max_read(state, (max_reads or {}).get(state.topic)) for state in states if not state.empty]
    if not pending:
        return None
    batch_id = batch_id_for(subscription, table, {state.topic: state.mark_delete for state in pending})
    if max_messages is not None:
        budgets = [max(share, 1) for share in average_shares(max_messages, len(pending))]
        partitions = [_capped(state, budget) for state, budget in zip(pending, budgets, strict=True)]
    else:
        partitions = _split(pending, min_partitions, ledgers_of)
    planned_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    sequence = max(time.time_ns() // 1000, previous.sequence + 1 if previous is not None else 0)
    return IngestPlan(batch_id, subscription, table, tuple(partitions), planned_at, sequence)


def _through_max_read(state: PartitionState, max_read: Position | None) -> PartitionState:
    """The partition taken through its max read position, where that lies past its last message."""
    return state if max_read is None or max_read <= state.last else replace(state, last=max_read, last_message=state.last)


def _capped(state: PartitionState, budget: int) -> PartitionPlan:
    read = ReadRange(state.topic, state.partition, state.mark_delete, state.last, budget, state.last_message)
    return PartitionPlan(state.topic, state.source_topic, state.partition, state.mark_delete, state.last, (read,), budget)


def _split(states: Sequence[PartitionState], min_partitions: int, ledgers_of: LedgerLayout | None) -> list[PartitionPlan]:
    layouts = []
    for state in states:
        spans_ledgers = state.mark_delete.ledger_id != state.last.ledger_id
        ledgers = ledgers_of(state.topic) if spans_ledgers and ledgers_of is not None else ()
        # Without the ledger layout a range across ledgers cannot be measured: one reader takes it.
        layouts.append(backlog_segments(state.mark_delete, state.last, ledgers) if not spans_ledgers or ledgers else None)
    entries = [sum(s.entries for s in segments) if segments is not None else 1 for segments in layouts]
    pieces = pieces_per_partition(entries, min_partitions)
    partitions = []
    for state, segments, count in zip(states, layouts, pieces, strict=True):
        if segments is None or count <= 1:
            cuts = [(state.mark_delete, state.last)]
        else:
            cuts = split_segments(state.mark_delete, segments, count)
        ranges = tuple(ReadRange(state.topic, state.partition, after, last, None, state.last_message) for after, last in cuts)
        partitions.append(PartitionPlan(state.topic, state.source_topic, state.partition, state.mark_delete, state.last, ranges))
    return partitions
