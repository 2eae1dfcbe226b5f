"""Message events in bounded batches: a flood of M messages makes ceil(M / N) events of up to N
messages, each event within its byte budget, and the shared stream still acknowledges a batch
only once its events are stored, leaving out the message the function failed on."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.triggers.message_event import PulsarMessageEventTrigger
from tests.support.dag_runs import subscription_stats


def _flood(service_url: str, topic: str, values: list[bytes], batching: bool = True) -> None:
    with Client(service_url) as client:
        producer = client.create_producer(topic, batching_enabled=batching)
        for index, value in enumerate(values):
            producer.send_async(value, None, partition_key=f"k{index % 3}")
        producer.flush()


def _events(trigger: PulsarMessageEventTrigger, messages: int, timeout: float = 20) -> list[dict[str, Any]]:
    """The events of one run() of the trigger until they hold ``messages`` messages."""

    async def take() -> list[dict[str, Any]]:
        events = trigger.run()
        taken: list[dict[str, Any]] = []
        try:
            while sum(len(payload["messages"]) for payload in taken) < messages:
                taken.append((await asyncio.wait_for(anext(events), timeout)).payload)
            return taken
        finally:
            await events.aclose()

    return asyncio.run(take())


def _batch_trigger(topic: str, subscription: str, **settings: Any) -> PulsarMessageEventTrigger:
    return PulsarMessageEventTrigger(topics=topic, subscription=subscription, initial_position="Earliest", **settings)


def test_a_flood_makes_one_event_per_batch_with_every_message_once(broker, broker_admin: PulsarAdmin, topic_name: str) -> None:
    values = [f"order-{index}".encode() for index in range(25)]
    _flood(broker.service_url, topic_name, values, batching=False)  # an entry per message: the backlog shows each ack
    trigger = _batch_trigger(topic_name, "batches", batch_size=10, batch_timeout=2)
    payloads = _events(trigger, 25)
    sizes = [len(payload["messages"]) for payload in payloads]
    assert sizes == [10, 10, 5]
    items = [item for payload in payloads for item in payload["messages"]]
    assert [item["message"]["value"] for item in items] == [value.decode() for value in values]
    first = items[0]
    assert first["result"] is True and first["message"]["key"] == "k0"
    assert first["message"]["message_id"] and first["message"]["publish_time"]
    # A batch is acknowledged once its event was taken and run() resumed: all but the last one.
    assert subscription_stats(broker_admin, topic_name, "batches")["msgBacklog"] == 5


def test_an_event_stays_within_its_byte_budget(broker, broker_admin: PulsarAdmin, topic_name: str) -> None:
    values = [(f"{index:03d}" + "x" * 400).encode() for index in range(12)]
    _flood(broker.service_url, topic_name, values)
    trigger = _batch_trigger(topic_name, "budget", batch_size=12, batch_timeout=2, batch_max_bytes=2048)
    payloads = _events(trigger, len(values))
    assert len(payloads) > 1
    for payload in payloads:
        assert len(json.dumps(payload, separators=(",", ":")).encode()) <= 2048
    assert [item["message"]["value"] for payload in payloads for item in payload["messages"]] == [v.decode() for v in values]


def test_only_matching_messages_join_a_batch(broker, broker_admin: PulsarAdmin, topic_name: str) -> None:
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic_name, batching_enabled=False)
        for index in range(6):
            producer.send(f"m{index}".encode(), properties={"level": "alert" if index % 2 else "info"})
    trigger = _batch_trigger(topic_name, "alerts", apply_function="pulsar_test_functions.is_alert", batch_size=6, batch_timeout=2)
    (payload,) = _events(trigger, 3)
    assert [item["message"]["value"] for item in payload["messages"]] == ["m1", "m3", "m5"]


def test_shared_stream_acknowledges_a_batch_once_stored_and_leaves_the_failed_message(
    broker, broker_admin: PulsarAdmin, topic_name: str
) -> None:
    from airflow.triggers.shared_stream import SharedStreamManager

    with Client(broker.service_url) as client:
        producer = client.create_producer(topic_name, batching_enabled=False)
        producer.send(b"a", properties={"level": "alert"})
        producer.send(b"b")  # no level: the function raises on it
        producer.send(b"c", properties={"level": "alert"})
    trigger = _batch_trigger(
        topic_name, "shared", apply_function="pulsar_test_functions.is_alert", batch_size=3, batch_timeout=2, redelivery_delay=0.2
    )
    key = trigger.shared_stream_key()

    async def scenario() -> tuple[list, int, int]:
        manager = SharedStreamManager(ack_timeout=30)
        fired: list = []

        async def run() -> None:
            stream = manager.subscribe(trigger_id=1, trigger=trigger, key=key)
            async for event in trigger.filter_shared_stream(stream):
                fired.append((event.payload, manager.bind_pending_event(trigger_id=1, key=key)))

        task = asyncio.create_task(run())
        while not fired:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        before = (await asyncio.to_thread(subscription_stats, broker_admin, topic_name, "shared"))["msgBacklog"]
        manager.confirm_persisted(seq for _, seq in fired)
        after = before
        for _ in range(100):
            after = (await asyncio.to_thread(subscription_stats, broker_admin, topic_name, "shared"))["msgBacklog"]
            if after == 1:
                break
            await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await manager.unsubscribe(1, key)
        return fired, before, after

    fired, before, after = asyncio.run(scenario())
    assert [[item["message"]["value"] for item in payload["messages"]] for payload, _ in fired] == [["a", "c"]]
    assert before == 3  # nothing acknowledged before the event was stored
    assert after == 1  # the failed message alone is left, to be redelivered


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_timeout": -1}, "batch_timeout"),
        ({"batch_max_bytes": 100}, "batch_max_bytes"),
    ],
)
def test_bad_batch_settings_fail_when_built(settings: dict, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        PulsarMessageEventTrigger(topics="orders", subscription="s", **settings)


def test_batch_settings_travel_through_the_queue_provider() -> None:
    from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger

    trigger = MessageQueueTrigger(scheme="pulsar", topics="orders", subscription="s", batch_size=50, batch_timeout=3)
    classpath, kwargs = trigger.serialize()
    assert classpath.endswith("PulsarMessageEventTrigger")
    assert (kwargs["batch_size"], kwargs["batch_timeout"], kwargs["batch_max_bytes"]) == (50, 3.0, 1024 * 1024)
