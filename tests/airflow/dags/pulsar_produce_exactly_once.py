"""Produce tasks for the exactly-once tests (tests/airflow/test_produce_exactly_once.py).

Default producer settings everywhere; the topic, message count and the functions' marker file come
from ``dag_run.conf``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_pulsar.operators.produce import PulsarProduceOperator

TOPIC = "{{ dag_run.conf['topic'] }}"
COUNT = "{{ dag_run.conf['count'] }}"
MARKER = "{{ dag_run.conf['marker'] }}"

with DAG("pulsar_produce_default", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    PulsarProduceOperator(
        task_id="produce", topic=TOPIC, producer_function="pulsar_test_functions.positions", producer_function_args=[COUNT]
    )

# Run in a child process and killed there once the marker file appears, then run again.
with DAG("pulsar_produce_killed", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    PulsarProduceOperator(
        task_id="produce",
        topic=TOPIC,
        producer_function="pulsar_test_functions.positions",
        producer_function_kwargs={"count": COUNT, "marker": MARKER, "slow_after": "{{ dag_run.conf['slow_after'] }}"},
    )

# The first try fails part-way; Airflow retries it at once.
with DAG("pulsar_produce_retried", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    PulsarProduceOperator(
        task_id="produce",
        topic=TOPIC,
        producer_function="pulsar_test_functions.failing_once",
        producer_function_kwargs={"count": COUNT, "marker": MARKER, "fail_after": "{{ dag_run.conf['fail_after'] }}"},
        retries=1,
        retry_delay=timedelta(0),
    )

# A message too big to send in the middle of the output.
with DAG("pulsar_produce_too_big", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    PulsarProduceOperator(
        task_id="produce",
        topic=TOPIC,
        producer_function="pulsar_test_functions.with_oversized",
        producer_function_args=[COUNT, "{{ dag_run.conf['at'] }}"],
    )
