"""Memory and pending limits: try, block with deadline, release, and the client's own memory limit."""

from __future__ import annotations

import threading
import time

from airflow_pulsar.client import Client
from airflow_pulsar.client.producer.limits import MemoryLimit, PendingLimit


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
