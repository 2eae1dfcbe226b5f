"""Triggers close their clients in ``cleanup()``, which the triggerer calls however a trigger ends.

The case ``run()`` cannot cover by itself: the triggerer drops a trigger while its ``run()`` is
suspended at an event it yielded (the task was cleared or timed out, the triggerer is stopping),
so ``run()`` never resumes. Each test runs a trigger to its first event, keeps the suspended
``run()`` referenced (finalizing it would close the clients by another way), and checks that
``cleanup()`` closed what ``run()`` opened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_pulsar.client import Client, InitialPosition
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.exceptions import AlreadyClosed
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.triggers.await_message import PulsarAwaitMessageTrigger
from airflow_pulsar.triggers.backlog import PulsarBacklogTrigger
from airflow_pulsar.triggers.message_event import PulsarMessageEventTrigger
from tests.support.dag_runs import subscription_stats

SUBSCRIPTION = "cleanup"


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop for a trigger's whole life, run step by step as the test needs."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def _send(service_url: str, topic: str, count: int) -> None:
    with Client(service_url) as client:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(count):
            producer.send(f"event-{i}".encode())


def _consumers(admin: PulsarAdmin, topic: str) -> int:
    return len(subscription_stats(admin, topic, SUBSCRIPTION)["consumers"])


@pytest.mark.parametrize("trigger_class", [PulsarAwaitMessageTrigger, PulsarMessageEventTrigger])
def test_cleanup_closes_the_consumer_of_a_run_suspended_at_its_event(
    broker, broker_admin: PulsarAdmin, topic_name: str, loop: asyncio.AbstractEventLoop, trigger_class: type
) -> None:
    _send(broker.service_url, topic_name, 1)
    trigger = trigger_class(topics=[topic_name], subscription=SUBSCRIPTION, initial_position="Earliest")
    run = trigger.run()

    event = loop.run_until_complete(anext(run))

    assert event.payload["message"]["value"] == "event-0"
    assert _consumers(broker_admin, topic_name) == 1
    loop.run_until_complete(trigger.cleanup())
    assert _consumers(broker_admin, topic_name) == 0
    if trigger_class is PulsarMessageEventTrigger:
        # The event was never taken, so the message was not acknowledged: Pulsar delivers it again.
        assert subscription_stats(broker_admin, topic_name, SUBSCRIPTION)["msgBacklog"] == 1
    # Finalizing run() afterwards finds nothing left to close.
    loop.run_until_complete(run.aclose())
    loop.run_until_complete(trigger.cleanup())


def test_cleanup_closes_the_admin_session_of_a_run_suspended_at_its_event(
    broker, broker_admin: PulsarAdmin, topic_name: str, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker_admin.create_topic(topic_name)
    broker_admin.create_subscription(topic_name, SUBSCRIPTION, InitialPosition.Earliest)
    _send(broker.service_url, topic_name, 1)
    opened: list[Any] = []
    get_async_admin = PulsarHook.get_async_admin

    def recording_get_async_admin(self: PulsarHook, *args: Any) -> Any:
        opened.append(get_async_admin(self, *args))
        return opened[-1]

    monkeypatch.setattr(PulsarHook, "get_async_admin", recording_get_async_admin)
    trigger = PulsarBacklogTrigger(topic=topic_name, subscription=SUBSCRIPTION, threshold=1, poll_interval=0.1)
    run = trigger.run()

    event = loop.run_until_complete(anext(run))

    assert event.payload["status"] == "success"
    [admin] = opened
    assert loop.run_until_complete(admin.message_backlog(topic_name, SUBSCRIPTION)).messages == 1
    loop.run_until_complete(trigger.cleanup())
    with pytest.raises(AlreadyClosed):
        loop.run_until_complete(admin.message_backlog(topic_name, SUBSCRIPTION))
    loop.run_until_complete(run.aclose())
