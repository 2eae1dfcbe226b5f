"""Transform tasks for tests/airflow/test_transform_operator.py: topics, subscription and the hold
point come from ``dag_run.conf``; a transaction timeout of 10 s, short, so that a test waits little
for the coordinator to abort what a killed task left open."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_pulsar.operators.transform import PulsarTransformOperator

TRANSACTION_TIMEOUT = 10.0

# Per message; run in a child process that is killed while the function holds mid-batch, then again;
# or failing at one message.
with DAG("pulsar_transform", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    PulsarTransformOperator(
        task_id="transform",
        input_topics="{{ dag_run.conf['input'] }}",
        subscription="{{ dag_run.conf['subscription'] }}",
        output_topic="{{ dag_run.conf['output'] }}",
        apply_function="pulsar_transform_functions.upper",
        apply_function_kwargs={
            "hold_at": "{{ dag_run.conf.get('hold_at', '') }}",
            "marker": "{{ dag_run.conf.get('marker', '') }}",
            "fail_at": "{{ dag_run.conf.get('fail_at', '') }}",
        },
        max_batch_size=10,
        transaction_timeout=TRANSACTION_TIMEOUT,
    )

# Mapped over the input topics an upstream TaskFlow task returns, a batch function, Failover
# (cumulative acknowledgements).
with DAG("pulsar_transform_mapped", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):

    @task
    def input_topics(**context: object) -> list[str]:
        return list(context["dag_run"].conf["inputs"])  # type: ignore[attr-defined]

    PulsarTransformOperator.partial(
        task_id="transform",
        subscription="{{ dag_run.conf['subscription'] }}",
        output_topic="{{ dag_run.conf['output'] }}",
        apply_function_batch="pulsar_transform_functions.upper_batch",
        apply_function_kwargs={"suffix": "!"},
        subscription_type="Failover",
        transaction_timeout=TRANSACTION_TIMEOUT,
    ).expand(input_topics=input_topics())
