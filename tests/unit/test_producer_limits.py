"""Memory and pending limits: try, block with deadline, release, and the client's own memory limit."""

from __future__ import annotations

import threading
import time

from airflow_pulsar.client import Client
from airflow_pulsar.client.exceptions import MemoryBufferIsFull, ProducerQueueIsFull
from airflow_pulsar.client.producer.limits import MemoryLimit, PendingLimit, SendQuota


def test_try_acquire_respects_limit_and_release() -> None:
    limit = PendingLimit(2)
    assert limit.try_acquire(1) and limit.try_acquire(1)
    assert limit.is_full() and not limit.try_acquire(1)
    limit.release(1)
    assert limit.try_acquire(1)


def test_oversized_request_passes_only_when_empty() -> None:
    memory = MemoryLimit(100)
    assert memory.try_acquire(500), "one message bigger than the limit must not wait forever"
    assert not memory.try_acquire(1)
    memory.release(500)
    assert memory.in_use == 0


def test_zero_limit_is_unbounded() -> None:
    memory = MemoryLimit(0)
    assert memory.try_acquire(10**12) and not memory.is_full()


def test_blocking_acquire_times_out_at_deadline() -> None:
    limit = PendingLimit(1)
    limit.try_acquire(1)
    started = time.monotonic()
    assert not limit.acquire(1, time.monotonic() + 0.2)
    assert 0.18 <= time.monotonic() - started < 1.0


def test_blocking_acquire_wakes_on_release() -> None:
    limit = MemoryLimit(10)
    limit.try_acquire(10)
    threading.Timer(0.1, limit.release, args=(10,)).start()
    assert limit.acquire(5, time.monotonic() + 5)
    assert limit.in_use == 5


def test_each_client_owns_one_memory_limit() -> None:
    with Client("pulsar://localhost:6650", memory_limit_bytes=1234) as client, Client("pulsar://localhost:6650") as other:
        first = client.memory_limit
        assert isinstance(first, MemoryLimit) and first is client.memory_limit and first.limit == 1234
        assert other.memory_limit is not first


def test_a_send_quota_takes_a_slot_and_the_bytes_together_and_gives_both_back() -> None:
    memory = MemoryLimit(100)
    quota = SendQuota("t", PendingLimit(2), memory, block_if_queue_full=False, send_timeout=None)
    assert quota.reserve(60) is None
    assert (quota.pending.in_use, memory.in_use) == (1, 60)
    full = quota.reserve(60)
    assert isinstance(full, MemoryBufferIsFull) and (quota.pending.in_use, memory.in_use) == (1, 60), "nothing kept on failure"
    assert quota.reserve(40) is None
    assert isinstance(quota.reserve(0), ProducerQueueIsFull) and quota.is_full()
    quota.release(2, 100)
    assert (quota.pending.in_use, memory.in_use) == (0, 0)


def test_a_blocked_send_quota_wakes_when_a_receipt_gives_back_what_it_needs() -> None:
    memory = MemoryLimit(0)
    quota = SendQuota("t", PendingLimit(1), memory, block_if_queue_full=True, send_timeout=5.0)
    assert quota.reserve(10) is None
    threading.Timer(0.1, quota.release, args=(1, 10)).start()
    started = time.monotonic()
    assert quota.reserve(10) is None
    assert 0.05 <= time.monotonic() - started < 4 and quota.pending.in_use == 1
