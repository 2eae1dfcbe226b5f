"""What the page shows of one connection, read from its admin API in one refresh: the topics of
the watched namespaces with their partitions and rates, their subscriptions with the backlog in
messages (exact or estimated), the age of the oldest message and the consumers, the dead-letter
topics, and the ingest batches of the plan logs found among the topics.

The calls of a refresh run concurrently, at most :data:`CONCURRENT_READS` at a time: one stats
call per topic, a message count for each subscription that has a backlog (three calls, and one
or two entry lookups per partition holding one, which also give the oldest message's publish
time; reused while the stats say nothing moved, see :mod:`.recount`), an internal-stats call
per dead-letter topic and the plan logs' newest records. A failure stays
where it happened: an unreachable admin URL marks its connection, a topic that cannot be read
marks its row.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from airflow_pulsar.client.admin import AdminError, AsyncPulsarAdmin
from airflow_pulsar.client.topic_name import TopicName
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.triggers.backlog_condition import BacklogCondition
from airflow_pulsar.ui.batches import PLAN_LOG_SUFFIX, IngestBatch, read_batches
from airflow_pulsar.ui.recount import Count, CountMemo, fingerprint

T = TypeVar("T")

CONCURRENT_READS = 8
# A refresh of one connection gives up after this long (a broker that accepts connections but
# does not answer would otherwise hold the page for every call's own timeout).
REFRESH_DEADLINE_SECONDS = 15.0
DEAD_LETTER_SUFFIX = "-DLQ"
# A condition that needs the oldest message's age, so that its reading includes it.
_WITH_AGE = BacklogCondition(threshold=1, max_message_age=math.inf)


@dataclass(frozen=True)
class SubscriptionFigures:
    """One subscription of a topic (summed across partitions).

    ``entries`` is Pulsar's ``msgBacklog`` (a batch counts once); ``messages`` counts each message,
    exactly when ``exact``, else estimated; None when the count failed (``error`` says why).
    """

    topic: str
    name: str
    type: str
    entries: int
    messages: int | None
    exact: bool | None
    oldest_age: float | None  # seconds the oldest unacknowledged message has waited
    consumers: int
    rate_out: float  # messages per second delivered
    unacked: int
    error: str | None = None


@dataclass(frozen=True)
class TopicFigures:
    """One topic: ``partitions`` is 0 for a non-partitioned topic; ``stored_entries`` (dead-letter
    topics only) is the entries the topic holds."""

    name: str
    partitions: int
    rate_in: float
    rate_out: float
    storage_size: int
    subscriptions: tuple[SubscriptionFigures, ...] = ()
    stored_entries: int | None = None
    error: str | None = None

    @property
    def dead_letter(self) -> bool:
        """Whether this is a dead-letter topic (Pulsar's ``<topic>-<subscription>-DLQ`` naming)."""
        return self.name.endswith(DEAD_LETTER_SUFFIX)


@dataclass(frozen=True)
class ConnectionOverview:
    """One refresh of one connection; ``error`` set when its admin API could not be read."""

    conn_id: str
    admin_url: str
    read_at: float  # epoch seconds
    elapsed: float  # seconds the refresh took
    topics: tuple[TopicFigures, ...] = ()
    batches: tuple[IngestBatch, ...] = ()
    error: str | None = None


def describe_error(exc: BaseException) -> str:
    """An error in words for the page."""
    if isinstance(exc, asyncio.TimeoutError):
        return f"no answer within {REFRESH_DEADLINE_SECONDS:g} s"
    return f"{type(exc).__name__}: {exc}"


async def read_connection(conn_id: str, namespaces: Iterable[str], memo: CountMemo) -> ConnectionOverview:
    """One refresh of the connection ``conn_id`` over the topics of ``namespaces``, reusing the
    counts in ``memo`` that still hold; never raises for the broker's sake (the overview then
    carries the error)."""
    started, read_at = time.monotonic(), time.time()
    hook = PulsarHook(pulsar_conn_id=conn_id)
    admin_url = ""
    try:
        admin_url = (await hook.aget_config()).admin_url
        async with hook.get_async_admin() as admin:
            topics, batches = await asyncio.wait_for(read_namespaces(admin, namespaces, memo), REFRESH_DEADLINE_SECONDS)
    except Exception as exc:  # noqa: BLE001 - any failure of this connection is shown on its own section
        return ConnectionOverview(conn_id, admin_url, read_at, time.monotonic() - started, error=describe_error(exc))
    return ConnectionOverview(conn_id, admin_url, read_at, time.monotonic() - started, topics, batches)


async def read_namespaces(
    admin: AsyncPulsarAdmin, namespaces: Iterable[str], memo: CountMemo, concurrency: int = CONCURRENT_READS
) -> tuple[tuple[TopicFigures, ...], tuple[IngestBatch, ...]]:
    """The topics of ``namespaces`` (plan logs apart) and the ingest batches of the plan logs;
    the message counts taken are kept in ``memo``."""
    limit = asyncio.Semaphore(concurrency)

    async def bounded(call: Awaitable[T]) -> T:
        async with limit:
            return await call

    listed = await asyncio.gather(
        *(bounded(call) for ns in namespaces for call in (admin.list_partitioned_topics(ns), admin.list_topics(ns)))
    )
    partitioned = {name for names in listed[0::2] for name in names}
    plain = {
        name for names in listed[1::2] for name in names if TopicName.parse(name).partition < 0 and name not in partitioned
    }
    names = sorted(partitioned | plain)
    plan_logs = [name for name in names if name.endswith(PLAN_LOG_SUFFIX)]
    topics = [name for name in names if name not in plan_logs]
    figures = await asyncio.gather(*(_topic(admin, name, name in partitioned, memo, bounded) for name in topics))
    memo.forget_others({(sub.topic, sub.name) for topic in figures for sub in topic.subscriptions})
    logs = await asyncio.gather(*(read_batches(admin, name, bounded) for name in plan_logs))
    return tuple(figures), tuple(batch for batches in logs for batch in batches)


async def _topic(admin: AsyncPulsarAdmin, name: str, partitioned: bool, memo: CountMemo, bounded: Any) -> TopicFigures:
    try:
        if partitioned:
            stats = await bounded(admin.partitioned_stats(name, per_partition=False))
            partitions = int((stats.get("metadata") or {}).get("partitions") or 0)
        else:
            stats, partitions = await bounded(admin.topic_stats(name)), 0
    except AdminError as exc:
        return TopicFigures(name, 0, 0.0, 0.0, 0, error=describe_error(exc))
    subscriptions = await asyncio.gather(
        *(
            _subscription(admin, name, sub, sub_stats, fingerprint(stats, sub_stats), memo, bounded)
            for sub, sub_stats in sorted((stats.get("subscriptions") or {}).items())
        )
    )
    stored = None
    if name.endswith(DEAD_LETTER_SUFFIX):
        stored = await _stored_entries(admin, name, partitions, bounded)
    return TopicFigures(
        name,
        partitions,
        float(stats.get("msgRateIn") or 0.0),
        float(stats.get("msgRateOut") or 0.0),
        int(stats.get("storageSize") or 0),
        tuple(subscriptions),
        stored,
    )


async def _stored_entries(admin: AsyncPulsarAdmin, name: str, partitions: int, bounded: Any) -> int | None:
    """The entries a (dead-letter) topic holds, from its internal stats (every partition's in one
    call); None when they cannot be read."""
    try:
        if partitions:
            internal = (await bounded(admin.partitioned_internal_stats(name))).get("partitions") or {}
        else:
            internal = {name: await bounded(admin.internal_stats(name))}
    except AdminError:
        return None
    if len(internal) != max(partitions, 1):
        return None
    return sum(int(stats.get("numberOfEntries") or 0) for stats in internal.values())


async def _subscription(
    admin: AsyncPulsarAdmin, topic: str, name: str, stats: dict[str, Any], now: tuple[Any, ...], memo: CountMemo, bounded: Any
) -> SubscriptionFigures:
    count: Count | None = Count(0, True, 0, None)
    error = None
    if int(stats.get("msgBacklog") or 0) > 0:
        count = memo.reusable(topic, name, now)
        if count is None:
            try:
                reading = await bounded(_WITH_AGE.read(admin, topic, name))
            except AdminError as exc:
                error = describe_error(exc)
            else:
                age = reading.oldest_message_age
                count = Count(reading.messages, reading.exact, reading.entries, None if age is None else reading.read_at - age)
                memo.keep(topic, name, now, count)
    return SubscriptionFigures(
        topic=topic,
        name=name,
        type=str(stats.get("type") or ""),
        entries=int(stats.get("msgBacklog") or 0) if count is None else count.entries,
        messages=None if count is None else count.messages,
        exact=None if count is None else count.exact,
        oldest_age=None if count is None or count.oldest_publish is None else max(time.time() - count.oldest_publish, 0.0),
        consumers=len(stats.get("consumers") or ()),
        rate_out=float(stats.get("msgRateOut") or 0.0),
        unacked=int(stats.get("unackedMessages") or 0),
        error=error,
    )
