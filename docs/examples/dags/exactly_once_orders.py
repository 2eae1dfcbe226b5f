"""The exactly-once example of the docs (transactions.md): consume, transform and produce in one
transaction per batch, in a DAG; tests/airflow/test_transform_operator.py runs it on both brokers."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task

from airflow_pulsar.operators.produce import PulsarProduceOperator
from airflow_pulsar.operators.transform import PulsarTransformOperator

with DAG("exactly_once_orders", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    publish = PulsarProduceOperator(task_id="publish_orders", topic="orders-in", producer_function="my_project.orders.rows")

    # [START transform]
    @task
    def tax_rate() -> float:
        return 0.2  # looked up when the run starts

    enrich = PulsarTransformOperator(
        task_id="add_tax",
        input_topics="orders-in",
        subscription="tax",
        output_topic="orders-taxed",
        apply_function="my_project.orders.with_tax",  # called with each message
        apply_function_kwargs={"rate": tax_rate()},
        subscription_type="Failover",  # one acknowledgement per partition and batch
        max_batch_size=500,  # one transaction per batch
        transaction_timeout=5,  # a batch takes well under it; the task waits that long for more input
    )
    # [END transform]
    publish >> enrich

    # [START mapped]
    @task
    def region_topics() -> list[str]:
        return ["orders-eu", "orders-us"]

    PulsarTransformOperator.partial(
        task_id="tag_region",
        subscription="tagger",
        output_topic="orders-tagged",
        apply_function_batch="my_project.orders.with_region",  # called with each batch
        transaction_timeout=5,
    ).expand(input_topics=region_topics())
    # [END mapped]
