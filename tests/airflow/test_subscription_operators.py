"""The subscription and topic operators, and the backlog sensor's ``create_subscription`` and
deferrable default, in real DAG runs (dag.test()) against the real brokers.

The DAGs are in tests/airflow/dags/pulsar_subscriptions.py. Positions (message ids, publish times)
are checked against Pulsar's own ``msgBacklog``: messages are sent unbatched, one entry each.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException

from airflow_pulsar.arguments import subscription_position
from airflow_pulsar.client import Client, InitialPosition, MessageId
from airflow_pulsar.client.admin import AdminNotFoundError, PulsarAdmin
from airflow_pulsar.operators.subscriptions import (
    PulsarCreateSubscriptionOperator,
    PulsarDeleteSubscriptionOperator,
    PulsarResetSubscriptionOperator,
)
from airflow_pulsar.operators.topics import PulsarCreateTopicOperator
from airflow_pulsar.sensors.backlog import PulsarBacklogSensor
from airflow_pulsar.triggers.backlog import PulsarBacklogTrigger
from tests.support.airflow_env import AIRFLOW_ENV
from tests.support.dag_runs import run_dag

MESSAGES = 6  # the DAGs' count


@pytest.mark.parametrize(
    ("dag_id", "partitions"), [("pulsar_subscriptions_plain", 0), ("pulsar_subscriptions_partitioned", 3)]
)
def test_a_dag_creates_watches_rewinds_and_deletes_a_subscription(
    broker_admin: PulsarAdmin, topic_name: str, tmp_path: Path, dag_id: str, partitions: int
) -> None:
    out = tmp_path / "consumed.txt"
    result = run_dag(dag_id, topic=topic_name, subscription="audit", fresh="late-joiner", out=str(out))

    assert result.state == "success", result.states
    xcoms = result.xcoms
    assert xcoms["create_topic"] == {"topic": topic_name, "partitions": partitions, "created": True}
    assert broker_admin.partition_count(topic_name) == partitions
    assert xcoms["subscribe"]["created"] is True
    assert xcoms["subscribe_again"]["created"] is False  # left at earliest: the backlog below says so
    # Created at earliest before the produce: every message is in the backlog.
    assert xcoms["wait"]["messages"] == MESSAGES
    # Created by the sensor, after the produce, at earliest: the same backlog.
    assert xcoms["wait_fresh"]["messages"] == MESSAGES
    assert xcoms["consume"]["acknowledged"] == MESSAGES
    assert len(out.read_text().splitlines()) == MESSAGES
    # Consumed to the end, then rewound: the whole backlog again (the sensor would time out otherwise).
    assert xcoms["rewind"]["position"] == "earliest"
    assert xcoms["wait_again"]["messages"] == MESSAGES
    assert (xcoms["delete"]["deleted"], xcoms["delete_again"]["deleted"]) == (True, False)
    assert broker_admin.list_subscriptions(topic_name) == ["late-joiner"]


def _send(service_url: str, topic: str, count: int) -> list[MessageId]:
    with Client(service_url) as client:
        producer = client.create_producer(topic, batching_enabled=False)
        return [producer.send(f"m{i}".encode()) for i in range(count)]


def _run(operator: Any) -> Any:
    return operator.execute({})


def test_positions_by_message_id_and_publish_time(broker, broker_admin: PulsarAdmin, topic_name: str) -> None:
    _run(PulsarCreateTopicOperator(task_id="t", topic=topic_name))
    first = _send(broker.service_url, topic_name, 3)
    time.sleep(0.05)
    middle = datetime.now(timezone.utc)
    time.sleep(0.05)
    second = _send(broker.service_url, topic_name, 3)
    ids = first + second

    def backlog(subscription: str) -> int:
        return broker_admin.backlog(topic_name, subscription).msg_backlog

    # At a message id (text form): that message and those after it.
    at = f"{ids[1].ledger_id()}:{ids[1].entry_id()}"
    _run(PulsarCreateSubscriptionOperator(task_id="c", topic=topic_name, subscription="by-id", initial_position=at))
    assert backlog("by-id") == 5
    # At a publish time: created at earliest, then reset there.
    _run(PulsarCreateSubscriptionOperator(task_id="c", topic=topic_name, subscription="by-time", initial_position=middle))
    assert backlog("by-time") == 3
    _run(PulsarCreateSubscriptionOperator(task_id="c", topic=topic_name, subscription="tail", initial_position="latest"))
    assert backlog("tail") == 0

    def reset(to: Any) -> None:
        _run(PulsarResetSubscriptionOperator(task_id="r", topic=topic_name, subscription="by-id", to=to))

    reset(ids[4])  # a MessageId
    assert backlog("by-id") == 2
    reset(int(middle.timestamp() * 1000))  # ms
    assert backlog("by-id") == 3
    reset("earliest")
    assert backlog("by-id") == 6
    reset(InitialPosition.Latest)
    assert backlog("by-id") == 0
    reset(middle.isoformat())
    assert backlog("by-id") == 3


def test_creating_twice_leaves_the_first(broker, broker_admin: PulsarAdmin, topic_name: str) -> None:
    assert _run(PulsarCreateTopicOperator(task_id="t", topic=topic_name, partitions=2))["created"] is True
    assert _run(PulsarCreateTopicOperator(task_id="t", topic=topic_name, partitions=2))["created"] is False
    with pytest.raises(ValueError, match=f"topic {topic_name} already exists with 2 partitions, not 0"):
        _run(PulsarCreateTopicOperator(task_id="t", topic=topic_name))
    _send(broker.service_url, topic_name, 4)
    created = _run(PulsarCreateSubscriptionOperator(task_id="c", topic=topic_name, subscription="s"))
    assert created == {"topic": topic_name, "subscription": "s", "created": True}
    again = _run(PulsarCreateSubscriptionOperator(task_id="c", topic=topic_name, subscription="s", initial_position="latest"))
    assert again["created"] is False
    assert broker_admin.backlog(topic_name, "s").msg_backlog == 4


def test_delete_refuses_a_missing_subscription_unless_missing_ok(broker_admin: PulsarAdmin, topic_name: str) -> None:
    _run(PulsarCreateTopicOperator(task_id="t", topic=topic_name))
    assert _run(PulsarDeleteSubscriptionOperator(task_id="d", topic=topic_name, subscription="none"))["deleted"] is False
    with pytest.raises(AdminNotFoundError):
        _run(PulsarDeleteSubscriptionOperator(task_id="d", topic=topic_name, subscription="none", missing_ok=False))


def test_a_message_id_on_a_partitioned_topic_must_name_its_partition(broker_admin: PulsarAdmin, topic_name: str) -> None:
    _run(PulsarCreateTopicOperator(task_id="t", topic=topic_name, partitions=2))
    with pytest.raises(ValueError, match="is partitioned: a message id must name its partition"):
        _run(PulsarCreateSubscriptionOperator(task_id="c", topic=topic_name, subscription="s", initial_position="5:0"))


def test_a_missing_subscription_error_names_create_subscription(broker_admin: PulsarAdmin, topic_name: str) -> None:
    _run(PulsarCreateTopicOperator(task_id="t", topic=topic_name))
    sensor = PulsarBacklogSensor(task_id="w", topic=topic_name, subscription="ux-sub", threshold=1)
    with pytest.raises(AirflowException) as raised:
        sensor.poke({})
    message = str(raised.value)
    assert message.startswith("Cannot watch the backlog: subscription 'ux-sub' not found on topic")
    assert message.endswith("; pass create_subscription=True to create it")
    # The trigger (a deferred sensor) says the same.
    trigger = PulsarBacklogTrigger(topic=topic_name, subscription="ux-sub", threshold=1, poll_interval=0.1)

    async def first() -> dict:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("no event")

    event = asyncio.run(first())
    assert event["status"] == "error" and event["message"].endswith("pass create_subscription=True to create it")


@pytest.mark.parametrize(
    ("operator", "arguments", "error"),
    [
        (PulsarCreateTopicOperator, {"topic": "bad topic name/x/y/z"}, "topic:"),
        (PulsarCreateTopicOperator, {"topic": "t", "partitions": -1}, "partitions must be an int >= 0"),
        (PulsarCreateTopicOperator, {"topic": "t", "pulsar_conn_id": ""}, "pulsar_conn_id must be a non-empty string"),
        (PulsarCreateSubscriptionOperator, {"topic": "t", "subscription": ""}, "subscription must be a non-empty string"),
        (
            PulsarCreateSubscriptionOperator,
            {"topic": "t", "subscription": "s", "initial_position": "sideways"},
            "initial_position must be 'earliest', 'latest', a message id",
        ),
        (PulsarCreateSubscriptionOperator, {"topic": "", "subscription": "s"}, "topic must be a non-empty topic name"),
        (PulsarResetSubscriptionOperator, {"topic": "t", "subscription": "s", "to": -5}, "to must be 'earliest'"),
        (PulsarResetSubscriptionOperator, {"topic": "t", "subscription": "s", "to": True}, "to must be 'earliest'"),
        (PulsarDeleteSubscriptionOperator, {"topic": "t", "subscription": "s", "force": "yes"}, "force must be a bool"),
        (PulsarDeleteSubscriptionOperator, {"topic": "t", "subscription": "s", "missing_ok": None}, "missing_ok must be a bool"),
        (
            PulsarBacklogSensor,
            {"topic": "t", "subscription": "s", "threshold": 1, "create_subscription": 1},
            "create_subscription must be a bool",
        ),
    ],
)
def test_bad_arguments_fail_at_parse_time_naming_them(operator: type, arguments: dict, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        operator(task_id="x", **arguments)


def test_templated_fields() -> None:
    create = PulsarCreateSubscriptionOperator(
        task_id="c", topic="{{ params.t }}", subscription="{{ params.s }}", initial_position="{{ params.at }}"
    )
    assert set(create.template_fields) == {"topic", "subscription", "pulsar_conn_id", "initial_position"}
    assert create.initial_position == "{{ params.at }}"
    reset = PulsarResetSubscriptionOperator(task_id="r", topic="t", subscription="s", to="{{ params.to }}")
    assert set(reset.template_fields) == {"topic", "subscription", "pulsar_conn_id", "to"}
    assert set(PulsarDeleteSubscriptionOperator.template_fields) == {"topic", "subscription", "pulsar_conn_id"}
    assert set(PulsarCreateTopicOperator.template_fields) == {"topic", "pulsar_conn_id"}


def test_position_spellings() -> None:
    import pulsar  # the official client, the interop oracle

    assert subscription_position("Earliest", "p") is InitialPosition.Earliest
    assert subscription_position(InitialPosition.Latest, "p") is InitialPosition.Latest  # not 0 ms
    assert subscription_position("7:3", "p") == MessageId(-1, 7, 3, -1)
    assert subscription_position("7:3:2:1", "p") == MessageId(2, 7, 3, 1)
    assert subscription_position(pulsar.MessageId(1, 7, 3, -1), "p") == MessageId(1, 7, 3, -1)
    assert subscription_position(1_700_000_000_000, "p") == 1_700_000_000_000
    assert subscription_position("1700000000000", "p") == 1_700_000_000_000
    naive = datetime(2024, 5, 1, 12, 0)
    assert subscription_position(naive, "p") == int(naive.replace(tzinfo=timezone.utc).timestamp() * 1000)
    assert subscription_position("2024-05-01T12:00:00+00:00", "p") == subscription_position(naive, "p")


SENSOR_DEFAULT = """
import json
from airflow_pulsar.sensors.backlog import PulsarBacklogSensor
print(json.dumps(PulsarBacklogSensor(task_id="w", topic="t", subscription="s", threshold=1).deferrable))
"""


@pytest.mark.parametrize(("configured", "expected"), [(None, False), ("True", True), ("False", False)])
def test_deferrable_defaults_to_airflows_default_deferrable(configured: str | None, expected: bool) -> None:
    env = {**os.environ, **AIRFLOW_ENV}
    env.pop("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", None)
    if configured is not None:
        env["AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE"] = configured
    result = subprocess.run([sys.executable, "-c", SENSOR_DEFAULT], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) is expected
