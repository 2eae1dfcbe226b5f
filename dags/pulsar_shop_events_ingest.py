"""Scheduled ingestion: wait for a backlog of shop events, load it into a table with Spark, report.

Every hour (and whenever run by hand):

1. ``ensure_subscription`` creates the topic and the ``lakehouse`` subscription (from the
   earliest message) on the first run, so the backlog counts every event ever produced;
2. ``wait_for_backlog``, a deferred ``PulsarBacklogSensor``, waits in the triggerer, holding no
   worker slot, until the ``lakehouse`` subscription of ``shop-events`` has at least 1000
   messages or its oldest message is an hour old;
3. ``ingest_events``, a ``PulsarToTableOperator``, submits a Spark job through the Spark provider
   that reads every partition's backlog with readers on the executors, decodes the JSON events
   into columns and writes them to the ``shop.events`` table (partitioned by ingest batch),
   then acknowledges each partition cumulatively, only after the table commit, so a crash at
   any point leaves every event in the table exactly once after the next run;
4. ``report`` prints the rows written per topic partition and the acknowledged ranges.

Without a ``spark_default`` connection the job runs on ``local[*]``; point that connection at a
``spark://`` master (or YARN, Kubernetes) to run it on a cluster unchanged. The table lives in a
Hive catalog whose warehouse and Derby metastore are under ``$AIRFLOW_PULSAR_EXAMPLES_DIR``
(default ``$AIRFLOW_HOME/pulsar-examples``) unless ``dag_run.conf`` names others.

The table is parquet unless ``$AIRFLOW_PULSAR_EXAMPLES_TABLE_FORMAT`` says ``delta`` or ``iceberg``
(an Iceberg table of Iceberg's session catalog over the same metastore). Their Spark integration
comes from the release the operator names for the Spark it runs (``--packages``), or from the
jars ``dag_run.conf["jars"]`` lists (``make demo FORMAT=...`` passes the checkout's).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_pulsar.examples.shop_events import EVENT_SCHEMA, TOPIC, ensure_topic, example_dir, example_table_format
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from airflow_pulsar.sensors.backlog import PulsarBacklogSensor

SUBSCRIPTION = "lakehouse"

with DAG(
    dag_id="pulsar_shop_events_ingest",
    description="Wait for a backlog of shop events, ingest it into a table with Spark, report",
    schedule=timedelta(hours=1),
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["pulsar", "spark", "example"],
    render_template_as_native_obj=True,
) as dag:
    @task
    def ensure_subscription() -> int:
        """Create ``shop-events`` and the ``lakehouse`` subscription unless they exist."""
        return ensure_topic((SUBSCRIPTION,))

    wait = PulsarBacklogSensor(
        task_id="wait_for_backlog",
        topic=TOPIC,
        subscription=SUBSCRIPTION,
        threshold=1000,
        max_message_age=timedelta(hours=1),
        poke_interval=10,
        timeout=timedelta(hours=2),
        deferrable=True,
    )
    # [START ingest]
    ingest = PulsarToTableOperator(
        task_id="ingest_events",
        topics=TOPIC,
        subscription=SUBSCRIPTION,
        table="shop.events",
        format=example_table_format(),
        jars="{{ dag_run.conf.get('jars') }}",
        value_format="json",
        value_schema=EVENT_SCHEMA,
        min_partitions=4,
        warehouse_dir="{{ dag_run.conf.get('warehouse_dir') or '" + str(example_dir() / "warehouse") + "' }}",
        metastore_dir="{{ dag_run.conf.get('metastore_dir') or '" + str(example_dir() / "metastore") + "' }}",
        conf={"spark.sql.shuffle.partitions": "4"},
    )
    # [END ingest]

    @task
    def report(summary: dict, backlog: dict) -> dict:
        """Print the backlog that started the run, then the rows per topic partition and the
        acknowledged ranges of each batch this run wrote (a batch an earlier run left unfinished
        first, then the new one)."""
        counted = "exact" if backlog["exact"] else "estimated"
        print(f"backlog when the sensor fired: {backlog['messages']} messages ({counted}, {backlog['entries']} entries)")
        batches = [b for b in (summary.get("settled"), summary) if b and b.get("batch_id")]
        if not batches:
            print("nothing to ingest: the backlog was empty when the job was planned")
        for batch in batches:
            print(f"batch {batch['batch_id']}: {batch['total_rows']} rows into {batch['table']}")
            for part in batch["ranges"]:
                print(f"  {part['topic']}: {part['rows']} rows, acknowledged after {part['after']} through {part['through']}")
        return summary

    ensure_subscription() >> wait >> ingest
    report(ingest.output, wait.output)
