"""PulsarMessageQueueTrigger: common.messaging's MessageQueueTrigger with the pulsar scheme, its
arguments named and checked when built, running the Pulsar trigger against the broker."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger
from airflow.sdk import Asset, AssetWatcher

from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.triggers.message_event import PulsarMessageEventTrigger
from airflow_pulsar.triggers.message_queue import PulsarMessageQueueTrigger


def test_it_is_a_message_queue_trigger_that_serializes_as_the_pulsar_trigger() -> None:
    trigger = PulsarMessageQueueTrigger(
        topics="orders", subscription="watch", apply_function="pulsar_test_functions.is_alert", trigger_queue="pulsar"
    )
    assert isinstance(trigger, MessageQueueTrigger) and isinstance(trigger.trigger, PulsarMessageEventTrigger)
    assert trigger.queue == "pulsar"
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_pulsar.triggers.message_event.PulsarMessageEventTrigger"
    assert (kwargs["topics"], kwargs["subscription"]) == (["orders"], "watch")
    # Usable where Airflow takes a watcher's trigger.
    Asset("orders", watchers=[AssetWatcher(name="orders_watcher", trigger=trigger)])


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"topics": []}, "topics must be a topic name or a non-empty list"),
        ({"subscription": ""}, "subscription must be a non-empty string"),
        ({"apply_function": "not a path"}, "apply_function must be a dotted path"),
        ({"subscription_type": "Solo"}, "subscription_type must be one of"),
    ],
)
def test_bad_arguments_fail_when_it_is_built(arguments: dict, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        PulsarMessageQueueTrigger(**{"topics": "orders", "subscription": "watch", **arguments})


def test_it_fires_on_a_matching_message(broker, broker_admin: PulsarAdmin, topic_name: str) -> None:
    trigger = PulsarMessageQueueTrigger(
        topics=topic_name,
        subscription="watch",
        apply_function="pulsar_test_functions.is_alert",
        initial_position="Earliest",
    )
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic_name, batching_enabled=False)
        producer.send(b"quiet", properties={"level": "info"})
        producer.send(b"loud", properties={"level": "alert"})

    async def first_event() -> Any:
        events = trigger.run()
        try:
            return await asyncio.wait_for(anext(events), 10)
        finally:
            await events.aclose()

    event = asyncio.run(first_event())
    assert event.payload["message"]["value"] == "loud" and event.payload["result"] is True
