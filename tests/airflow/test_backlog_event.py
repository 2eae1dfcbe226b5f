"""The backlog event trigger against the broker: it fires when the backlog reaches the threshold,
then only for messages published after the positions it fired at, however many of the earlier
ones are still unconsumed; the age condition re-arms the same way; and the positions kept in the
asset state store carry over to a new trigger (a restarted triggerer)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_pulsar.client import Client, InitialPosition
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.triggers.backlog_event import PulsarBacklogEventTrigger

POLL = 0.3
SUBSCRIPTION = "ingest"


class StateStore:
    """The two calls the trigger makes on Airflow's asset state store accessor, kept in a dict."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    async def aget(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    async def aset(self, key: str, value: Any) -> None:
        self.values[key] = value


def _topic(admin: PulsarAdmin, topic: str, partitions: int) -> None:
    if partitions:
        admin.create_partitioned_topic(topic, partitions)
    admin.create_subscription(topic, SUBSCRIPTION, InitialPosition.Earliest)


def _send(service_url: str, topic: str, count: int, start: int = 0) -> None:
    with Client(service_url) as client:
        producer = client.create_producer(topic)
        for index in range(start, start + count):
            producer.send_async(f"m{index}".encode(), None, partition_key=f"k{index}")
        producer.flush()


class Watch:
    """A trigger's run() in the background of an event loop, its events collected."""

    def __init__(self, trigger: PulsarBacklogEventTrigger) -> None:
        self.trigger = trigger
        self.events: list[dict[str, Any]] = []

    async def __aenter__(self) -> Watch:
        async def collect() -> None:
            async for event in self.trigger.run():
                self.events.append(event.payload)

        self.task = asyncio.create_task(collect())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.trigger.cleanup()

    async def wait_for(self, count: int, timeout: float = 20) -> None:
        for _ in range(int(timeout / 0.05)):
            if len(self.events) >= count or self.task.done():
                break
            await asyncio.sleep(0.05)
        if self.task.done():
            self.task.result()
        assert len(self.events) >= count, f"{len(self.events)} events, waited for {count}"


@pytest.mark.parametrize("partitions", [0, 3])
def test_it_fires_at_the_threshold_and_again_only_for_later_messages(
    broker, broker_admin: PulsarAdmin, topic_name: str, partitions: int
) -> None:
    _topic(broker_admin, topic_name, partitions)
    trigger = PulsarBacklogEventTrigger(topic=topic_name, subscription=SUBSCRIPTION, threshold=10, poll_interval=POLL)

    async def scenario() -> list[dict[str, Any]]:
        async with Watch(trigger) as watch:
            _send(broker.service_url, topic_name, 12)
            await watch.wait_for(1)
            # Nothing consumed: the 12 stay in the backlog, and 7 more are not enough to fire again.
            _send(broker.service_url, topic_name, 7, start=12)
            await asyncio.sleep(POLL * 5)
            assert len(watch.events) == 1
            _send(broker.service_url, topic_name, 3, start=19)
            await watch.wait_for(2)
            await asyncio.sleep(POLL * 5)
        return watch.events

    first, second = asyncio.run(scenario())
    assert first["new_messages"] == first["backlog"]["messages"] == 12
    assert first["previous_positions"] == {}
    # The first 12 are still unconsumed; the backlog read may trail the last sends by a moment.
    assert second["new_messages"] == 10 and second["backlog"]["messages"] >= 19
    assert second["previous_positions"] == first["positions"]
    assert len(first["positions"]) == max(partitions, 1)
    assert sum(second["new_by_partition"].values()) == 10


def test_messages_consumed_since_the_event_do_not_count_again(broker, broker_admin: PulsarAdmin, topic_name: str) -> None:
    _topic(broker_admin, topic_name, 0)
    trigger = PulsarBacklogEventTrigger(topic=topic_name, subscription=SUBSCRIPTION, threshold=5, poll_interval=POLL)

    async def scenario() -> list[dict[str, Any]]:
        async with Watch(trigger) as watch:
            _send(broker.service_url, topic_name, 5)
            await watch.wait_for(1)
            _send(broker.service_url, topic_name, 3, start=5)
            # The run the event started consumes everything there is, in order, then 5 more arrive.
            with Client(broker.service_url) as client:
                consumer = client.subscribe(topic_name, SUBSCRIPTION)
                for _ in range(8):
                    last = consumer.receive(timeout_millis=5000)
                consumer.acknowledge_cumulative(last)
                consumer.close()
            await asyncio.sleep(POLL * 4)
            assert len(watch.events) == 1
            _send(broker.service_url, topic_name, 5, start=8)
            await watch.wait_for(2)
        return watch.events

    _, second = asyncio.run(scenario())
    assert second["new_messages"] == second["backlog"]["messages"] == 5


def test_the_age_condition_fires_once_per_old_message(broker, broker_admin: PulsarAdmin, topic_name: str) -> None:
    _topic(broker_admin, topic_name, 0)
    trigger = PulsarBacklogEventTrigger(
        topic=topic_name, subscription=SUBSCRIPTION, threshold=1000, max_message_age=1.0, poll_interval=POLL
    )

    async def scenario() -> list[dict[str, Any]]:
        async with Watch(trigger) as watch:
            _send(broker.service_url, topic_name, 1)
            await watch.wait_for(1)
            await asyncio.sleep(2.0)  # old enough to fire again, were it counted again
            assert len(watch.events) == 1
            _send(broker.service_url, topic_name, 1, start=1)
            await watch.wait_for(2)
        return watch.events

    first, second = asyncio.run(scenario())
    assert first["new_messages"] == 1
    assert second["new_messages"] == 1 and second["backlog"]["messages"] == 2


def test_positions_in_the_asset_state_store_survive_a_new_trigger(broker, broker_admin: PulsarAdmin, topic_name: str) -> None:
    _topic(broker_admin, topic_name, 2)
    store = StateStore()

    def trigger() -> PulsarBacklogEventTrigger:
        made = PulsarBacklogEventTrigger(topic=topic_name, subscription=SUBSCRIPTION, threshold=4, poll_interval=POLL)
        made.asset_state_store = store  # type: ignore[assignment]  # what the triggerer injects
        return made

    async def scenario() -> tuple[list, list]:
        async with Watch(trigger()) as before:
            _send(broker.service_url, topic_name, 6)
            await before.wait_for(1)
        # A restarted triggerer builds the trigger anew from its arguments; the store holds the positions.
        async with Watch(trigger()) as after:
            await asyncio.sleep(POLL * 5)
            assert after.events == []
            _send(broker.service_url, topic_name, 4, start=6)
            await after.wait_for(1)
        return before.events, after.events

    (fired,), (refired,) = asyncio.run(scenario())
    assert store.values[PulsarBacklogEventTrigger.STATE_KEY] == refired["positions"]
    assert refired["previous_positions"] == fired["positions"]
    assert refired["new_messages"] == 4


def test_it_serializes_its_arguments_and_not_its_positions() -> None:
    trigger = PulsarBacklogEventTrigger(topic="orders", subscription="ingest", threshold=100, max_message_age=60)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_pulsar.triggers.backlog_event.PulsarBacklogEventTrigger"
    assert kwargs == {
        "topic": "orders",
        "subscription": "ingest",
        "threshold": 100,
        "max_message_age": 60.0,
        "poll_interval": 5.0,
        "pulsar_conn_id": "pulsar_default",
    }
    assert type(trigger)(**kwargs).serialize() == (classpath, kwargs)
