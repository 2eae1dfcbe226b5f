"""Ingest a topic into a Delta or an Iceberg table, as DAGs ``pulsar_to_delta`` and
``pulsar_to_iceberg``: the run's conf names the topic, the table, the Iceberg catalog's warehouse,
the format's jars and the Hive catalog dirs."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from lakehouse_tables import SMALL_TABLES
from spark_helpers import LOCAL_SPARK_CONF, VALUE_SCHEMA

# One Iceberg catalog, ``lake``, of the Hadoop type; Delta tables are locations.
CATALOGS = {"delta": None, "iceberg": {"type": "hadoop", "warehouse": "{{ dag_run.conf['lake'] }}"}}

for table_format, table_catalog in CATALOGS.items():
    with DAG(f"pulsar_to_{table_format}", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False):
        PulsarToTableOperator(
            task_id="ingest",
            topics="{{ dag_run.conf['topic'] }}",
            subscription="{{ dag_run.conf['subscription'] }}",
            table="{{ dag_run.conf['table'] }}",
            format=table_format,
            table_catalog=table_catalog,
            jars="{{ dag_run.conf['jars'] }}",
            value_format="json",
            value_schema=VALUE_SCHEMA,
            min_partitions=2,
            warehouse_dir="{{ dag_run.conf['warehouse'] }}",
            metastore_dir="{{ dag_run.conf['metastore'] }}",
            conf={**LOCAL_SPARK_CONF, **SMALL_TABLES},
        )
