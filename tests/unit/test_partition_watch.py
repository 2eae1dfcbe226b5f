"""The client's partition watch: which handlers it asks to grow, and that one failure stops no other."""

from __future__ import annotations

import logging
import threading

import pytest

from airflow_pulsar.client.exceptions import ConnectError
from airflow_pulsar.client.partition_watch import PartitionWatch
from tests.support.polling import wait_until


class Handler:
    """A producer or consumer open on ``counts``; records each growth it is asked for."""

    def __init__(self, counts: dict[str, int], fails: Exception | None = None) -> None:
        self.counts = counts
        self.fails = fails
        self.grown: list[tuple[str, int]] = []

    def partition_counts(self) -> dict[str, int]:
        return dict(self.counts)

    def add_partitions(self, topic: str, partitions: int) -> None:
        if self.fails is not None:
            raise self.fails
        self.grown.append((topic, partitions))
        self.counts[topic] = partitions


def test_a_round_grows_only_the_topics_whose_count_went_up() -> None:
    broker_counts = {"orders": 4, "users": 2, "gone": 3}
    watch = PartitionWatch(broker_counts.__getitem__, interval=60)
    handler = Handler({"orders": 2, "users": 2})
    other = Handler({"orders": 4, "gone": 1})
    watch.watch(handler)
    watch.watch(other)
    watch.check()
    assert handler.grown == [("orders", 4)] and other.grown == [("gone", 3)]
    watch.check()
    assert handler.grown == [("orders", 4)], "a topic already grown is not grown again"
    watch.unwatch(handler)
    broker_counts["orders"] = 6
    watch.check()
    assert handler.grown == [("orders", 4)] and other.grown == [("gone", 3), ("orders", 6)]
    watch.close()


def test_a_failure_is_logged_and_the_other_handlers_still_grow(caplog: pytest.LogCaptureFixture) -> None:
    def count(topic: str) -> int:
        if topic == "unreachable":
            raise ConnectError("broker down")
        return 2

    watch = PartitionWatch(count, interval=60)
    broken = Handler({"orders": 1}, fails=RuntimeError("cannot subscribe"))
    unreachable = Handler({"unreachable": 1})
    healthy = Handler({"users": 1})
    for handler in (broken, unreachable, healthy):
        watch.watch(handler)
    with caplog.at_level(logging.WARNING, logger="airflow_pulsar.client.partition_watch"):
        watch.check()
    assert healthy.grown == [("users", 2)] and unreachable.grown == []
    messages = [record.getMessage() for record in caplog.records]
    assert any("unreachable: checking for new partitions failed: broker down" in m for m in messages), messages
    assert any("orders: opening new partitions failed" in m for m in messages), messages
    watch.close()


def test_the_thread_checks_every_interval_until_closed() -> None:
    asked = threading.Event()

    def count(topic: str) -> int:
        asked.set()
        return 1

    watch = PartitionWatch(count, interval=0.05)
    handler = Handler({"orders": 1})
    before = set(threading.enumerate())
    watch.watch(handler)
    (thread,) = set(threading.enumerate()) - before
    assert asked.wait(5), "the watch never asked for the partition count"
    watch.close()
    wait_until(lambda: not thread.is_alive(), "the watch thread to end")
    asked.clear()
    watch.watch(handler)  # a closed watch starts no thread again
    assert not asked.wait(0.3)


def test_an_interval_of_zero_watches_nothing() -> None:
    watch = PartitionWatch(lambda topic: 9, interval=0)
    handler = Handler({"orders": 1})
    watch.watch(handler)
    watch.check()
    assert handler.grown == []
