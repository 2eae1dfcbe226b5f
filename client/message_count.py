"""Counting a subscription's backlog in messages, where Pulsar's stats count entries.

Pulsar's ``msgBacklog`` counts *entries*: a batch of 1000 messages is one. The exact number of
messages comes from the broker entry index (PIP-90), which a broker appends to every entry when
``brokerEntryMetadataInterceptors`` includes
``org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor``: the 0-based position, among
every message ever written to the topic partition, of the entry's last message. Admin REST shows it
in the ``X-Pulsar-Broker-Entry-METADATA-index`` header of get-message-by-id. With ``index(p)`` the
index of the last message at or before position ``p``, a subscription's backlog holds::

    index(lastConfirmedEntry) - index(markDeletePosition) - sum(index(b) - index(a))

messages, over the individually deleted ranges ``(a..b]`` of its cursor (all from one internal
stats reading, so the positions agree with each other). For a mark-delete of ``L:-1`` (nothing
of ledger ``L`` acknowledged), ``index(L:-1) = index(L:0) - messages(L:0)``.

Two limits: acknowledgements of single messages inside a batch (batch-index acks) are not visible
over admin REST, so a batch acknowledged in part counts whole; and a chunked message counts once
per chunk, as the index does. Without the index (a broker without the interceptor, or entries
written before it was enabled) the count is an *estimate*: entries times the average messages
per entry, from the topic's counters since it was loaded (``msgInCounter`` over
``entriesAddedCounter``), else from the entries looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

# Above this many individually deleted ranges on one partition (two lookups each) the count is
# estimated instead: a Shared subscription acknowledging out of order can leave thousands.
DEFAULT_MAX_RANGE_LOOKUPS = 50

_POSITION = re.compile(r"^\s*(-?\d+):(-?\d+)\s*$")
_RANGE = re.compile(r"\(\s*(-?\d+):(-?\d+)\s*\.\.\s*(-?\d+):(-?\d+)\s*\]")


class CountError(ValueError):
    """Internal stats that cannot be read as Pulsar writes them."""


@dataclass(frozen=True, order=True)
class Position:
    """A managed-ledger position ``ledger:entry``; entry -1 is "before the ledger's first entry"."""

    ledger_id: int
    entry_id: int

    @classmethod
    def parse(cls, text: object) -> Position:
        """Read Pulsar's ``"ledger:entry"`` text; any other JSON value is a CountError."""
        match = _POSITION.match(text) if isinstance(text, str) else None
        if match is None:
            raise CountError(f"expected a position 'ledger:entry', got {text!r}")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


def parse_deleted_ranges(text: str) -> list[tuple[Position, Position]]:
    """Pulsar's ``individuallyDeletedMessages``, e.g. ``"[(3:2..3:5],(3:7..3:9]]"``, as ``(a, b)``
    pairs: each acknowledges the entries after ``a`` up to and including ``b``."""
    if not isinstance(text, str) or not text.strip().startswith("[") or not text.strip().endswith("]"):
        raise CountError(f"expected individuallyDeletedMessages like '[(3:2..3:5]]', got {text!r}")
    ranges = []
    for match in _RANGE.finditer(text):
        lower = Position(int(match.group(1)), int(match.group(2)))
        upper = Position(int(match.group(3)), int(match.group(4)))
        if upper < lower:
            raise CountError(f"range ({lower}..{upper}] in {text!r} ends before it starts")
        ranges.append((lower, upper))
    if not ranges and text.strip()[1:-1].strip():
        raise CountError(f"cannot read the ranges of individuallyDeletedMessages {text!r}")
    return ranges


@dataclass(frozen=True)
class EntryIndex:
    """What the admin REST headers of one entry say about its messages."""

    index: int | None  # the broker entry index; None when the broker appended none
    messages: int  # messages in the entry (1 unless a batch)
    publish_time_ms: int | None = None  # when the entry was published, if the headers say


def decode_entry_index(response: httpx.Response) -> EntryIndex:
    """Read an entry's index and message count from get-message-by-id (or peek) headers."""
    headers = response.headers
    index = headers.get("X-Pulsar-Broker-Entry-METADATA-index")
    batch = headers.get("X-Pulsar-num-batch-message")
    try:
        return EntryIndex(int(index) if index is not None else None, int(batch) if batch is not None else 1)
    except ValueError:
        raise CountError(f"unreadable entry headers: index {index!r}, batch {batch!r}") from None


@dataclass(frozen=True)
class CursorState:
    """What a count needs from a partition's internal stats, read at one moment."""

    last_confirmed: Position
    mark_delete: Position
    deleted: tuple[tuple[Position, Position], ...]
    entries_added: int  # entries appended since the topic was loaded

    @classmethod
    def from_internal_stats(cls, stats: Mapping[str, Any], subscription: str) -> CursorState | None:
        """The subscription's cursor in an internal stats document; None if it has no cursor there
        (a non-durable subscription)."""
        cursor = (stats.get("cursors") or {}).get(subscription)
        if cursor is None:
            return None
        return cls(
            last_confirmed=Position.parse(stats.get("lastConfirmedEntry")),
            mark_delete=Position.parse(cursor.get("markDeletePosition")),
            deleted=tuple(parse_deleted_ranges(cursor.get("individuallyDeletedMessages") or "[]")),
            entries_added=int(stats.get("entriesAddedCounter") or 0),
        )

    def positions_needed(self) -> list[Position]:
        """Every position whose index the exact count needs, newest first (the last confirmed entry
        first: when it has no index, no other lookup is worth making)."""
        needed = [self.last_confirmed, self.mark_delete]
        for lower, upper in self.deleted:
            needed += [upper, lower]
        return list(dict.fromkeys(needed))

    def first_unacknowledged(self) -> Position | None:
        """The oldest unacknowledged entry where it is known to exist without a look at the ledgers:
        the entry after the mark-delete, in the last confirmed entry's ledger; else None."""
        first = lookup_position(self.mark_delete, self.last_confirmed)
        return first if first != self.mark_delete and first.ledger_id == self.last_confirmed.ledger_id else None

    def exact_messages(self, index_at: Mapping[Position, int]) -> int:
        """The message count, given ``index(p)`` for every position of :meth:`positions_needed`."""
        messages = index_at[self.last_confirmed] - index_at[self.mark_delete]
        for lower, upper in self.deleted:
            messages -= index_at[upper] - index_at[lower]
        # Never below zero, even if the broker's figures disagree with each other.
        return max(messages, 0)


def lookup_position(position: Position, last_confirmed: Position | None = None) -> Position:
    """The entry to look up for ``index(position)``: the position itself, or the entry after it
    (whose index less its messages is then ``index(position)``): always for ``L:-1``, and, given
    the last confirmed entry, wherever that next entry is known to exist (in the last confirmed
    entry's ledger, not after it). The entry after a mark-delete is the oldest unacknowledged one,
    and often the last confirmed entry, which the count looks up anyway."""
    after = Position(position.ledger_id, position.entry_id + 1)
    if position.entry_id < 0 or (
        last_confirmed is not None and position.ledger_id == last_confirmed.ledger_id and after <= last_confirmed
    ):
        return after
    return position


def index_at(position: Position, entry: EntryIndex, looked_up: Position | None = None) -> int | None:
    """``index(position)`` from the entry ``looked_up`` for it (by default
    :func:`lookup_position`'s); None without an index."""
    if entry.index is None:
        return None
    looked_up = looked_up or lookup_position(position)
    return entry.index if looked_up == position else entry.index - entry.messages


def estimate_messages(entries: int, messages_in: int, entries_added: int, sampled: Iterable[EntryIndex]) -> int:
    """An estimate of the messages in ``entries`` entries: the topic's own average since it was
    loaded (``messages_in`` over ``entries_added``), else the average of the entries ``sampled``,
    else one message per entry."""
    if entries <= 0:
        return 0
    if entries_added > 0 and messages_in >= entries_added:
        return round(entries * messages_in / entries_added)
    counts = [entry.messages for entry in sampled]
    if counts:
        return max(round(entries * sum(counts) / len(counts)), entries)
    return entries


@dataclass(frozen=True)
class PartitionMessageBacklog:
    """One partition's backlog for a subscription, in messages and in entries.

    ``exact`` is False when ``messages`` is an estimate (see the module docstring), or a lower
    bound (``lower_bound``: the entries, when the count stopped because they settled a threshold).
    """

    topic: str
    messages: int
    entries: int
    backlog_size: int
    exact: bool
    lower_bound: bool = False
    oldest_publish_ms: int | None = None  # the oldest unacknowledged entry's publish time, if the count looked it up


@dataclass(frozen=True)
class MessageBacklog:
    """A subscription's backlog in messages and entries, totalled and per partition.

    ``entries`` is Pulsar's ``msgBacklog``; ``messages`` counts each message of a batch. ``exact``
    is True only when every partition's count is. ``lower_bound`` is True when the messages were
    not counted because the entries already showed enough of them (every entry holds at least one
    message): ``messages`` is then the entries, and the backlog holds at least that many.
    ``partitions`` is empty for a non-partitioned topic (the totals are then the topic's own).
    """

    topic: str
    subscription: str
    messages: int
    entries: int
    backlog_size: int
    exact: bool
    partitions: tuple[PartitionMessageBacklog, ...] = ()
    lower_bound: bool = False
    # The oldest unacknowledged entry's publish time, when the count looked up every partition's.
    oldest_publish_ms: int | None = None
