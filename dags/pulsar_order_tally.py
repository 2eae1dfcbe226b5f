"""Consume shop events and keep a per-country revenue tally, acknowledging what was processed.

The ``order-tally`` subscription (Failover: one consumer at a time reads each partition, so a
second run waits its turn instead of splitting orders) takes up to 5 000 messages per run in
batches of 500. Each batch goes to ``airflow_pulsar.examples.shop_events.tally_orders``, which
commits the batch's orders to a SQLite table in one transaction; the batch is then acknowledged
cumulatively. If the
function raises, the batch is negatively acknowledged, Pulsar redelivers it, and the task fails.
The database path is ``dag_run.conf["database"]`` or ``orders.db`` under
``$AIRFLOW_PULSAR_EXAMPLES_DIR`` (default ``$AIRFLOW_HOME/pulsar-examples``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_pulsar.examples.shop_events import TOPIC
from airflow_pulsar.operators.consume import PulsarConsumeOperator

with DAG(
    dag_id="pulsar_order_tally",
    description="Tally orders from Pulsar into a revenue table, with acknowledgements",
    schedule=timedelta(minutes=15),
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["pulsar", "example"],
) as dag:
    tally = PulsarConsumeOperator(
        task_id="tally_orders",
        topics=TOPIC,
        subscription="order-tally",
        subscription_type="Failover",
        ack="cumulative",
        apply_function_batch="airflow_pulsar.examples.shop_events.tally_orders",
        apply_function_kwargs={"database": "{{ dag_run.conf.get('database') or '' }}"},
        max_messages=5000,
        max_batch_size=500,
        poll_timeout=5,
    )

    @task
    def report(summary: dict) -> dict:
        """Log what the run consumed and acknowledged."""
        print(f"consumed {summary['messages']} messages in {summary['batches']} batches, acknowledged {summary['acknowledged']}")
        return summary

    report(tally.output)
