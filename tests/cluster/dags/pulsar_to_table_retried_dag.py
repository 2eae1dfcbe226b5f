"""Ingest a topic's whole backlog into a table, as a DAG whose ingest task is retried: the run's conf
names the topic and the catalog dirs. A task that fails (a broker lost under it) runs again and
settles the batch it left unfinished."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from tests.support.spark_ingest import LOCAL_SPARK_CONF, VALUE_SCHEMA

with DAG(
    "pulsar_to_table_retried",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=2)},
) as dag:
    PulsarToTableOperator(
        task_id="ingest",
        topics="{{ dag_run.conf['topic'] }}",
        subscription="dag-ingest",
        table="dag_events",
        value_format="json",
        value_schema=VALUE_SCHEMA,
        # Twice as many ranges as a local Spark has cores: the partitions are read a few at a time.
        min_partitions=8,
        read_timeout_seconds=60,
        warehouse_dir="{{ dag_run.conf['warehouse'] }}",
        metastore_dir="{{ dag_run.conf['metastore'] }}",
        conf=LOCAL_SPARK_CONF,
    )
