"""One ingest of the topic and subscription of the run's conf into the parquet table
``shop.orders`` (Spark on local[*]): its plan log and its task are what the Pulsar page lists and
links for the table's batches."""

from __future__ import annotations

import pendulum
from airflow.sdk import dag

from airflow_pulsar.examples.shop_events import example_dir
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator


@dag(dag_id="ingest_orders", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def ingest_orders() -> None:
    PulsarToTableOperator(
        task_id="ingest",
        topics="{{ dag_run.conf['topic'] }}",
        subscription="{{ dag_run.conf['subscription'] }}",
        table="shop.orders",
        warehouse_dir=str(example_dir() / "warehouse"),
        metastore_dir=str(example_dir() / "metastore"),
        conf={"spark.sql.shuffle.partitions": "2"},
    )


ingest_orders()
