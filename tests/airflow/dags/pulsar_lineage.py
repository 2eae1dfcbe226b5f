"""Produce to a topic, then consume it and ingest it into a table: the lineage the OpenLineage
provider reports of each task (tests/airflow/test_lineage.py). ``dag_run.conf`` names the topic,
the message count, the consumer's output file and the Spark catalog's directories."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_pulsar.operators.consume import PulsarConsumeOperator
from airflow_pulsar.operators.produce import PulsarProduceOperator
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator

TOPIC = "{{ dag_run.conf['topic'] }}"

with DAG("pulsar_lineage", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    produce = PulsarProduceOperator(
        task_id="produce",
        topic=TOPIC,
        producer_function="pulsar_test_functions.numbered",
        producer_function_args=["{{ dag_run.conf['count'] }}"],
    )
    consume = PulsarConsumeOperator(
        task_id="consume",
        topics=[TOPIC],
        subscription="lineage-consume",
        apply_function="pulsar_test_functions.record",
        apply_function_kwargs={"out": "{{ dag_run.conf['out'] }}"},
        poll_timeout=0.5,
    )
    ingest = PulsarToTableOperator(
        task_id="ingest",
        topics=TOPIC,
        subscription="lineage-ingest",
        table="lineage.orders",
        value_format="string",
        warehouse_dir="{{ dag_run.conf['warehouse'] }}",
        metastore_dir="{{ dag_run.conf['metastore'] }}",
        conf={"spark.ui.enabled": "false", "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"},
    )
    produce >> [consume, ingest]
