"""Allocating a batch's entries to Spark tasks, the way a pull consumer group shares its queues.

RocketMQ's averaging allocation gives each of ``n`` consumers a contiguous run of the sorted
queues, ``total // n`` each and one more to the first ``total % n``. Here the "queues" are the
entries of a partition's backlog and the "consumers" are the readers of its sub-ranges: a large
partition is cut into contiguous sub-ranges of near-equal entry counts, so ``min_partitions``
Spark tasks share the work evenly. A partition's entries may span several ledgers; the cut
points are counted across them.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from ..job.plan import Position


@dataclass(frozen=True)
class Segment:
    """Entries ``first..last`` (inclusive) of one ledger."""

    ledger_id: int
    first: int
    last: int

    @property
    def entries(self) -> int:
        return self.last - self.first + 1


def average_shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` contiguous shares, the first ``total % parts`` one larger."""
    if parts <= 0:
        raise ValueError(f"parts must be positive, got {parts}")
    base, extra = divmod(total, parts)
    return [base + 1 if index < extra else base for index in range(parts)]


def backlog_segments(after: Position, last: Position, ledgers: Sequence[tuple[int, int]] = ()) -> list[Segment]:
    """The entries after ``after`` up to ``last``, per ledger.

    ``ledgers`` lists ``(ledger id, entries)`` in log order, as Pulsar's internal stats do; it is
    needed only when the range spans ledgers. The last ledger's count (0 while it is open) is
    not used: ``last`` bounds it.
    """
    if last <= after:
        return []
    if after.ledger_id == last.ledger_id:
        return [Segment(last.ledger_id, after.entry_id + 1, last.entry_id)]
    if not ledgers:
        raise ValueError(f"the range ({after}, {last}] spans ledgers; their entry counts are needed")
    segments = []
    for ledger_id, entries in ledgers:
        if ledger_id < after.ledger_id or ledger_id > last.ledger_id:
            continue
        first = after.entry_id + 1 if ledger_id == after.ledger_id else 0
        end = last.entry_id if ledger_id == last.ledger_id else entries - 1
        if end >= first:
            segments.append(Segment(ledger_id, first, end))
    if not segments or segments[-1].ledger_id != last.ledger_id:
        segments.append(Segment(last.ledger_id, 0, last.entry_id))
    return segments


def pieces_per_partition(entries: Sequence[int], min_pieces: int) -> list[int]:
    """How many sub-ranges each partition gets so that there are at least ``min_pieces`` in all.

    Every partition with entries gets one; further pieces go, one at a time, to the partition
    whose pieces are largest, while a piece holds more than one entry.
    """
    pieces = [1 if count > 0 else 0 for count in entries]
    heap: list[tuple[float, int]] = [(-count, index) for index, count in enumerate(entries) if count > 1]
    heapq.heapify(heap)
    while sum(pieces) < min_pieces and heap:
        _, index = heapq.heappop(heap)
        pieces[index] += 1
        size = entries[index] / pieces[index]
        if size > 1:
            heapq.heappush(heap, (-size, index))
    return pieces


def split_segments(after: Position, segments: Sequence[Segment], pieces: int) -> list[tuple[Position, Position]]:
    """Cut the entries of ``segments`` (which follow ``after``) into ``pieces`` contiguous
    ``(after, last)`` ranges of averaged sizes."""
    total = sum(segment.entries for segment in segments)
    ranges: list[tuple[Position, Position]] = []
    start = after
    offset = 0
    for share in average_shares(total, min(pieces, total)):
        offset += share
        end = _position_at(segments, offset - 1)
        ranges.append((start, end))
        start = end
    return ranges


def _position_at(segments: Sequence[Segment], offset: int) -> Position:
    """The entry ``offset`` places (from 0) into the concatenated segments."""
    for segment in segments:
        if offset < segment.entries:
            return Position(segment.ledger_id, segment.first + offset)
        offset -= segment.entries
    raise IndexError("offset past the segments")
