"""The backlog operations: a subscription's backlog from Pulsar's stats (``backlog``, in entries)
and counted in messages (``message_backlog``, a few calls per partition, partitions side by side;
see ``message_count``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..message_count import (
    DEFAULT_MAX_RANGE_LOOKUPS,
    CountError,
    CursorState,
    EntryIndex,
    MessageBacklog,
    PartitionMessageBacklog,
    Position,
    estimate_messages,
    index_at,
    lookup_position,
)
from ..topic_name import TopicName
from .calls import AdminCall, Operation, concurrently, decode_entry_index_headers
from .errors import AdminError, AdminNotFoundError, AdminServerError
from .operations import (
    internal_stats_call,
    non_negative_int,
    partitioned_internal_stats_call,
    partitioned_stats_call,
    partitions_of,
    stats_call,
)
from .paths import topic_name, topic_path
from .transactional_backlog import holds_transactions, transactional_messages


@dataclass(frozen=True)
class PartitionBacklog:
    """One partition's backlog for a subscription, as Pulsar's stats give it: ``msg_backlog`` is
    ``msgBacklog``, in entries (a batch counts once)."""

    topic: str
    msg_backlog: int
    backlog_size: int


@dataclass(frozen=True)
class SubscriptionBacklog:
    """A subscription's backlog as Pulsar's stats give it: totals across partitions, and each
    partition's own. ``msg_backlog`` counts entries (see :class:`MessageBacklog` for messages).

    ``partitions`` is empty for a non-partitioned topic (the totals are then the topic's own).
    """

    topic: str
    subscription: str
    msg_backlog: int
    backlog_size: int
    partitions: tuple[PartitionBacklog, ...] = ()


def _sub_figures(stats: Mapping[str, Any], subscription: str) -> tuple[int, int] | None:
    sub = (stats.get("subscriptions") or {}).get(subscription)
    if sub is None:
        return None
    return int(sub.get("msgBacklog") or 0), int(sub.get("backlogSize") or 0)


def _subscription_stats(
    name: TopicName, subscription: str, precise_backlog: bool, operation: str
) -> Operation[tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]]:
    """The stats of the topic (summed for a partitioned one), checked to hold ``subscription``,
    and each partition's own stats in partition order (none for a non-partitioned topic)."""
    partitions = yield from partitions_of(name, operation)
    if partitions > 0:
        call = partitioned_stats_call(name, True, precise_backlog, operation)
    else:
        call = stats_call(name, precise_backlog, operation)
    stats = yield call
    if _sub_figures(stats, subscription) is None:
        known = ", ".join(sorted(stats.get("subscriptions") or {})) or "none"
        raise AdminNotFoundError(
            f"subscription {subscription!r} not found on topic {name} (its subscriptions: {known})",
            operation=operation,
            method=call.method,
            path=call.path,
        )
    parts = sorted((stats.get("partitions") or {}).items(), key=lambda item: TopicName.parse(item[0]).partition)
    return stats, parts


def backlog(topic: str, subscription: str, precise_backlog: bool = False) -> Operation[SubscriptionBacklog]:
    """The subscription's backlog as Pulsar's stats give it (``msgBacklog``, which counts entries:
    a batch is one; and bytes), totalled and per partition. :meth:`message_backlog` counts messages.

    Works for partitioned and non-partitioned topics; a missing subscription raises
    AdminNotFoundError naming the subscriptions the topic has.
    """
    name = topic_name(topic)
    stats, parts = yield from _subscription_stats(name, subscription, precise_backlog, "backlog")
    msg_backlog, backlog_size = _sub_figures(stats, subscription) or (0, 0)
    return SubscriptionBacklog(
        topic=str(name),
        subscription=subscription,
        msg_backlog=msg_backlog,
        backlog_size=backlog_size,
        partitions=tuple(
            PartitionBacklog(part_name, *(_sub_figures(part_stats, subscription) or (0, 0)))
            for part_name, part_stats in parts
        ),
    )


def message_backlog(
    topic: str, subscription: str, max_range_lookups: int = DEFAULT_MAX_RANGE_LOOKUPS, at_least: int | None = None
) -> Operation[MessageBacklog]:
    """The subscription's backlog in messages (each message of a batch counted) and in entries
    (Pulsar's ``msgBacklog``), totalled and per partition.

    Exact where the broker appends the broker entry index (Pulsar with
    ``AppendIndexMetadataInterceptor``; the embedded broker by default), else estimated; each
    figure says which (``exact``). A batch acknowledged in part counts whole. The internal stats
    of every partition come in one call; partitions with a backlog cost a few header-only lookups
    each, the partitions counted side by side (``max_concurrent_requests`` calls in flight at most); more than
    ``max_range_lookups`` individually acknowledged ranges on a partition make its count an
    estimate. On a partition with transactions only what a consumer receives counts (see
    ``transactional_backlog``). A missing subscription raises AdminNotFoundError. The entries come from the stats
    read before the count, so an entry written between the two reads is in ``messages`` but not
    yet in ``entries``. ``oldest_publish_ms`` is the oldest unacknowledged entry's publish time,
    where the lookups read it (the entry after the mark-delete, in the last ledger).

    With ``at_least``, the messages are not counted when the entries alone show that the backlog
    holds that many (every entry holds at least one message, on a topic without transactions):
    ``messages`` is then the entries, a lower bound (``lower_bound`` True, ``exact`` False), read
    from the stats alone.
    """
    name = topic_name(topic)
    max_range_lookups = non_negative_int(max_range_lookups, "max_range_lookups")
    if at_least is not None:
        at_least = non_negative_int(at_least, "at_least")
    stats, parts = yield from _subscription_stats(name, subscription, False, "message_backlog")
    if (
        at_least is not None
        and (_sub_figures(stats, subscription) or (0, 0))[0] >= at_least
        # Transaction markers and aborted messages take entries that hold no message.
        and not any(holds_transactions(part_stats) for _, part_stats in parts or [(str(name), stats)])
    ):
        return _entries_as_messages(name, subscription, stats, parts)
    internals = yield from _partitions_internal_stats(name, subscription, parts)
    counted = yield from concurrently(
        _partition_messages(TopicName.parse(part_name), subscription, part_stats, internals.get(part_name), max_range_lookups)
        for part_name, part_stats in parts or [(str(name), stats)]
    )
    return _totalled(name, subscription, counted, bool(parts))


def _entries_as_messages(
    name: TopicName, subscription: str, stats: dict[str, Any], parts: list[tuple[str, dict[str, Any]]]
) -> MessageBacklog:
    """The backlog with its entries as a lower bound of its messages, totalled and per partition."""
    counted = [
        PartitionMessageBacklog(part, entries, entries, size, exact=entries == 0, lower_bound=entries > 0)
        for part, part_stats in parts or [(str(name), stats)]
        for entries, size in [_sub_figures(part_stats, subscription) or (0, 0)]
    ]
    return _totalled(name, subscription, counted, bool(parts))


def _totalled(name: TopicName, subscription: str, counted: list[PartitionMessageBacklog], partitioned: bool) -> MessageBacklog:
    """The partitions' figures summed (``counted`` holds the topic's own when not ``partitioned``)."""
    return MessageBacklog(
        topic=str(name),
        subscription=subscription,
        messages=sum(part.messages for part in counted),
        entries=sum(part.entries for part in counted),
        backlog_size=sum(part.backlog_size for part in counted),
        exact=all(part.exact for part in counted),
        partitions=tuple(counted) if partitioned else (),
        lower_bound=any(part.lower_bound for part in counted),
        oldest_publish_ms=_oldest_of(counted),
    )


def _oldest_of(counted: list[PartitionMessageBacklog]) -> int | None:
    """The oldest publish time among the partitions holding a backlog, if each of them has one."""
    times = [part.oldest_publish_ms for part in counted if part.entries > 0]
    known = [time for time in times if time is not None]
    return min(known) if known and len(known) == len(times) else None


# A partition's internal stats and the call that read them (named when they cannot be read).
InternalStats = tuple[AdminCall, Mapping[str, Any]]


def _partitions_internal_stats(
    name: TopicName, subscription: str, parts: list[tuple[str, dict[str, Any]]]
) -> Operation[dict[str, InternalStats]]:
    """The internal stats of every partition of a partitioned topic, in one call (Pulsar's
    partitioned-internalStats), when more than one of them has a backlog; else (or for a
    non-partitioned topic) none, the partition with a backlog then reading its own."""
    backlogged = sum(1 for _, part_stats in parts if (_sub_figures(part_stats, subscription) or (0, 0))[0])
    # Apache Pulsar gathers the partitioned document by asking each partition: for one partition
    # that is slower than asking it directly (measured on 4.2.4: a median 27-35 ms against 12-15 ms).
    if backlogged < 2:
        return {}
    call = partitioned_internal_stats_call(name, "message_backlog")
    document = yield call
    return {part: (call, internal) for part, internal in (document.get("partitions") or {}).items()}


def _partition_messages(
    part: TopicName, subscription: str, stats: Mapping[str, Any], read: InternalStats | None, max_range_lookups: int
) -> Operation[PartitionMessageBacklog]:
    """One partition's (or a non-partitioned topic's) backlog in messages: exact from the broker
    entry index where every entry looked up has one, else estimated (see message_count). Its
    internal stats are ``read`` already, or read here."""
    entries, size = _sub_figures(stats, subscription) or (0, 0)
    if entries == 0:  # nothing to look up
        return PartitionMessageBacklog(str(part), 0, 0, size, exact=True)
    if holds_transactions(stats):  # markers, aborted and open transactions are not received
        return (yield from transactional_messages(part, subscription, stats))
    if read is None:  # a non-partitioned topic, or a partition added since the stats were read
        call = internal_stats_call(part, "message_backlog")
        read = call, (yield call)
    call, internal = read
    try:
        cursor = CursorState.from_internal_stats(internal, subscription)
    except CountError as exc:
        raise AdminError(
            f"unexpected internal stats: {exc}", operation=call.operation, method=call.method, path=call.path
        ) from None
    sampled: dict[Position, EntryIndex] = {}
    # Without a durable cursor, or with too many deleted ranges to look up, only an estimate is had.
    if cursor is not None and len(cursor.deleted) <= max_range_lookups:
        indexes: dict[Position, int] = {}
        for position in cursor.positions_needed():
            target = lookup_position(position, cursor.last_confirmed)
            if target not in sampled:
                path = topic_path(part, "ledger", str(target.ledger_id), "entry", str(target.entry_id))
                try:
                    # HEAD: the headers say it all, the payload (maybe a large batch) stays on the broker.
                    sampled[target] = yield AdminCall("message_backlog", "HEAD", path, decode=decode_entry_index_headers)
                except (AdminNotFoundError, AdminServerError):  # e.g. a ledger trimmed meanwhile
                    break
            value = index_at(position, sampled[target], target)
            if value is None:
                break
            indexes[position] = value
        else:
            messages = cursor.exact_messages(indexes)
            return PartitionMessageBacklog(str(part), messages, entries, size, True, oldest_publish_ms=_oldest_publish_ms(cursor, sampled))
    entries_added = cursor.entries_added if cursor is not None else int(internal.get("entriesAddedCounter") or 0)
    estimate = estimate_messages(entries, int(stats.get("msgInCounter") or 0), entries_added, sampled.values())
    return PartitionMessageBacklog(str(part), estimate, entries, size, exact=False, oldest_publish_ms=_oldest_publish_ms(cursor, sampled))


def _oldest_publish_ms(cursor: CursorState | None, sampled: Mapping[Position, EntryIndex]) -> int | None:
    """The publish time of the oldest unacknowledged entry, if the count looked that entry up."""
    first = cursor.first_unacknowledged() if cursor is not None else None
    entry = sampled.get(first) if first is not None else None
    return entry.publish_time_ms if entry is not None else None
