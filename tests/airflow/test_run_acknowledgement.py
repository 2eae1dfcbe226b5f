"""Messages acknowledged once the run they started succeeded (``acknowledge="on_success"``), on both brokers.

The watcher's trigger consumes in this process (``run()``, the path outside Airflow's shared
streams, which settles through the same stream producer); the run's settling operators are given
the trigger's real events as Airflow hands a run its triggering asset events. A DAG run through
``dag.test()`` shows the trigger rules that pick one of the two operators.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.run_messages import PulsarAcknowledgeRunMessagesOperator, PulsarReleaseRunMessagesOperator
from airflow_pulsar.triggers.message_batch import BatchLimits
from airflow_pulsar.triggers.message_event import PulsarMessageEventTrigger
from airflow_pulsar.triggers.run_settlement import SettleNotice, notices_by_topic
from tests.support.dag_files import load_dag_file
from tests.support.dag_runs import DOCS_EXAMPLES, run_dag, subscription_stats
from tests.support.polling import wait_until


def _run_context(*payloads: dict[str, Any]) -> dict[str, Any]:
    """What a task of a run started by these events finds in its context (the parts the operators read)."""
    events = [SimpleNamespace(extra={"payload": payload}) for payload in payloads]
    return {"triggering_asset_events": {"orders": events}, "dag": SimpleNamespace(dag_id="ship"), "run_id": "run-1"}


def _watcher(topic: str, batch_size: int, **kwargs: Any) -> PulsarMessageEventTrigger:
    """A watcher acknowledging on success with subscription ``watch``; a batch closes after a second."""
    return PulsarMessageEventTrigger(
        topics=topic, subscription="watch", initial_position="Earliest", batch_size=batch_size, batch_timeout=1,
        acknowledge="on_success", ack_timeout=600, redelivery_delay=0.5, **kwargs,
    )


def _values(payload: dict[str, Any]) -> list[str]:
    return [item["message"]["value"] for item in payload["messages"]]


async def _next(events: AsyncIterator[Any], timeout: float = 30.0) -> dict[str, Any]:
    return (await asyncio.wait_for(anext(events), timeout)).payload


async def _cancel(waiting: asyncio.Future[Any]) -> None:
    """Stop waiting for an event (before the trigger's generator is closed)."""
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting


def test_a_failed_run_s_messages_come_back_and_a_successful_run_s_are_acknowledged(
    broker: Any, broker_admin: PulsarAdmin, topic_name: str
) -> None:
    trigger = _watcher(topic_name, batch_size=3)
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic_name, batching_enabled=False)
        for index in range(3):
            producer.send(f"order-{index}".encode())

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        events = trigger.run()
        try:
            first = await _next(events)
            # Asking for the next event settles the first's batch: held, not acknowledged.
            pending = asyncio.ensure_future(_next(events))
            released = await asyncio.to_thread(PulsarReleaseRunMessagesOperator(task_id="release").execute, _run_context(first))
            assert released == 3
            again = await pending
            pending = asyncio.ensure_future(_next(events, timeout=3600))
            acknowledged = await asyncio.to_thread(
                PulsarAcknowledgeRunMessagesOperator(task_id="acknowledge").execute, _run_context(again)
            )
            assert acknowledged == 3
            await asyncio.to_thread(
                wait_until, lambda: subscription_stats(broker_admin, topic_name, "watch")["msgBacklog"] == 0, "the acknowledgements", 30
            )
            await _cancel(pending)
            return first, again
        finally:
            await events.aclose()
            await trigger.cleanup()

    first, again = asyncio.run(scenario())
    assert first["settle_topic"] == f"{topic_name}-watch-settle"
    assert _values(first) == _values(again) == ["order-0", "order-1", "order-2"]
    assert [item["message"]["message_id"] for item in first["messages"]] == [item["message"]["message_id"] for item in again["messages"]]
    assert all(item["message"]["redelivery_count"] >= 1 for item in again["messages"])
    assert subscription_stats(broker_admin, topic_name, "watch")["unackedMessages"] == 0


def test_across_watcher_restarts_a_live_run_s_messages_stay_held_and_notices_published_meanwhile_settle(
    broker: Any, broker_admin: PulsarAdmin, topic_name: str
) -> None:
    """Each watcher below stands for a triggerer: stopped without settling, and started again."""
    kwargs = _watcher(topic_name, batch_size=2).serialize()[1]
    settle_topic = kwargs["settle_topic"]

    async def watch() -> tuple[PulsarMessageEventTrigger, AsyncIterator[Any]]:
        trigger = PulsarMessageEventTrigger(**kwargs)
        return trigger, trigger.run()

    async def stop(trigger: PulsarMessageEventTrigger, events: AsyncIterator[Any], *pending: asyncio.Future[Any]) -> None:
        for waiting in pending:
            await _cancel(waiting)
        await events.aclose()  # type: ignore[attr-defined]
        await trigger.cleanup()

    def settle(operator: Any, *payloads: dict[str, Any]) -> Any:
        return asyncio.to_thread(operator(task_id="settle").execute, _run_context(*payloads))

    def drained(topic: str, subscription: str) -> Any:
        condition = lambda: subscription_stats(broker_admin, topic, subscription)["msgBacklog"] == 0  # noqa: E731
        return asyncio.to_thread(wait_until, condition, f"{subscription} on {topic} drained", 60)

    async def scenario(producer: Any) -> list[dict[str, Any]]:
        producer.send(b"m0")
        producer.send(b"m1")
        trigger, events = await watch()
        first = await _next(events)
        await stop(trigger, events)
        # The run succeeds while no watcher runs: its notice waits in the settle topic.
        assert await settle(PulsarAcknowledgeRunMessagesOperator, first) == 2

        trigger, events = await watch()
        pending = asyncio.ensure_future(_next(events))
        producer.send(b"m2")
        second = await pending  # m0 and m1 came back and were acknowledged, not fired
        pending = asyncio.ensure_future(_next(events))  # holds m2
        await asyncio.to_thread(
            wait_until, lambda: subscription_stats(broker_admin, topic_name, "watch")["msgBacklog"] == 1, "m0 and m1 acknowledged", 60
        )
        await stop(trigger, events, pending)

        # m2's run is still live: the next watcher holds m2 again, and fires only what is new.
        trigger, events = await watch()
        pending = asyncio.ensure_future(_next(events))
        producer.send(b"m3")
        third = await pending
        pending = asyncio.ensure_future(_next(events))
        # m2's run fails now: m2 fires anew, alone.
        assert await settle(PulsarReleaseRunMessagesOperator, second) == 1
        again = await pending
        pending = asyncio.ensure_future(_next(events, timeout=3600))
        assert await settle(PulsarAcknowledgeRunMessagesOperator, third, again) == 2
        await drained(topic_name, "watch")
        await drained(settle_topic, "watch")  # every fired record and notice served its purpose
        await stop(trigger, events, pending)
        return [first, second, third, again]

    with Client(broker.service_url) as client:
        events = asyncio.run(scenario(client.create_producer(topic_name, batching_enabled=False)))
    first, second, third, again = events
    assert [_values(event) for event in events] == [["m0", "m1"], ["m2"], ["m3"], ["m2"]]
    assert again["messages"][0]["message"]["message_id"] == second["messages"][0]["message"]["message_id"]
    assert subscription_stats(broker_admin, topic_name, "watch")["unackedMessages"] == 0


def test_messages_no_event_names_are_acknowledged_at_once_and_the_fired_ones_held(
    broker: Any, broker_admin: PulsarAdmin, topic_name: str
) -> None:
    trigger = _watcher(topic_name, batch_size=4, apply_function="pulsar_test_functions.is_alert")
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic_name, batching_enabled=False)
        for index in range(4):
            producer.send(f"m{index}".encode(), properties={"level": "alert" if index % 2 else "info"})

    def backlog(count: int) -> Any:
        condition = lambda: subscription_stats(broker_admin, topic_name, "watch")["msgBacklog"] == count  # noqa: E731
        return asyncio.to_thread(wait_until, condition, f"a backlog of {count}", 30)

    async def scenario() -> dict[str, Any]:
        events = trigger.run()
        try:
            payload = await _next(events)
            pending = asyncio.ensure_future(_next(events, timeout=3600))  # settles the batch
            await backlog(2)  # m0 and m2 acknowledged; m1 and m3 held for their run
            await asyncio.to_thread(PulsarAcknowledgeRunMessagesOperator(task_id="acknowledge").execute, _run_context(payload))
            await backlog(0)
            await _cancel(pending)
            return payload
        finally:
            await events.aclose()
            await trigger.cleanup()

    assert _values(asyncio.run(scenario())) == ["m1", "m3"]


def test_the_run_s_tasks_settle_by_trigger_rule(broker_admin: PulsarAdmin) -> None:
    succeeded = run_dag("pulsar_run_settlement")
    assert succeeded.state == "success"
    assert succeeded.states == {"handle": "success", "acknowledge": "success", "release": "skipped"}
    failed = run_dag("pulsar_run_settlement", fail=True)
    assert failed.state == "failed"
    assert failed.states == {"handle": "failed", "acknowledge": "upstream_failed", "release": "success"}
    assert failed.xcoms["release"] == 0  # a run no watcher started names no messages


def test_notices_name_the_messages_of_each_watcher_s_events() -> None:
    single = {"message": {"topic": "t-partition-0", "message_id": "(1,2,0,-1)"}, "result": True, "settle_topic": "s1"}
    batch = {"messages": [{"message": {"topic": "t2", "message_id": "(3,4,-1,0)"}}], "settle_topic": "s2"}
    fired = {"message": {"topic": "t3", "message_id": "(5,6,-1,-1)"}, "result": True}  # acknowledged on firing
    assert notices_by_topic([single, batch, fired]) == {"s1": [("t-partition-0", "(1,2,0,-1)")], "s2": [("t2", "(3,4,-1,0)")]}
    notice = SettleNotice("release", (("t2", "(3,4,-1,0)"),), "ship/run-1")
    assert SettleNotice.decode(notice.encode()) == notice
    with pytest.raises(ValueError, match="settle outcome"):
        SettleNotice.decode(b'{"outcome": "drop", "messages": []}')


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"acknowledge": "on_success"}, "ack_timeout"),
        ({"acknowledge": "on_success", "ack_timeout": 5}, "at least 10"),
        ({"acknowledge": "later"}, "acknowledge must be one of"),
        ({"ack_timeout": 600}, "need acknowledge"),
    ],
)
def test_on_success_arguments_are_checked_when_the_dag_is_parsed(arguments: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        PulsarMessageEventTrigger(topics="orders", subscription="watch", **arguments)


def test_on_success_settings_reach_the_triggerer_and_keep_the_stream_apart() -> None:
    held = PulsarMessageEventTrigger(topics="orders", subscription="watch", acknowledge="on_success", ack_timeout=7200)
    fired = PulsarMessageEventTrigger(topics="orders", subscription="watch")
    classpath, kwargs = held.serialize()
    assert (kwargs["acknowledge"], kwargs["settle_topic"], kwargs["ack_timeout"]) == ("on_success", "orders-watch-settle", 7200)
    assert PulsarMessageEventTrigger(**kwargs).serialize() == (classpath, kwargs)
    assert held.shared_stream_key() != fired.shared_stream_key()
    producer = PulsarMessageEventTrigger.create_shared_stream_producer(kwargs)
    assert (producer.settle_topic, producer.ack_timeout) == ("orders-watch-settle", 7200)


def test_the_docs_example_acknowledges_a_shipped_batch(broker: Any, broker_admin: PulsarAdmin) -> None:
    """The example's watcher holds a batch of paid orders; its DAG's acknowledging task settles it."""
    module = load_dag_file(DOCS_EXAMPLES / "dags" / "orders_on_success.py", "docs_orders_on_success")
    trigger = module.orders.watchers[0].trigger
    trigger.batch_limits = BatchLimits(size=2, timeout=10)  # the batch closes on its second order
    acknowledge = module.dag.get_task("acknowledge_orders")
    assert (acknowledge.trigger_rule, module.dag.get_task("release_orders").trigger_rule) == ("all_success", "one_failed")

    async def scenario(producer: Any) -> dict[str, Any]:
        events = trigger.run()
        first = asyncio.ensure_future(_next(events))
        try:
            # The subscription starts at the latest message: publish once it exists.
            await asyncio.to_thread(
                wait_until, lambda: "airflow-paid-orders" in broker_admin.list_subscriptions("paid-orders"), "the subscription", 30
            )
            producer.send(b"order-1")
            producer.send(b"order-2")
            payload = await first
            settled = asyncio.ensure_future(_next(events, timeout=3600))  # holds the batch
            assert await asyncio.to_thread(acknowledge.execute, _run_context(payload)) == 2
            await asyncio.to_thread(
                wait_until, lambda: subscription_stats(broker_admin, "paid-orders", "airflow-paid-orders")["msgBacklog"] == 0,
                "the acknowledgements", 30,
            )
            await _cancel(settled)
            return payload
        finally:
            await _cancel(first)
            await events.aclose()
            await trigger.cleanup()

    try:
        with Client(broker.service_url) as client:
            producer = client.create_producer("paid-orders", batching_enabled=False)
            assert _values(asyncio.run(scenario(producer))) == ["order-1", "order-2"]
    finally:
        broker_admin.delete_topic("paid-orders", force=True)
