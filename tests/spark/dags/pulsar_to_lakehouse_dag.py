"""Ingest a topic into a Delta or an Iceberg table, as DAGs ``pulsar_to_delta`` and
``pulsar_to_iceberg``: the run's conf names the topic, the table, the Iceberg catalog's warehouse,
the format's jars and the Hive catalog dirs. ``pulsar_to_delta`` names no jars: it takes the
operator's default packages, which spark-submit resolves from Maven Central into the checkout's
cache (``IVY_CACHE``); ``pulsar_to_iceberg`` takes the jars `make` resolves (the run's conf)."""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import DAG

from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from jvm.lakehouse_jars import IVY_CACHE
from tests.support.lakehouse_tables import SMALL_TABLES
from tests.support.spark_ingest import LOCAL_SPARK_CONF, VALUE_SCHEMA

# One Iceberg catalog, ``lake``, of the Hadoop type; Delta tables are locations.
LAKE = {"type": "hadoop", "warehouse": "{{ dag_run.conf['lake'] }}"}


def ingest_dag(dag_id: str, table_format: str, table_catalog: dict[str, str] | None, **spark: Any) -> None:
    """A DAG of one ingest of JSON messages into a ``table_format`` table, its Spark arguments ``spark``."""
    with DAG(dag_id, schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False):
        PulsarToTableOperator(
            task_id="ingest",
            topics="{{ dag_run.conf['topic'] }}",
            subscription="{{ dag_run.conf['subscription'] }}",
            table="{{ dag_run.conf['table'] }}",
            format=table_format,
            table_catalog=table_catalog,
            value_format="json",
            value_schema=VALUE_SCHEMA,
            min_partitions=2,
            warehouse_dir="{{ dag_run.conf['warehouse'] }}",
            metastore_dir="{{ dag_run.conf['metastore'] }}",
            **spark,
        )


ingest_dag("pulsar_to_iceberg", "iceberg", LAKE, jars="{{ dag_run.conf['jars'] }}", conf={**LOCAL_SPARK_CONF, **SMALL_TABLES})
ingest_dag("pulsar_to_delta", "delta", None, conf={**LOCAL_SPARK_CONF, **SMALL_TABLES, "spark.jars.ivy": str(IVY_CACHE)})
