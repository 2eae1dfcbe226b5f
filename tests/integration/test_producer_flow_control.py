"""Backpressure and send timeouts against a broker that stops answering (SIGSTOP)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.exceptions import ProducerQueueIsFull, Result, Timeout


@contextmanager
def paused(broker: Any) -> Iterator[None]:
    """Freeze the broker process; it always resumes, even if the test fails."""
    pid = broker.process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.fixture
def our_client(broker: Any) -> Iterator[Client]:
    """Our client on the module's broker, with a 5 s operation timeout and a 50 kB memory limit to fill."""
    with Client(broker.service_url, operation_timeout_seconds=5, memory_limit_bytes=50_000) as made:
        yield made


def _collector() -> tuple[list[Any], Any]:
    results: list[Any] = []
    return results, lambda result, message_id: results.append(result)


def test_memory_limit_holds_while_broker_is_stopped(our_client: Client, broker: Any, topic_name: str) -> None:
    producer = our_client.create_producer(topic_name, batching_max_publish_delay_ms=1)
    memory = our_client.memory_limit  # the client's, shared by all its producers
    results, callback = _collector()
    peak = 0
    with paused(broker):
        for _ in range(200):
            producer.send_async(b"m" * 1000, callback)
            peak = max(peak, memory.in_use)
        assert peak <= 50_000
        refused = [r for r in results if r is not Result.Ok]
        assert refused and set(refused) == {Result.MemoryBufferIsFull}, set(results)
        accepted = 200 - len(refused)
        assert 40 <= accepted <= 50, accepted
    producer.flush()
    assert results.count(Result.Ok) == accepted
    assert memory.in_use == 0 and producer.stats()["pending"] == 0


def test_pending_queue_full_fails_at_once(our_client: Client, broker: Any, topic_name: str) -> None:
    producer = our_client.create_producer(topic_name, max_pending_messages=5, batching_enabled=False)
    results, callback = _collector()
    with paused(broker):
        for _ in range(5):
            producer.send_async(b"p", callback)
        started = time.monotonic()
        with pytest.raises(ProducerQueueIsFull, match="max_pending_messages"):
            producer.send(b"one too many")
        assert time.monotonic() - started < 0.5
    producer.flush()
    assert results == [Result.Ok] * 5


def test_blocked_send_resumes_when_broker_answers(our_client: Client, broker: Any, topic_name: str) -> None:
    producer = our_client.create_producer(
        topic_name, max_pending_messages=5, block_if_queue_full=True, batching_enabled=False, send_timeout_millis=5000
    )
    results, callback = _collector()
    unblocked = threading.Event()

    def sixth() -> None:
        producer.send_async(b"sixth", callback)
        unblocked.set()

    with paused(broker):
        for _ in range(5):
            producer.send_async(b"p", callback)
        thread = threading.Thread(target=sixth)
        thread.start()
        assert not unblocked.wait(0.3), "the sixth send must block while five are pending"
    assert unblocked.wait(5)
    thread.join()
    producer.flush()
    assert results == [Result.Ok] * 6


def test_blocked_send_gives_up_at_send_timeout(our_client: Client, broker: Any, topic_name: str) -> None:
    producer = our_client.create_producer(
        topic_name, max_pending_messages=2, block_if_queue_full=True, batching_enabled=False, send_timeout_millis=400
    )
    results, callback = _collector()
    with paused(broker):
        producer.send_async(b"a", callback)
        producer.send_async(b"b", callback)
        started = time.monotonic()
        with pytest.raises(Timeout):
            producer.send(b"blocked")
        assert 0.3 <= time.monotonic() - started < 2
        deadline = time.monotonic() + 2
        while len(results) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert results == [Result.Timeout] * 2, "the pending ones time out too"
    assert producer.stats()["pending"] == 0 and our_client.memory_limit.in_use == 0


def test_send_timeout_fails_expired_ops_and_producer_recovers(our_client: Client, broker: Any, topic_name: str) -> None:
    producer = our_client.create_producer(topic_name, send_timeout_millis=300)
    with paused(broker):
        started = time.monotonic()
        with pytest.raises(Timeout, match="send timeout"):
            producer.send(b"lost in time")
        assert 0.25 <= time.monotonic() - started < 2
        assert our_client.memory_limit.in_use == 0
    # The late receipt of the expired op is ignored; later sends work.
    assert producer.send(b"after").entry_id() >= 0
    assert producer.stats()["failed"] == 1
