"""``block_if_queue_full`` on a partitioned topic: each partition's pending limit blocks alone.

A partitioned producer gives each partition ``min(max_pending_messages,
max_pending_messages_across_partitions / partitions)`` pending slots, as the Java and C++ clients
do. With the broker frozen (SIGSTOP), a send to a full partition waits while a send to another
partition goes through, and the waiting one proceeds once the broker answers again.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.exceptions import Result
from airflow_pulsar.client.hashing import java_string_hash

PARTITIONS = 3


@contextmanager
def paused(broker: Any) -> Iterator[None]:
    """Freeze the broker process; it always resumes, even if the test fails."""
    pid = broker.process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def keys_for(partition: int, count: int) -> list[str]:
    """Partition keys that the default hashing scheme sends to ``partition``."""
    keys = (f"key-{i}" for i in range(10_000))
    return [key for key in keys if java_string_hash(key) % PARTITIONS == partition][:count]


def test_a_full_partition_blocks_its_sends_only(broker: Any, topic_name: str) -> None:
    topic = f"persistent://public/default/{topic_name}"
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_partitioned_topic(topic, PARTITIONS)
    results: list[Result] = []
    with Client(broker.service_url, operation_timeout_seconds=10) as client:
        producer = client.create_producer(
            topic,
            max_pending_messages=100,
            max_pending_messages_across_partitions=2 * PARTITIONS,  # 2 slots per partition
            block_if_queue_full=True,
            batching_enabled=False,
            send_timeout_millis=30_000,
        )
        to_partition_0, to_partition_1 = keys_for(0, 3), keys_for(1, 1)

        def send_in_thread(key: str) -> threading.Event:
            sent = threading.Event()

            def send() -> None:
                producer.send_async(b"m", lambda result, _: results.append(result), partition_key=key)
                sent.set()

            threading.Thread(target=send, daemon=True).start()
            return sent

        with paused(broker):
            for key in to_partition_0[:2]:
                producer.send_async(b"m", lambda result, _: results.append(result), partition_key=key)
            third = send_in_thread(to_partition_0[2])
            assert not third.wait(0.5), "a third send to a partition with 2 slots must wait"
            assert send_in_thread(to_partition_1[0]).wait(5), "partition 1 has slots of its own"
            assert not third.is_set()
        assert third.wait(20), "the waiting send must go once the broker answers"
        producer.flush()
    assert results == [Result.Ok] * 4
