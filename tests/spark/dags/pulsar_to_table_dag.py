"""Ingest a topic into a table, as a DAG: the run's conf names the topic and the catalog dirs."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task

from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from tests.support.spark_ingest import LOCAL_SPARK_CONF, VALUE_SCHEMA

with DAG("pulsar_to_table", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False) as dag:
    ingest = PulsarToTableOperator(
        task_id="ingest",
        topics="{{ dag_run.conf['topic'] }}",
        subscription="dag-ingest",
        table="dag_events",
        value_format="json",
        value_schema=VALUE_SCHEMA,
        max_messages=1_000,
        warehouse_dir="{{ dag_run.conf['warehouse'] }}",
        metastore_dir="{{ dag_run.conf['metastore'] }}",
        conf=LOCAL_SPARK_CONF,
    )

    @task
    def report(summary: dict) -> str:
        """What a downstream task sees of the ingest: its XCom."""
        return f"{summary['total_rows']} rows in batch {summary['batch_id']}"

    report(ingest.output)
