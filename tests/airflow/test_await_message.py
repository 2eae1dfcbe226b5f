"""The await-message sensor in real DAG runs: it defers, and dag.test() runs its trigger in this process."""

from __future__ import annotations

import threading

import pendulum
import pytest

from airflow_pulsar.client import Client, ConsumerType, exceptions
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.sensors.await_message import PulsarAwaitMessageSensor
from tests.support.dag_runs import run_dag, subscription_stats

SUBSCRIPTION = "order-watch"


def _send_orders(service_url: str, topic: str, numbers: range) -> None:
    # One entry per message: the backlog then shows each acknowledgement (a batch acknowledged in
    # part counts whole over admin REST).
    with Client(service_url) as client:
        producer = client.create_producer(topic, batching_enabled=False)
        for number in numbers:
            producer.send_async(f"order-{number}".encode(), None, partition_key=f"customer-{number % 3}")
        producer.flush()


def test_returns_the_first_message_the_function_accepts(broker, broker_admin: PulsarAdmin, topic_name: str) -> None:
    _send_orders(broker.service_url, topic_name, range(10))

    result = run_dag("pulsar_await_order", topic=topic_name, subscription=SUBSCRIPTION, wanted="6")

    assert result.state == "success", result.states
    matched = result.xcoms["await_order"]
    assert matched["result"] == {"order": 6, "key": "customer-0"}
    message = matched["message"]
    assert message["value"] == "order-6" and message["key"] == "customer-0"
    assert message["topic"] == f"persistent://public/default/{topic_name}"
    assert message["redelivery_count"] == 0 and message["publish_timestamp"] > 0
    # The publish time also as ISO 8601 UTC text that pendulum reads back to the same millisecond.
    published = pendulum.parse(message["publish_time"])
    assert published.offset == 0 and round(published.timestamp() * 1000) == message["publish_timestamp"]
    assert message["event_time"] is None and message["event_timestamp"] is None
    # Every message examined, up to and including the match, was acknowledged; the rest wait.
    stats = subscription_stats(broker_admin, topic_name, SUBSCRIPTION)
    assert stats["msgBacklog"] == 3 and stats["consumers"] == []


def test_a_failing_function_fails_the_sensor_and_leaves_the_message(
    broker, broker_admin: PulsarAdmin, topic_name: str
) -> None:
    _send_orders(broker.service_url, topic_name, range(2))

    result = run_dag("pulsar_await_failing", topic=topic_name, subscription=SUBSCRIPTION)

    assert result.states == {"await_order": "failed"}
    assert subscription_stats(broker_admin, topic_name, SUBSCRIPTION)["msgBacklog"] == 2
    with Client(broker.service_url) as client:
        consumer = client.subscribe(topic_name, SUBSCRIPTION, consumer_type=ConsumerType.Shared)
        assert consumer.receive(timeout_millis=5000).data() == b"order-0"
        consumer.receive(timeout_millis=5000)
        with pytest.raises(exceptions.Timeout):
            consumer.receive(timeout_millis=200)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"apply_function": print}, "apply_function must be a dotted path"),
        ({"apply_function": "nodots"}, "apply_function must be a dotted path"),
        ({"topics": []}, "topics must be a topic name or a non-empty list"),
        ({"topics": None}, "give exactly one of topics"),
        ({"subscription_type": "Everyone"}, "subscription_type must be one of"),
        ({"initial_position": 7}, "initial_position must be one of Latest, Earliest"),
        ({"acknowledge": "no"}, "acknowledge must be a bool"),
        ({"apply_function_kwargs": [1]}, "apply_function_kwargs must be a dict"),
    ],
)
def test_sensor_rejects_bad_arguments(arguments: dict, error: str) -> None:
    given = {"topics": "t", "subscription": "s", "apply_function": "pkg.match", **arguments}
    with pytest.raises(ValueError, match=error):
        PulsarAwaitMessageSensor(task_id="await", **given)


def test_sensor_templated_fields() -> None:
    assert set(PulsarAwaitMessageSensor.template_fields) == {
        "topics",
        "subscription",
        "apply_function_args",
        "apply_function_kwargs",
        "topics_pattern",
        "pulsar_conn_id",
    }


@pytest.fixture
def deferrals(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The keyword arguments of every ``defer`` call the sensor makes (it still defers)."""
    deferred: list[dict] = []
    defer = PulsarAwaitMessageSensor.defer

    def recording_defer(self: PulsarAwaitMessageSensor, **kwargs: object) -> None:
        deferred.append(kwargs)
        defer(self, **kwargs)

    monkeypatch.setattr(PulsarAwaitMessageSensor, "defer", recording_defer)
    return deferred


def test_a_matching_message_already_there_finishes_without_deferring(
    broker, broker_admin: PulsarAdmin, topic_name: str, deferrals: list[dict]
) -> None:
    _send_orders(broker.service_url, topic_name, range(10))

    result = run_dag("pulsar_await_order", topic=topic_name, subscription=SUBSCRIPTION, wanted="6")

    assert result.state == "success", result.states
    assert deferrals == []
    assert result.xcoms["await_order"]["result"] == {"order": 6, "key": "customer-0"}
    assert subscription_stats(broker_admin, topic_name, SUBSCRIPTION)["msgBacklog"] == 3


def test_defers_while_no_message_matches_and_fires_on_the_one_that_does(
    broker, broker_admin: PulsarAdmin, topic_name: str, deferrals: list[dict]
) -> None:
    _send_orders(broker.service_url, topic_name, range(3))
    # Order 6 arrives only after the sensor has looked at what was there and deferred.
    later = threading.Timer(4.0, _send_orders, (broker.service_url, topic_name, range(3, 10)))
    later.start()
    try:
        result = run_dag("pulsar_await_order", topic=topic_name, subscription=SUBSCRIPTION, wanted="6")
    finally:
        later.join()

    assert result.state == "success", result.states
    assert len(deferrals) == 1
    assert result.xcoms["await_order"]["result"] == {"order": 6, "key": "customer-0"}


def test_a_function_the_triggerer_cannot_import_is_refused_at_parse_time(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_pulsar.triggers.message_event import PulsarMessageEventTrigger

    (tmp_path / "next_to_the_dags.py").write_text("def match(message):\n    return True\n")
    # The import path of the dag-processor and the workers, which put the DAGs folder on it (for this test only).
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(tmp_path))
    source = {"topics": "t", "subscription": "s", "apply_function": "next_to_the_dags.match"}
    for build in (lambda: PulsarAwaitMessageSensor(task_id="await", **source), lambda: PulsarMessageEventTrigger(**source)):
        with pytest.raises(ValueError, match=r"is defined in the DAGs folder .*plugins folder"):
            build()
    with pytest.raises(ValueError, match="no module named 'not_installed' can be imported"):
        PulsarAwaitMessageSensor(task_id="await", **{**source, "apply_function": "not_installed.match"})
