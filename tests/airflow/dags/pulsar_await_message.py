"""The await-message sensor: the first message a function accepts, and a function that fails
(tests/airflow/test_await_message.py). Topic, subscription and the wanted order come from ``dag_run.conf``."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_pulsar.sensors.await_message import PulsarAwaitMessageSensor

WATCHED = {"topics": "{{ dag_run.conf['topic'] }}", "subscription": "{{ dag_run.conf['subscription'] }}"}

with DAG("pulsar_await_order", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    PulsarAwaitMessageSensor(
        task_id="await_order",
        apply_function="pulsar_test_functions.order_number",
        apply_function_kwargs={"wanted": "{{ dag_run.conf['wanted'] }}"},
        initial_position="Earliest",
        timeout=30,
        **WATCHED,
    )

with DAG("pulsar_await_failing", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    PulsarAwaitMessageSensor(
        task_id="await_order",
        apply_function="pulsar_test_functions.explode",
        initial_position="Earliest",
        timeout=30,
        **WATCHED,
    )
