"""Event-driven scheduling on Pulsar messages: the asset watcher, its trigger, and Airflow 3.3's shared streams.

Airflow runs asset-watcher triggers only in a triggerer process fed by the scheduler; here the
same pieces run in this process instead: the DAG is parsed and written to the metadata database
as the DAG processor does, the trigger is rebuilt from its database row as the triggerer does,
its event is submitted through ``Trigger.submit_event``, and ``DagModel.dags_needing_dagruns``
(the scheduler's own query) shows the DAG is due. The shared-stream ack channel is driven through
Airflow's ``SharedStreamManager`` the way the triggerer's runner drives it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select

from airflow_pulsar.client import Client, ConsumerType, InitialPosition, MessageId, exceptions
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.triggers.message_event import PulsarMessageEventTrigger
from tests.support.dag_runs import subscription_stats

ALERTS_DAG = "pulsar_alerts_consumer"
TRIGGER_CLASS = "airflow_pulsar.triggers.message_event.PulsarMessageEventTrigger"


def _send(service_url: str, topic: str, *levels: str | None) -> None:
    """One message per level, each its own entry (so the backlog shows each acknowledgement);
    ``None`` sends a message without a level property."""
    with Client(service_url) as client:
        producer = client.create_producer(topic, batching_enabled=False)
        for index, level in enumerate(levels):
            properties = {"level": level} if level is not None else {}
            producer.send_async(f"event-{index}-{level}".encode(), None, properties=properties)
        producer.flush()


def _sync_dags_folder() -> None:
    """Parse the DAGs folder and write it to the metadata database, as the DAG processor (and dag.test()) do."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    manager = DagBundlesManager()
    with create_session() as session:
        manager.sync_bundles_to_db(session=session)
    bundle = next(bundle for bundle in manager.get_all_dag_bundles() if bundle.name == "dags-folder")
    bag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name)
    assert not bag.import_errors, bag.import_errors
    sync_bag_to_db(bag, bundle.name, bundle.version)


async def _next(events: AsyncIterator[Any], timeout: float = 10.0) -> Any:
    return await asyncio.wait_for(anext(events), timeout)


def test_message_queue_trigger_with_the_pulsar_scheme_is_the_pulsar_trigger() -> None:
    from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger

    trigger = MessageQueueTrigger(
        scheme="pulsar", topics="orders", subscription="watch", apply_function="pkg.match", max_redeliver_count=5
    )
    assert isinstance(trigger.trigger, PulsarMessageEventTrigger)
    classpath, kwargs = trigger.serialize()
    assert classpath == TRIGGER_CLASS
    assert kwargs["topics"] == ["orders"] and kwargs["apply_function"] == "pkg.match"
    assert kwargs["max_redeliver_count"] == 5 and kwargs["dead_letter_topic"] is None


def test_asset_watcher_schedules_the_dag_on_a_produced_message(broker, broker_admin: PulsarAdmin) -> None:
    from airflow.models.asset import AssetDagRunQueue, AssetEvent, AssetModel
    from airflow.models.dag import DagModel
    from airflow.models.trigger import Trigger
    from airflow.sdk.module_loading import import_string
    from airflow.utils.session import create_session
    from sqlalchemy import delete

    _sync_dags_folder()
    with create_session() as session:
        asset = session.scalars(select(AssetModel).where(AssetModel.name == "pulsar_test_alerts")).one()
        # The metadata database outlives the module (the test runs once per broker): start clean.
        session.execute(delete(AssetEvent).where(AssetEvent.asset_id == asset.id))
        session.execute(delete(AssetDagRunQueue).where(AssetDagRunQueue.asset_id == asset.id))
        (row,) = asset.triggers
        trigger_id, classpath, kwargs = row.id, row.classpath, row.kwargs
    assert classpath == TRIGGER_CLASS
    (topic,), subscription = kwargs["topics"], kwargs["subscription"]
    assert kwargs["apply_function"] == "pulsar_test_functions.is_alert"

    # The triggerer rebuilds the trigger from its row; nothing connects until it runs.
    trigger = import_string(classpath)(**kwargs)
    _send(broker.service_url, topic, "info", "alert")

    async def first_event() -> Any:
        events = trigger.run()
        try:
            return await _next(events)
        finally:
            await events.aclose()

    event = asyncio.run(first_event())
    assert event.payload["message"]["value"] == "event-1-alert" and event.payload["result"] is True

    with create_session() as session:
        Trigger.submit_event(trigger_id=trigger_id, event=event, session=session)
    with create_session() as session:
        (asset_event,) = session.scalars(select(AssetEvent).where(AssetEvent.asset_id == asset.id)).all()
        assert asset_event.extra == {"from_trigger": True, "payload": event.payload}
        queued = session.scalars(select(AssetDagRunQueue.target_dag_id)).all()
        assert queued == [ALERTS_DAG]
        _, due = DagModel.dags_needing_dagruns(session)
        assert ALERTS_DAG in due
    # run() acknowledged the "info" message it let pass; the matched one is acknowledged only when
    # the trigger resumes after its event is taken, so closing it first leaves it for redelivery.
    assert subscription_stats(broker_admin, topic, subscription)["msgBacklog"] == 1


def test_shared_stream_acknowledges_only_once_events_are_persisted(
    broker, broker_admin: PulsarAdmin, topic_name: str
) -> None:
    from airflow.triggers.shared_stream import SharedStreamManager

    subscription = "watchers"

    def watcher(level: str) -> PulsarMessageEventTrigger:
        return PulsarMessageEventTrigger(
            topics=topic_name,
            subscription=subscription,
            apply_function="pulsar_test_functions.is_alert",
            apply_function_kwargs={"level": level},
            initial_position="Earliest",
            redelivery_delay=0.2,
        )

    alerts, infos = watcher("alert"), watcher("info")
    key = alerts.shared_stream_key()
    assert key == infos.shared_stream_key()  # same stream, each with its own filter
    # "alert" fires the first trigger, "info" the second; a message without a level makes both filters raise.
    _send(broker.service_url, topic_name, "alert", "info", None)

    async def scenario() -> dict[str, Any]:
        manager = SharedStreamManager(ack_timeout=30)
        fired: dict[int, list] = {1: [], 2: []}

        async def run(trigger_id: int, trigger: PulsarMessageEventTrigger) -> None:
            # What the triggerer's runner does with each event: bind it to the raw message, queue it.
            stream = manager.subscribe(trigger_id=trigger_id, trigger=trigger, key=key)
            async for event in trigger.filter_shared_stream(stream):
                fired[trigger_id].append((event.payload, manager.bind_pending_event(trigger_id=trigger_id, key=key)))

        tasks = [asyncio.create_task(run(1, alerts)), asyncio.create_task(run(2, infos))]
        while not (fired[1] and fired[2]):
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # time enough for acks to reach the broker, were any sent
        before = (await asyncio.to_thread(subscription_stats, broker_admin, topic_name, subscription))["msgBacklog"]
        # The supervisor confirms the events are stored: now both messages may be acknowledged.
        manager.confirm_persisted(seq for events in fired.values() for _, seq in events)
        # Then wait until the rejected one has come back too (negative acks go out after redelivery_delay).
        for _ in range(100):
            stats = await asyncio.to_thread(subscription_stats, broker_admin, topic_name, subscription)
            after = stats["msgBacklog"]
            if after == 1 and stats["msgRateRedeliver"] > 0:
                break
            await asyncio.sleep(0.05)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await manager.unsubscribe(1, key)
        await manager.unsubscribe(2, key)
        return {"fired": fired, "before": before, "after": after}

    outcome = asyncio.run(scenario())
    assert [payload["message"]["value"] for payload, _ in outcome["fired"][1]] == ["event-0-alert"]
    assert [payload["message"]["value"] for payload, _ in outcome["fired"][2]] == ["event-1-info"]
    assert all(seq is not None for events in outcome["fired"].values() for _, seq in events)
    assert outcome["before"] == 3  # nothing acknowledged before the events were persisted
    assert outcome["after"] == 1  # both fired messages acknowledged; the rejected one remains

    # The rejected message was not acknowledged: it is what remains. (Its redelivery count is not
    # compared: Pulsar forgets the counts when the subscription's last consumer leaves.)
    with Client(broker.service_url) as client:
        consumer = client.subscribe(topic_name, subscription, consumer_type=ConsumerType.Shared)
        message = consumer.receive(timeout_millis=5000)
        assert message.data() == b"event-2-None"
        with pytest.raises(exceptions.Timeout):
            consumer.receive(timeout_millis=300)


def test_a_poison_message_goes_to_the_dead_letter_topic_and_the_watcher_keeps_serving(
    broker, broker_admin: PulsarAdmin, topic_name: str
) -> None:
    from airflow.triggers.shared_stream import SharedStreamManager

    dead_letter_topic = f"{topic_name}-dead"
    trigger = PulsarMessageEventTrigger(
        topics=topic_name,
        subscription="watchers",
        apply_function="pulsar_test_functions.is_alert",
        initial_position="Earliest",
        redelivery_delay=0.1,
        dead_letter_topic=dead_letter_topic,
        max_redeliver_count=2,
    )
    key = trigger.shared_stream_key()
    client = Client(broker.service_url)
    # Subscribed first, so Pulsar keeps what arrives there.
    dead_letters = client.subscribe(dead_letter_topic, "inspect", initial_position=InitialPosition.Earliest)
    # The message without a level makes the function raise, every time it comes.
    _send(broker.service_url, topic_name, "alert", None, "info", "alert")

    async def scenario() -> tuple[list[str], Any]:
        manager = SharedStreamManager(ack_timeout=30)
        fired: list[str] = []

        async def run() -> None:
            stream = manager.subscribe(trigger_id=1, trigger=trigger, key=key)
            async for event in trigger.filter_shared_stream(stream):
                fired.append(event.payload["message"]["value"])
                # As the triggerer's supervisor does once the asset event is stored.
                manager.confirm_persisted([manager.bind_pending_event(trigger_id=1, key=key)])

        task = asyncio.create_task(run())
        try:
            moved = await asyncio.to_thread(dead_letters.receive, 10_000)
            # After the poison message is gone, the watcher still serves the topic.
            await asyncio.to_thread(_send, broker.service_url, topic_name, "alert")
            for _ in range(200):
                stats = await asyncio.to_thread(subscription_stats, broker_admin, topic_name, "watchers")
                if len(fired) == 3 and stats["msgBacklog"] == 0:
                    break
                await asyncio.sleep(0.05)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await manager.unsubscribe(1, key)
        return fired, moved

    try:
        fired, moved = asyncio.run(scenario())
        # The alerts before and after the poison message, then the one sent once it had moved.
        assert fired == ["event-0-alert", "event-3-alert", "event-0-alert"]
        assert moved.data() == b"event-1-None"
        assert moved.properties()["REAL_TOPIC"] == f"persistent://public/default/{topic_name}"
        origin = client.create_reader(topic_name, MessageId.earliest)
        origin.read_next(5000)
        assert moved.properties()["ORIGIN_MESSAGE_ID"] == str(origin.read_next(5000).message_id())
        with pytest.raises(exceptions.Timeout):
            dead_letters.receive(timeout_millis=300)
    finally:
        client.close()
    # Everything settled on the source: the fired and passed messages acknowledged, the poison one moved.
    stats = subscription_stats(broker_admin, topic_name, "watchers")
    assert stats["msgBacklog"] == 0 and stats["unackedMessages"] == 0


def test_shared_stream_producer_connects_only_when_the_stream_opens() -> None:
    trigger = PulsarMessageEventTrigger(topics=["a", "b"], subscription="s", pulsar_conn_id="no_such_connection")
    producer = PulsarMessageEventTrigger.create_shared_stream_producer(trigger.serialize()[1])
    assert producer.topics == ["a", "b"] and producer.subscription == "s"
    assert producer._client is None and producer._consumer is None


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"apply_function": lambda m: True}, "apply_function must be a dotted path"),
        ({"redelivery_delay": -1}, "redelivery_delay must be a non-negative number"),
        ({"subscription": ""}, "subscription must be a non-empty string"),
        ({"topics": 5}, "topics must be a topic name or a non-empty list"),
        ({"max_redeliver_count": "3"}, "max_redeliver_count must be an int >= 1"),
        ({"dead_letter_topic": "dlq"}, "dead_letter_topic 'dlq' needs max_redeliver_count"),
        ({"max_redeliver_count": 1, "dead_letter_topic": "{{ params.dlq }}"}, "dead_letter_topic is not templated"),
        (
            {"max_redeliver_count": 1, "subscription_type": "Exclusive"},
            "max_redeliver_count needs a Shared or KeyShared subscription, got Exclusive",
        ),
    ],
)
def test_trigger_rejects_bad_arguments(arguments: dict, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        PulsarMessageEventTrigger(**{"topics": "t", "subscription": "s", **arguments})


def test_a_function_the_triggerer_cannot_import_stops_the_trigger_once_and_consumes_nothing(
    broker, broker_admin: PulsarAdmin, topic_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As in a triggerer without the function's module: one error naming its import path, no
    consumer, and the messages left in the subscription instead of rejected and redelivered."""
    _send(broker.service_url, topic_name, "high", "high")
    broker_admin.create_subscription(topic_name, "alerts", InitialPosition.Earliest)
    trigger = PulsarMessageEventTrigger(
        topics=topic_name, subscription="alerts", apply_function="only_in_the_dags_folder.is_alert"
    )
    assert trigger.shared_stream_key() is None  # so the triggerer runs it alone, through run()

    async def first_event_within(seconds: float) -> Any:
        events = trigger.run()
        try:
            return await asyncio.wait_for(anext(events), seconds)
        finally:
            await events.aclose()

    with pytest.raises(TimeoutError):
        asyncio.run(first_event_within(3.0))

    # Airflow's structured logging writes to stdout.
    errors = [line for line in capsys.readouterr().out.splitlines() if "error" in line.split("]")[0]]
    assert len(errors) == 1, errors
    assert "'only_in_the_dags_folder.is_alert' cannot be imported" in errors[0]
    assert "plugins folder" in errors[0] and "this process imports from: " in errors[0]
    stats = subscription_stats(broker_admin, topic_name, "alerts")
    assert stats["consumers"] == [] and stats["msgBacklog"] == 2
