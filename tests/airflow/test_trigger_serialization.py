"""Every trigger rebuilds from its serialize() output: class path plus plain keyword arguments.

The round trip goes through Airflow's own encodings: the task SDK's serde (a deferred task's
trigger) and ``encode_trigger`` with the trigger table's encrypted kwargs (an asset watcher).
"""

from __future__ import annotations

import json
import time

import pytest

from airflow_pulsar.triggers.await_message import PulsarAwaitMessageTrigger
from airflow_pulsar.triggers.backlog import PulsarBacklogTrigger
from airflow_pulsar.triggers.message_event import PulsarMessageEventTrigger

TRIGGERS = [
    PulsarBacklogTrigger(
        topic="persistent://tenant/ns/orders",
        subscription="ingest",
        threshold=500,
        min_backlog_bytes=1024,
        max_message_age=90.5,
        poll_interval=2.5,
        pulsar_conn_id="pulsar_other",
        deadline=time.time() + 60,
        max_concurrent_requests=4,
    ),
    PulsarBacklogTrigger(topic="orders", subscription="ingest", threshold=1),
    PulsarAwaitMessageTrigger(
        topics=["a", "persistent://public/default/b"],
        subscription="watch",
        apply_function="pkg.module.match",
        apply_function_args=[1, "two"],
        apply_function_kwargs={"level": "alert", "limit": 3},
        subscription_type="Key_Shared",
        initial_position="earliest",
        acknowledge=False,
        pulsar_conn_id="pulsar_other",
        deadline=1.5e9,
    ),
    PulsarAwaitMessageTrigger(topics="a", subscription="watch"),
    PulsarMessageEventTrigger(
        topics="alerts",
        subscription="assets",
        apply_function="pkg.module.is_alert",
        apply_function_kwargs={"level": "alert"},
        subscription_type="Failover",
        initial_position="Earliest",
        redelivery_delay=0.5,
    ),
    PulsarMessageEventTrigger(
        topics=["alerts", "warnings"],
        subscription="assets",
        subscription_type="Key_Shared",
        dead_letter_topic="persistent://public/default/alerts-dead",
        max_redeliver_count=3,
    ),
]


def _rebuild(classpath: str, kwargs: dict):
    from airflow.sdk.module_loading import import_string

    return import_string(classpath)(**kwargs)


@pytest.mark.parametrize("trigger", TRIGGERS, ids=lambda t: type(t).__name__)
def test_serialize_round_trips_through_the_task_sdk(trigger) -> None:
    from airflow.sdk.serde import deserialize, serialize

    classpath, kwargs = trigger.serialize()
    assert classpath == f"{type(trigger).__module__}.{type(trigger).__name__}"
    stored = json.loads(json.dumps(serialize(kwargs)))  # as a deferred task's trigger kwargs travel
    rebuilt = _rebuild(classpath, deserialize(stored))
    assert type(rebuilt) is type(trigger)
    assert rebuilt.serialize() == (classpath, kwargs)


@pytest.mark.parametrize(
    "trigger", [t for t in TRIGGERS if isinstance(t, PulsarMessageEventTrigger)], ids=["failover", "dead_letter"]
)
def test_event_trigger_round_trips_through_the_trigger_table(trigger: PulsarMessageEventTrigger) -> None:
    from airflow.models.trigger import Trigger
    from airflow.serialization.encoders import encode_trigger

    encoded = encode_trigger(trigger)  # what the DAG processor stores for an asset watcher
    row = Trigger(classpath=encoded["classpath"], kwargs=encoded["kwargs"])
    rebuilt = _rebuild(row.classpath, row.kwargs)
    assert rebuilt.serialize() == trigger.serialize()
    assert rebuilt.shared_stream_key() == trigger.shared_stream_key()
    assert hash(rebuilt.shared_stream_key()) == hash(trigger.shared_stream_key())


def test_triggers_keep_plain_json_arguments() -> None:
    for trigger in TRIGGERS:
        _, kwargs = trigger.serialize()
        assert json.loads(json.dumps(kwargs)) == kwargs


def test_a_dead_letter_policy_is_part_of_the_shared_stream() -> None:
    """Watchers with and without a policy on one subscription never share a consumer, and the
    group's consumer gets the policy from the serialized arguments."""
    plain = PulsarMessageEventTrigger(topics="alerts", subscription="assets")
    policed = PulsarMessageEventTrigger(topics="alerts", subscription="assets", max_redeliver_count=4)
    assert plain.shared_stream_key() != policed.shared_stream_key()
    assert PulsarMessageEventTrigger.create_shared_stream_producer(plain.serialize()[1]).dead_letter_policy is None
    policy = PulsarMessageEventTrigger.create_shared_stream_producer(policed.serialize()[1]).dead_letter_policy
    assert policy is not None and (policy.max_redeliver_count, policy.dead_letter_topic) == (4, "")
