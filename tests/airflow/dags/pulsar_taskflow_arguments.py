"""Templated arguments from TaskFlow outputs, dynamic task mapping and Jinja, and the Kafka-provider
parity features: a topic pattern, the end-of-operator acknowledgement, a delivery callback and the
await-message sensor's xcom_push_key (tests/airflow/test_taskflow_arguments.py).

Names come from ``dag_run.conf``: ``topic``, ``subscription``, ``prefix`` (of the mapped topics),
``count`` (messages per mapped topic), ``out`` (the consumer's output file) and ``conn`` (the
Pulsar connection id).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, get_current_context, task

from airflow_pulsar.operators.consume import PulsarConsumeOperator
from airflow_pulsar.operators.produce import PulsarProduceOperator
from airflow_pulsar.sensors.await_message import PulsarAwaitMessageSensor

START = {"schedule": None, "start_date": datetime(2024, 1, 1), "catchup": False}
OUT = {"out": "{{ dag_run.conf['out'] }}"}


def _conf() -> dict[str, Any]:
    return get_current_context()["dag_run"].conf


with DAG("pulsar_taskflow_topic", **START):

    @task
    def pick_topic() -> str:
        """The topic, as a TaskFlow output."""
        return _conf()["topic"]

    topic = pick_topic()
    (
        PulsarProduceOperator(
            task_id="produce",
            topic=topic,
            producer_function="pulsar_test_functions.numbered",
            producer_function_args=["4"],
            delivery_callback="pulsar_test_functions.note_delivery",
            pulsar_conn_id="{{ dag_run.conf['conn'] }}",
        )
        >> PulsarAwaitMessageSensor(
            task_id="await",
            topics=topic,
            subscription="{{ dag_run.conf['subscription'] }}-await",
            initial_position="Earliest",
            acknowledge=False,
            xcom_push_key="matched",
            pulsar_conn_id="{{ dag_run.conf['conn'] }}",
            timeout=30,
        )
        >> PulsarConsumeOperator(
            task_id="consume",
            topics=[topic],
            subscription="{{ dag_run.conf['subscription'] }}",
            apply_function="pulsar_test_functions.record",
            apply_function_kwargs=OUT,
            pulsar_conn_id="{{ dag_run.conf['conn'] }}",
            poll_timeout=0.5,
        )
    )

with DAG("pulsar_mapped_topics_pattern", **START):

    @task
    def mapped_topics() -> list[str]:
        """Two topics named after the run's prefix, for .expand()."""
        prefix = _conf()["prefix"]
        return [f"persistent://public/default/{prefix}-a", f"persistent://public/default/{prefix}-b"]

    pattern = "persistent://public/default/{{ dag_run.conf['prefix'] }}-.*"
    (
        PulsarProduceOperator.partial(
            task_id="produce",
            producer_function="pulsar_test_functions.numbered",
            producer_function_args=["{{ dag_run.conf['count'] }}"],
        ).expand(topic=mapped_topics())
        >> PulsarAwaitMessageSensor(
            task_id="await",
            topics_pattern=pattern,
            subscription="{{ dag_run.conf['subscription'] }}-await",
            initial_position="Earliest",
            acknowledge=False,
            timeout=30,
        )
        >> PulsarConsumeOperator(
            task_id="consume",
            topics_pattern=pattern,
            subscription="{{ dag_run.conf['subscription'] }}",
            apply_function_batch="pulsar_test_functions.record_batch",
            apply_function_kwargs=OUT,
            ack="end_of_operator",
            max_batch_size=2,
            poll_timeout=0.5,
        )
    )

with DAG("pulsar_end_of_operator_failing", **START):
    PulsarProduceOperator(
        task_id="produce",
        topic="{{ dag_run.conf['topic'] }}",
        producer_function="pulsar_test_functions.numbered",
        producer_function_args=["10"],
    ) >> PulsarConsumeOperator(
        task_id="consume",
        topics="{{ dag_run.conf['topic'] }}",
        subscription="{{ dag_run.conf['subscription'] }}",
        apply_function="pulsar_test_functions.record_until",
        apply_function_kwargs={**OUT, "bad": "m5"},
        ack="end_of_operator",
        max_batch_size=4,
        poll_timeout=0.5,
    )

with DAG("pulsar_bad_rendered_topic", **START):
    PulsarProduceOperator(
        task_id="produce",
        topic="{{ dag_run.conf['topic'] }}",
        producer_function="pulsar_test_functions.numbered",
        producer_function_args=["1"],
    )
