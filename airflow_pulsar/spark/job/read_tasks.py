"""Which ranges of a plan each Spark task reads.

A range is one reader over one topic partition's entries; a Spark task costs far more than a
reader (scheduling, a Python worker's round trip, its own output file). So when a plan has more
ranges than the job has use for tasks, small ranges are read several to a task, one after the
other, the way Spark packs small files into one split: the largest ranges are placed first, each
on the task holding the fewest entries so far. A range is never cut here; the planner cuts large
partitions (``min_partitions``) before the plan is fixed.

Grouping changes only which task reads a range: every range is read whole, and the rows, the
table and what is acknowledged are the same.
"""

from __future__ import annotations

from .plan import ReadRange


def entry_estimate(read_range: ReadRange) -> int:
    """The entries a range spans, as far as its ids tell: exact within one ledger; across ledgers
    the last ledger's share only (entry ids restart with each ledger), which still orders ranges."""
    after, last = read_range.after, read_range.last
    if after.ledger_id == last.ledger_id:
        return max(last.entry_id - after.entry_id, 1)
    return last.entry_id + 1


def task_ranges(ranges: tuple[ReadRange, ...] | list[ReadRange], tasks: int) -> list[list[int]]:
    """The indexes (into ``ranges``) each of at most ``tasks`` Spark tasks reads, in plan order
    within a task, tasks ordered by their first range; balanced by :func:`entry_estimate`."""
    if tasks < 1:
        raise ValueError(f"tasks must be >= 1, got {tasks}")
    sizes = [entry_estimate(read_range) for read_range in ranges]
    count = min(tasks, len(ranges))
    groups: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for index in sorted(range(len(ranges)), key=lambda i: -sizes[i]):
        lightest = loads.index(min(loads))
        groups[lightest].append(index)
        loads[lightest] += sizes[index]
    return sorted(sorted(group) for group in groups)
