"""A subscription's backlog on a topic partition that holds transactions, counted as a consumer
receives it.

On such a partition the log also holds one marker entry per ended transaction, the messages of
aborted transactions, and, from the first entry of the oldest open transaction on, entries that
wait for it (Pulsar's max read position). A consumer receives none of them, so the count takes the
entries after the subscription's mark-delete position up to the max read position (from the
transaction buffer's stats), leaves out those individually acknowledged, and asks each one's
headers whether a consumer will get it: not a marker (``X-Pulsar-marker-type``), not aborted
(``X-Pulsar-txn-aborted``), not past the max read position (``X-Pulsar-txn-uncommitted``).

One header-only lookup per entry: beyond ``max_entry_lookups`` entries the count is an estimate
(the entries up to the max read position, times the topic's messages per entry). A partition
counts as holding transactions when its stats report any open, committed or aborted since the
topic was loaded.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from ..message_count import CountError, CursorState, PartitionMessageBacklog, Position, estimate_messages
from ..topic_name import TopicName
from .calls import AdminCall, Operation, UnexpectedResponse, concurrently, decode_document
from .errors import AdminError
from .paths import topic_path
from .transactions import transaction_buffer_stats

# Above this many entries to look at on one partition, its count is estimated.
DEFAULT_MAX_ENTRY_LOOKUPS = 1000

_TRANSACTION_COUNTS = ("ongoingTxnCount", "committedTxnCount", "abortedTxnCount")


def holds_transactions(stats: Mapping[str, Any]) -> bool:
    """Whether a partition's stats report transactions (open, or ended since the topic was loaded)."""
    return any(int(stats.get(count) or 0) for count in _TRANSACTION_COUNTS)


def decode_delivered_messages(response: httpx.Response) -> int:
    """The messages a consumer receives of the entry whose get-message-by-id headers these are:
    none for a marker, an aborted transaction's entry, or an entry past the max read position."""
    headers = response.headers
    if "X-Pulsar-marker-type" in headers or "true" in (
        headers.get("X-Pulsar-txn-aborted"),
        headers.get("X-Pulsar-txn-uncommitted"),
    ):
        return 0
    batch = headers.get("X-Pulsar-num-batch-message")
    try:
        return int(batch) if batch is not None else 1
    except ValueError:
        raise UnexpectedResponse(f"unreadable X-Pulsar-num-batch-message header {batch!r}") from None


def entries_between(after: Position, through: Position, ledgers: Sequence[tuple[int, int]]) -> Iterator[Position]:
    """The positions after ``after`` up to ``through``, over ``ledgers`` ((ledger id, entries), in log order)."""
    for ledger_id, count in ledgers:
        first = after.entry_id + 1 if ledger_id == after.ledger_id else 0
        if ledger_id < after.ledger_id or ledger_id > through.ledger_id:
            continue
        last = through.entry_id if ledger_id == through.ledger_id else count - 1
        for entry_id in range(first, last + 1):
            yield Position(ledger_id, entry_id)


def _ledgers(internal: Mapping[str, Any], last_confirmed: Position) -> list[tuple[int, int]]:
    """The partition's ledgers with their entries; the current one's run to the last confirmed entry."""
    ledgers = [(int(ledger["ledgerId"]), int(ledger.get("entries") or 0)) for ledger in internal.get("ledgers") or []]
    return [(ledger_id, last_confirmed.entry_id + 1 if ledger_id == last_confirmed.ledger_id else count) for ledger_id, count in ledgers]


def transactional_messages(
    part: TopicName, subscription: str, stats: Mapping[str, Any], max_entry_lookups: int = DEFAULT_MAX_ENTRY_LOOKUPS
) -> Operation[PartitionMessageBacklog]:
    """One partition's backlog in the messages a consumer of ``subscription`` will receive (see
    the module docstring); ``stats`` are the partition's topic stats."""
    subscription_stats = (stats.get("subscriptions") or {}).get(subscription) or {}
    entries, size = int(subscription_stats.get("msgBacklog") or 0), int(subscription_stats.get("backlogSize") or 0)
    call = AdminCall("message_backlog", "GET", topic_path(part, "internalStats"), decode=decode_document)
    internal = yield call
    buffer = yield from transaction_buffer_stats(str(part))
    try:
        cursor = CursorState.from_internal_stats(internal, subscription)
        max_read = Position.parse(buffer.get("maxReadPosition"))
    except CountError as exc:
        raise AdminError(f"unexpected stats: {exc}", operation=call.operation, method=call.method, path=call.path) from None
    if cursor is None:  # a non-durable subscription: no cursor to count from
        messages = estimate_messages(entries, int(stats.get("msgInCounter") or 0), int(internal.get("entriesAddedCounter") or 0), ())
        return PartitionMessageBacklog(str(part), messages, entries, size, exact=False)
    through = min(cursor.last_confirmed, max_read)
    positions = [
        position
        for position in entries_between(cursor.mark_delete, through, _ledgers(internal, cursor.last_confirmed))
        if not any(lower < position <= upper for lower, upper in cursor.deleted)
    ]
    if len(positions) > max_entry_lookups:
        messages = estimate_messages(len(positions), int(stats.get("msgInCounter") or 0), cursor.entries_added, ())
        return PartitionMessageBacklog(str(part), messages, entries, size, exact=False)
    counts = yield from concurrently(_delivered(part, position) for position in positions)
    return PartitionMessageBacklog(str(part), sum(counts), entries, size, exact=True)


def _delivered(part: TopicName, position: Position) -> Operation[int]:
    path = topic_path(part, "ledger", str(position.ledger_id), "entry", str(position.entry_id))
    # HEAD: the headers say it all, the payload stays on the broker.
    return (yield AdminCall("message_backlog", "HEAD", path, decode=decode_delivered_messages))
