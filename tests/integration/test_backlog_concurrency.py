"""A backlog counted over many partitions keeps several admin calls in flight, never more than the
client's bound, and counts right; the asyncio count leaves the event loop free. On both brokers.

The calls in flight are counted on the wire, by a proxy in front of the admin port that delays each
byte a little (bench/delay_proxy.py), so that calls overlap when the client lets them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from airflow_pulsar.client.admin import AsyncPulsarAdmin, MessageBacklog, PulsarAdmin
from airflow_pulsar.triggers.backlog_condition import BacklogCondition, BacklogReading
from bench.backlog_poke import SUB, backlogged_topic
from bench.delay_proxy import DelayProxy

PARTITIONS = 64
PER_PARTITION = 2
BOUND = 8


@pytest.fixture(scope="module")
def many_partitions(broker: Any) -> str:
    """A topic of PARTITIONS partitions with PER_PARTITION unbatched messages waiting on each for SUB."""
    topic = f"persistent://public/default/backlog-concurrency-{time.monotonic_ns() % 1_000_000_000}"
    return backlogged_topic(broker, PARTITIONS, PER_PARTITION, topic)


@pytest.fixture
def proxy(broker: Any) -> Iterator[DelayProxy]:
    address = urlsplit(broker.web_url)
    with DelayProxy(address.hostname or "127.0.0.1", address.port or 80, delay=0.002) as running:
        yield running


def assert_counted(backlog: MessageBacklog) -> None:
    assert (backlog.messages, backlog.entries, backlog.exact) == (PARTITIONS * PER_PARTITION,) * 2 + (True,)
    assert len(backlog.partitions) == PARTITIONS
    assert all(part.messages == part.entries > 0 and part.exact for part in backlog.partitions)
    assert [part.topic for part in backlog.partitions] == [f"{backlog.topic}-partition-{i}" for i in range(PARTITIONS)]


def test_blocking_count_keeps_calls_in_flight_within_the_bound(many_partitions: str, proxy: DelayProxy) -> None:
    with PulsarAdmin(proxy.url, timeout_seconds=30, max_concurrent_requests=BOUND) as admin:
        assert_counted(admin.message_backlog(many_partitions, SUB))
    # partitions and stats, then every partition's internal stats in one call, then the entry
    # lookups: two per partition (its last entry and the one after its mark-delete)
    assert 2 + 2 * PARTITIONS <= proxy.requests <= 3 + 2 * PARTITIONS
    assert 1 < proxy.peak_in_flight <= BOUND


def test_asyncio_counts_of_several_topics_share_the_bound(many_partitions: str, proxy: DelayProxy) -> None:
    async def count_twice() -> list[MessageBacklog]:
        async with AsyncPulsarAdmin(proxy.url, timeout_seconds=30, max_concurrent_requests=BOUND) as admin:
            return await asyncio.gather(*(admin.message_backlog(many_partitions, SUB) for _ in range(2)))

    for backlog in asyncio.run(count_twice()):
        assert_counted(backlog)
    assert proxy.requests >= 2 * (2 + 2 * PARTITIONS)
    assert 1 < proxy.peak_in_flight <= BOUND


def test_one_call_at_a_time_when_the_bound_is_one(many_partitions: str, proxy: DelayProxy) -> None:
    with PulsarAdmin(proxy.url, timeout_seconds=30, max_concurrent_requests=1) as admin:
        assert_counted(admin.message_backlog(many_partitions, SUB))
    assert proxy.peak_in_flight == 1


def test_the_triggers_read_leaves_the_event_loop_free(many_partitions: str, broker: Any) -> None:
    """A heartbeat on the triggerer's loop keeps beating while the trigger's read counts the backlog:
    no call blocks the loop for more than a small part of the read."""
    address = urlsplit(broker.web_url)

    async def read_with_heartbeat(proxy: DelayProxy) -> tuple[float, float, int]:
        gaps: list[float] = []
        reading = asyncio.Event()

        async def heartbeat() -> None:
            last = time.monotonic()
            while not reading.is_set():
                await asyncio.sleep(0.002)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        beating = asyncio.ensure_future(heartbeat())
        started = time.monotonic()
        async with AsyncPulsarAdmin(proxy.url, timeout_seconds=30, max_concurrent_requests=BOUND) as admin:
            result = await BacklogCondition(threshold=1).read(admin, many_partitions, SUB)
        took = time.monotonic() - started
        reading.set()
        await beating
        assert_counted(result.backlog)
        return took, max(gaps), len(gaps)

    with DelayProxy(address.hostname or "127.0.0.1", address.port or 80, delay=0.005) as proxy:
        took, longest_gap, beats = asyncio.run(read_with_heartbeat(proxy))
    # A blocking call on the loop would stop the heartbeat for the whole read.
    assert beats >= 10
    assert longest_gap < took / 4, (longest_gap, took)


def test_a_threshold_the_entries_reach_is_settled_without_counting(many_partitions: str, proxy: DelayProxy) -> None:
    """Every entry holds a message at least, so entries >= N settles "messages >= N": the poke
    reads the stats alone and says its figure is a lower bound; one more than the entries needs the count."""
    entries = PARTITIONS * PER_PARTITION

    async def read(threshold: int) -> BacklogReading:
        async with AsyncPulsarAdmin(proxy.url, timeout_seconds=30, max_concurrent_requests=BOUND) as admin:
            return await BacklogCondition(threshold).read(admin, many_partitions, SUB, settle_early=True)

    settled = asyncio.run(read(entries))
    assert (settled.messages, settled.entries, settled.exact, settled.lower_bound) == (entries, entries, False, True)
    assert all(part.lower_bound and not part.exact for part in settled.backlog.partitions)
    assert settled.as_xcom()["lower_bound"] and "at least" in settled.describe()
    assert BacklogCondition(entries).met(settled)
    assert proxy.requests == 2  # partition count and stats: no internal stats, no entry lookups

    proxy.reset()
    counted = asyncio.run(read(entries + 1))
    assert_counted(counted.backlog)
    assert not counted.lower_bound and not BacklogCondition(entries + 1).met(counted)
    assert proxy.requests >= 2 + 2 * PARTITIONS
