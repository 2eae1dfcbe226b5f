"""The backlog sensor in real DAG runs: deferred (dag.test() runs the trigger in this process) and poking.

A background thread produces; the sensor must wait while the backlog is below the threshold
and fire within one poll interval once the producer crosses it. Each reading the sensor takes
is recorded by wrapping ``BacklogCondition.read`` (it still reads from the real broker). The
threshold counts messages, also when default batching packs them into a few entries.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pendulum
import pytest

from airflow_pulsar.client import Client, InitialPosition, Result
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.sensors.backlog import PulsarBacklogSensor
from airflow_pulsar.triggers.backlog import PulsarBacklogTrigger
from airflow_pulsar.triggers.backlog_condition import BacklogCondition, BacklogReading
from tests.support.dag_runs import run_dag, subscription_stats
from tests.support.ports import free_port

POLL_SECONDS = 0.3  # the test DAGs' poke_interval
BATCHED_THRESHOLD = 2000  # the pulsar_backlog_batched DAG's threshold
# How late the reading that fires may start after the crossing: one poll interval plus scheduling
# slack on a busy machine (the admin calls of the reading itself come on top).
FIRE_WITHIN = POLL_SECONDS + 0.5
THRESHOLD = 5
SUBSCRIPTION = "ingest"


@dataclass
class Readings:
    """Every backlog reading the sensor (or its trigger) took, as it took them."""

    taken: list[BacklogReading] = field(default_factory=list)
    # When each reading began (epoch seconds), by its read_at.
    started: dict[float, float] = field(default_factory=dict)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def record(self, reading: BacklogReading, started: float) -> None:
        with self.changed:
            self.taken.append(reading)
            self.started[reading.read_at] = started
            self.changed.notify_all()

    def wait_for(self, count: int, timeout: float = 60) -> None:
        """Block until the sensor has taken ``count`` readings."""
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.taken) >= count, timeout), "the sensor did not read the backlog"


@pytest.fixture
def readings(monkeypatch: pytest.MonkeyPatch) -> Readings:
    recorded = Readings()
    read = BacklogCondition.read

    async def recording_read(self: BacklogCondition, admin, topic: str, subscription: str, **options: Any) -> BacklogReading:
        started = time.time()
        reading = await read(self, admin, topic, subscription, **options)
        recorded.record(reading, started)
        return reading

    monkeypatch.setattr(BacklogCondition, "read", recording_read)
    return recorded


def _watched_topic(admin: PulsarAdmin, topic: str, partitions: int) -> None:
    """The topic and its subscription, made through admin REST: no consumer is ever attached."""
    if partitions:
        admin.create_partitioned_topic(topic, partitions)
    else:
        admin.create_topic(topic)
    admin.create_subscription(topic, SUBSCRIPTION, InitialPosition.Earliest)


def _send(service_url: str, topic: str, first: int, count: int) -> None:
    with Client(service_url) as client:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(first, first + count):
            producer.send(f"event-{i}".encode(), partition_key=f"key-{i}")


def _send_batched(service_url: str, topic: str, count: int) -> None:
    """``count`` messages with default batching (so a few entries); blocking, not failing, while
    more than the producer's pending queue are in flight."""
    results: list[Result] = []
    with Client(service_url) as client:
        producer = client.create_producer(topic, block_if_queue_full=True)
        for i in range(count):
            producer.send_async(f"event-{i}".encode(), lambda result, message_id: results.append(result))
        producer.flush()
    assert results == [Result.Ok] * count


@pytest.fixture
def crossing(broker) -> Iterator:
    """Start a thread that crosses the threshold once the sensor has read the backlog below it twice."""
    threads: list[threading.Thread] = []

    def start(topic: str, readings: Readings, already: int) -> dict:
        crossed: dict = {}

        def cross() -> None:
            readings.wait_for(2)
            crossed["sending"] = time.time()
            _send(broker.service_url, topic, already, THRESHOLD - already)
            crossed["at"] = time.time()

        thread = threading.Thread(target=cross, daemon=True)
        thread.start()
        threads.append(thread)
        return crossed

    yield start
    for thread in threads:
        thread.join(timeout=30)


@pytest.mark.parametrize(
    ("dag_id", "partitions"),
    [("pulsar_backlog_deferred", 0), ("pulsar_backlog_deferred", 3), ("pulsar_backlog_poke", 0)],
    ids=["deferred", "deferred-partitioned", "poke"],
)
def test_sensor_waits_below_the_threshold_and_fires_once_crossed(
    broker, broker_admin: PulsarAdmin, readings: Readings, crossing, topic_name: str, dag_id: str, partitions: int
) -> None:
    _watched_topic(broker_admin, topic_name, partitions)
    _send(broker.service_url, topic_name, 0, THRESHOLD - 2)
    crossed = crossing(topic_name, readings, THRESHOLD - 2)

    result = run_dag(dag_id, topic=topic_name, subscription=SUBSCRIPTION)

    assert result.state == "success", result.states
    figures = result.xcoms["wait"]
    # Unbatched: one entry per message, so the entries reach the threshold and settle it uncounted:
    # the figure says it is a lower bound.
    assert (figures["messages"], figures["entries"], figures["exact"], figures["lower_bound"]) == (THRESHOLD, THRESHOLD, False, True)
    assert figures["backlog_size"] > 0
    assert figures["topic"] == f"persistent://public/default/{topic_name}"
    assert figures["subscription"] == SUBSCRIPTION and figures["oldest_message_age"] is None
    if partitions:
        assert len(figures["partitions"]) == partitions
        assert sum(part["messages"] for part in figures["partitions"].values()) == THRESHOLD
        assert all(part["lower_bound"] == (part["entries"] > 0) for part in figures["partitions"].values())
        assert sum(part["backlog_size"] for part in figures["partitions"].values()) == figures["backlog_size"]
        assert all(name.startswith(figures["topic"] + "-partition-") for name in figures["partitions"])
    else:
        assert figures["partitions"] == {}
    # It waited while below the threshold (several readings), then fired within one poll interval.
    waiting = [reading.messages for reading in readings.taken if reading.read_at < crossed["sending"]]
    assert len(waiting) >= 2 and set(waiting) == {THRESHOLD - 2}
    # The crossing happened between "sending" and "at" (the last receipt comes before the client closes).
    assert figures["read_at"] >= crossed["sending"], (figures["read_at"], crossed["sending"])
    fired_started = readings.started[figures["read_at"]]
    assert fired_started - crossed["at"] <= FIRE_WITHIN, (fired_started, figures["read_at"], crossed["at"])
    # Only admin REST was used: the watched subscription never had a consumer nor sent a message.
    stats = subscription_stats(broker_admin, topic_name, SUBSCRIPTION)
    assert stats["consumers"] == [] and stats["msgOutCounter"] == 0


@pytest.mark.parametrize("partitions", [0, 3], ids=["plain", "partitioned"])
def test_threshold_counts_batched_messages(
    broker, broker_admin: PulsarAdmin, readings: Readings, topic_name: str, partitions: int
) -> None:
    # Default batching packs the messages into a few entries; Pulsar's msgBacklog counts those.
    _watched_topic(broker_admin, topic_name, partitions)
    _send_batched(broker.service_url, topic_name, BATCHED_THRESHOLD - 1)
    below = broker_admin.backlog(topic_name, SUBSCRIPTION).msg_backlog
    assert 0 < below < BATCHED_THRESHOLD - 1

    def cross() -> None:
        readings.wait_for(2)
        _send_batched(broker.service_url, topic_name, 1)

    thread = threading.Thread(target=cross, daemon=True)
    thread.start()
    try:
        result = run_dag("pulsar_backlog_batched", topic=topic_name, subscription=SUBSCRIPTION)
    finally:
        thread.join(timeout=30)

    assert result.state == "success", result.states
    figures = result.xcoms["wait"]
    assert (figures["messages"], figures["exact"]) == (BATCHED_THRESHOLD, True)
    entries = broker_admin.backlog(topic_name, SUBSCRIPTION).msg_backlog
    # The entries come from the stats, read just before the message count: the last entry may land between.
    assert below <= figures["entries"] <= entries == below + 1
    if partitions:
        parts = figures["partitions"].values()
        assert sum(part["messages"] for part in parts) == BATCHED_THRESHOLD
        assert sum(part["entries"] for part in parts) == entries and all(part["exact"] for part in parts)
    waiting = [reading.messages for reading in readings.taken[:-1]]
    assert waiting and set(waiting) == {BATCHED_THRESHOLD - 1}


def test_oldest_message_age_fires_below_the_threshold(broker, broker_admin: PulsarAdmin, topic_name: str) -> None:
    # Reschedule mode between pokes; peeks each partition's first unacknowledged message for its age.
    _watched_topic(broker_admin, topic_name, 2)
    _send(broker.service_url, topic_name, 0, 3)
    sent_at = time.time()

    result = run_dag("pulsar_backlog_age", topic=topic_name, subscription=SUBSCRIPTION)

    assert result.state == "success", result.states
    figures = result.xcoms["wait"]
    assert figures["messages"] == 3  # far below the threshold of 1000
    assert 1.0 <= figures["oldest_message_age"] <= figures["read_at"] - sent_at + 1.0
    ages = [part["oldest_message_age"] for part in figures["partitions"].values() if part["messages"]]
    assert ages and max(ages) == figures["oldest_message_age"]
    # The same instants as ISO 8601 UTC text: the read, and the oldest message's publish time.
    read_time, oldest = pendulum.parse(figures["read_time"]), pendulum.parse(figures["oldest_publish_time"])
    assert abs(read_time.timestamp() - figures["read_at"]) < 0.001
    assert abs((read_time - oldest).total_seconds() - figures["oldest_message_age"]) < 0.002
    assert oldest.timestamp() <= sent_at
    assert subscription_stats(broker_admin, topic_name, SUBSCRIPTION)["msgOutCounter"] == 0


@pytest.mark.parametrize(
    ("dag_id", "state"),
    [
        ("pulsar_backlog_timeout", "failed"),
        ("pulsar_backlog_timeout_soft", "skipped"),
        ("pulsar_backlog_poke_timeout_soft", "skipped"),
    ],
)
def test_timeout_fails_or_with_soft_fail_skips(
    broker_admin: PulsarAdmin, topic_name: str, dag_id: str, state: str
) -> None:
    _watched_topic(broker_admin, topic_name, 0)
    result = run_dag(dag_id, topic=topic_name, subscription=SUBSCRIPTION)
    assert result.states == {"wait": state}
    assert result.seconds >= 1.0  # the sensor's timeout, not an early error


def _first_event(trigger: PulsarBacklogTrigger) -> dict:
    async def first() -> dict:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(first())


def test_trigger_reports_a_missing_subscription(broker_admin: PulsarAdmin, topic_name: str) -> None:
    _watched_topic(broker_admin, topic_name, 0)
    event = _first_event(PulsarBacklogTrigger(topic=topic_name, subscription="nobody", threshold=1, poll_interval=0.1))
    assert event["status"] == "error"
    assert "subscription 'nobody' not found" in event["message"] and SUBSCRIPTION in event["message"]


def test_trigger_keeps_polling_through_an_unreachable_admin_service(pulsar_conn) -> None:
    pulsar_conn(host="127.0.0.1", extra={"admin_url": f"http://127.0.0.1:{free_port()}"})
    started = time.time()
    trigger = PulsarBacklogTrigger(topic="t", subscription="s", threshold=1, poll_interval=0.2, deadline=started + 1.0)
    event = _first_event(trigger)
    assert event["status"] == "timeout" and event["backlog"] is None
    assert time.time() - started >= 1.0


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"threshold": 0}, "threshold must be an int >= 1"),
        ({"threshold": "5"}, "threshold must be an int >= 1"),
        ({"min_backlog_bytes": -1}, "min_backlog_bytes must be an int >= 0 or None"),
        ({"max_message_age": 0}, "max_message_age must be a positive number of seconds"),
        ({"topic": "a/b"}, "topic:"),
        ({"subscription": None}, "subscription must be a non-empty string"),
        ({"deferrable": "yes"}, "deferrable must be a bool"),
        ({"mode": "sometimes"}, "The mode must be one of"),
        ({"timeout": -1}, "timeout` must be timedelta object or a non-negative number"),
    ],
)
def test_sensor_rejects_bad_arguments(arguments: dict, error: str) -> None:
    given = {"topic": "t", "subscription": "s", "threshold": 5, **arguments}
    with pytest.raises(ValueError, match=error):
        PulsarBacklogSensor(task_id="wait", **given)


def test_sensor_templated_fields_and_defaults() -> None:
    sensor = PulsarBacklogSensor(task_id="wait", topic="{{ params.t }}", subscription="s", threshold=1)
    assert set(sensor.template_fields) == {"topic", "subscription", "pulsar_conn_id"}
    # Airflow's [operators] default_deferrable, False unless configured (the test settings leave it unset).
    assert sensor.deferrable is False and sensor.create_subscription is False and sensor.topic == "{{ params.t }}"


def test_a_backlog_already_ready_finishes_without_deferring(
    broker, broker_admin: PulsarAdmin, readings: Readings, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deferrable sensor reads once in the worker: a ready backlog returns at once, no trigger."""
    deferred: list[object] = []
    defer = PulsarBacklogSensor.defer
    triggers_built: list[PulsarBacklogTrigger] = []
    build_trigger = PulsarBacklogTrigger.__init__

    def recording_defer(self: PulsarBacklogSensor, **kwargs: object) -> None:
        deferred.append(kwargs)
        defer(self, **kwargs)

    def recording_build(self: PulsarBacklogTrigger, **kwargs: object) -> None:
        triggers_built.append(self)
        build_trigger(self, **kwargs)

    monkeypatch.setattr(PulsarBacklogSensor, "defer", recording_defer)
    # The worker's reading uses the backlog condition directly, without building a trigger.
    monkeypatch.setattr(PulsarBacklogTrigger, "__init__", recording_build)
    _watched_topic(broker_admin, topic_name, 0)
    _send(broker.service_url, topic_name, 0, THRESHOLD)

    result = run_dag("pulsar_backlog_deferred", topic=topic_name, subscription=SUBSCRIPTION)

    assert result.state == "success", result.states
    assert deferred == [] and triggers_built == []
    assert len(readings.taken) == 1
    wait = result.xcoms["wait"]
    assert (wait["messages"], wait["exact"], wait["lower_bound"]) == (THRESHOLD, False, True)  # settled by the entries
