"""Templated arguments in real DAG runs (dag.test()) against the broker: TaskFlow outputs, .expand()
and Jinja feed the templated fields, a bad rendered value fails the task with the parse-time
message, a bad static one fails the DAG file's parse; and the Kafka-provider parity features: a
topic pattern, ack="end_of_operator", the produce operator's delivery callback and the
await-message sensor's xcom_push_key.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.client import Client, ConsumerType, InitialPosition, exceptions
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.consume import PulsarConsumeOperator
from airflow_pulsar.operators.produce import PulsarProduceOperator
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from airflow_pulsar.sensors.await_message import PulsarAwaitMessageSensor
from airflow_pulsar.sensors.backlog import PulsarBacklogSensor
from tests.support.dag_runs import run_dag


def _xcom(dag_id: str, run_id: str, task_id: str, key: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        (row,) = session.scalars(XComModel.get_many(run_id=run_id, key=key, dag_ids=dag_id, task_ids=task_id))
        return XComModel.deserialize_value(row)


def _deliveries() -> list[tuple[str, str]]:
    """What the delivery callback noted, in the module the task imported (Airflow's plugin loading
    may have replaced the one this test module saw)."""
    return importlib.import_module("pulsar_test_functions").DELIVERIES


def _drain(service_url: str, topic: str, subscription: str) -> list[str]:
    """Every value left in the subscription, acknowledged as read."""
    values = []
    with Client(service_url) as client:
        consumer = client.subscribe(topic, subscription, consumer_type=ConsumerType.Shared)
        while True:
            try:
                message = consumer.receive(timeout_millis=1000)
            except exceptions.Timeout:
                return values
            values.append(message.data().decode())
            consumer.acknowledge(message)


def test_taskflow_output_feeds_the_topic_and_jinja_the_connection(
    broker_admin: PulsarAdmin, topic_name: str, tmp_path: Path
) -> None:
    _deliveries().clear()
    out = tmp_path / "consumed.txt"
    conf = {"topic": topic_name, "subscription": "sub", "out": str(out), "conn": "pulsar_default"}
    result = run_dag("pulsar_taskflow_topic", **conf)

    assert result.state == "success", result.states
    assert result.xcoms["pick_topic"] == topic_name
    assert result.xcoms["produce"]["topic"] == topic_name and result.xcoms["produce"]["messages"] == 4
    assert out.read_text().split() == ["m0", "m1", "m2", "m3"]
    # The delivery callback saw every receipt: Ok, and the ids the broker gave, in order.
    assert [name for name, _ in _deliveries()] == ["Ok"] * 4
    ids = [message_id for _, message_id in _deliveries()]
    assert ids[-1] == result.xcoms["produce"]["last_message_id"] and len(set(ids)) == 4
    # The sensor returned its match and pushed it under xcom_push_key too.
    matched = result.xcoms["await"]
    assert matched["message"]["value"] == "m0" and matched["message"]["topic"] == f"persistent://public/default/{topic_name}"
    assert _xcom("pulsar_taskflow_topic", result.run_id, "await", "matched") == matched


def test_expand_over_topics_and_a_topic_pattern(broker, broker_admin: PulsarAdmin, tmp_path: Path, request) -> None:
    prefix = re.sub(r"\W", "-", request.node.name)[:40] + f"-{tmp_path.name[-6:]}"
    out = tmp_path / "consumed.txt"
    result = run_dag("pulsar_mapped_topics_pattern", prefix=prefix, subscription="sub", count="3", out=str(out))

    assert result.state == "success", result.states
    topics = [f"persistent://public/default/{prefix}-{suffix}" for suffix in "ab"]
    # Two mapped produce tasks, one per topic (run_dag keeps one XCom per task id: check the topics).
    for topic in topics:
        assert broker_admin.topic_stats(topic)["msgInCounter"] > 0
    consumed = result.xcoms["consume"]
    assert consumed["topics_pattern"] == f"persistent://public/default/{prefix}-.*"
    assert (consumed["ack"], consumed["messages"], consumed["acknowledged"]) == ("end_of_operator", 6, 6)
    assert sorted(out.read_text().split()) == sorted(["m0", "m1", "m2"] * 2)
    assert result.xcoms["await"]["message"]["topic"] in topics
    for topic in topics:
        assert broker_admin.message_backlog(topic, "sub").messages == 0


def test_end_of_operator_leaves_every_message_when_a_batch_fails(
    broker, broker_admin: PulsarAdmin, topic_name: str, tmp_path: Path
) -> None:
    out = tmp_path / "consumed.txt"
    result = run_dag("pulsar_end_of_operator_failing", topic=topic_name, subscription="sub", out=str(out))

    assert result.states == {"produce": "success", "consume": "failed"}
    assert out.read_text().split() == [f"m{i}" for i in range(5)]  # the first batch succeeded
    # Nothing was acknowledged, the first batch's messages included: all ten come back.
    assert sorted(_drain(broker.service_url, topic_name, "sub")) == sorted(f"m{i}" for i in range(10))


def test_a_bad_rendered_value_fails_the_task_with_the_parse_time_message(
    broker_admin: PulsarAdmin, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_dag("pulsar_bad_rendered_topic", topic="persistent://public/default")
    assert result.states == {"produce": "failed"}
    with pytest.raises(ValueError) as at_parse:
        PulsarProduceOperator(task_id="p", topic="persistent://public/default", producer_function="pkg.fn")
    assert str(at_parse.value).startswith("topic: ")
    task_log = "".join(capfd.readouterr())
    assert f"ValueError: {at_parse.value}" in task_log


def test_a_bad_static_value_fails_the_dag_file_parse(tmp_path: Path) -> None:
    from airflow.dag_processing.dagbag import DagBag

    (tmp_path / "bad_topic_dag.py").write_text(
        "from datetime import datetime\n"
        "from airflow.sdk import DAG\n"
        "from airflow_pulsar.operators.produce import PulsarProduceOperator\n"
        "with DAG('bad_topic', schedule=None, start_date=datetime(2024, 1, 1)):\n"
        "    PulsarProduceOperator(task_id='p', topic='', producer_function='pkg.fn')\n"
    )
    bag = DagBag(dag_folder=tmp_path)
    (error,) = bag.import_errors.values()
    assert "ValueError: topic must be a non-empty topic name, got ''" in error


def test_templated_values_are_kept_until_rendered() -> None:
    from airflow.sdk import DAG, task

    with DAG("kept", schedule=None):

        @task
        def name() -> str:
            return "t"

        value = name()
        producer = PulsarProduceOperator(task_id="p", topic=value, producer_function="pkg.fn", pulsar_conn_id="{{ c }}")
        consumer = PulsarConsumeOperator(
            task_id="c", topics=["{{ t }}", value], subscription=value, apply_function=print, apply_function_args=value
        )
        sensor = PulsarBacklogSensor(task_id="b", topic="{{ t }}", subscription=value, threshold=1, pulsar_conn_id=value)
    # The TaskFlow outputs stay XComArgs, so Airflow sees the dependencies and resolves them.
    assert producer.upstream_task_ids == {"name"} == sensor.upstream_task_ids
    assert consumer.topics[0] == "{{ t }}" and type(consumer.subscription).__name__ == "PlainXComArg"
    assert producer.pulsar_conn_id == "{{ c }}"
    for operator in (producer, consumer, sensor):
        assert "pulsar_conn_id" in operator.template_fields
    assert "pulsar_conn_id" in PulsarAwaitMessageSensor.template_fields
    assert "pulsar_conn_id" in PulsarToTableOperator.template_fields


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"topics": "persistent://public/default"}, "topics: "),
        ({"topics": []}, "topics must be a topic name or a non-empty list"),
        ({"subscription": ""}, "subscription must be a non-empty string"),
        ({"table": "bad-table"}, "table must be 'name', 'database.name'"),
        ({"plan_topic": "a/b"}, "plan_topic: "),
        ({"initial_position": "middle"}, "initial_position must be one of Latest, Earliest"),
        ({"pulsar_conn_id": ""}, "pulsar_conn_id must be a non-empty string"),
    ],
)
def test_pulsar_to_table_checks_names_at_parse_time(arguments: dict, error: str) -> None:
    given = {"topics": "t", "subscription": "s", "table": "db.events", **arguments}
    with pytest.raises(ValueError, match=re.escape(error)):
        PulsarToTableOperator(task_id="ingest", **given)


@pytest.mark.parametrize("position", ["earliest", "Earliest", "LATEST", InitialPosition.Latest, 0])
def test_pulsar_to_table_takes_the_initial_position_spellings_of_the_other_operators(position: Any) -> None:
    operator = PulsarToTableOperator(task_id="ingest", topics="t", subscription="s", table="events", initial_position=position)
    consumer = PulsarConsumeOperator(task_id="c", topics="t", subscription="s", apply_function=print, initial_position=position)
    assert operator.initial_position is consumer.initial_position


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"topics": None}, "give exactly one of topics"),
        ({"topics_pattern": "persistent://public/default/x.*"}, "give exactly one of topics"),
        ({"topics": re.compile("persistent://public/default/x.*"), "topics_pattern": "x"}, "not both"),
        ({"topics": None, "topics_pattern": "orders-.*"}, "spells out its tenant and namespace"),
        ({"topics": None, "topics_pattern": "public/default/(unclosed"}, "is not a valid regular expression"),
        ({"ack": "eventually"}, "ack must be one of individual, cumulative, end_of_operator, never"),
    ],
)
def test_consume_topic_source_and_ack_are_checked(arguments: dict, error: str) -> None:
    given = {"topics": "t", "subscription": "s", "apply_function": print, **arguments}
    with pytest.raises(ValueError, match=re.escape(error)):
        PulsarConsumeOperator(task_id="c", **given)


def test_a_re_pattern_is_taken_as_topics_pattern() -> None:
    pattern = re.compile(r"persistent://public/default/orders-\d+")
    consumer = PulsarConsumeOperator(task_id="c", topics=pattern, subscription="s", apply_function=print)
    sensor = PulsarAwaitMessageSensor(task_id="a", topics=pattern, subscription="s")
    assert consumer.topics == [] == sensor.topics
    assert consumer.topics_pattern == pattern.pattern == sensor.topics_pattern
    classpath, kwargs = sensor._trigger(deadline=None).serialize()  # type: ignore[arg-type]
    assert (kwargs["topics"], kwargs["topics_pattern"]) == (None, pattern.pattern)
    with pytest.raises(ValueError, match="xcom_push_key must be a non-empty string"):
        PulsarAwaitMessageSensor(task_id="a", topics="t", subscription="s", xcom_push_key="")
    with pytest.raises(ValueError, match="delivery_callback must be a callable or a dotted path"):
        PulsarProduceOperator(task_id="p", topic="t", producer_function="pkg.fn", delivery_callback="not a path")
