"""Generate a web shop's events on a schedule and publish them to Pulsar, with alerts for large orders.

Every ten minutes the DAG makes sure the 4-partition topic ``shop-events`` exists, then publishes
a thousand generated events (page views, carts, orders; JSON, keyed by user so each user's events
keep their order, with an ``event_type`` property) with batching and LZ4. A second task publishes
an alert to ``shop-alerts`` for each order of those events at or above 500 EUR, which the
asset-driven example watches: both tasks generate from the same seed (the run id, unless
``dag_run.conf`` sets ``seed``) and the same time (the run's ``run_after``), so the alerts are
exactly the large orders of the events published. ``dag_run.conf`` may also set ``count``.

It runs against the embedded broker (``airflow-pulsar standalone``) through the
``pulsar_default`` connection, or any Pulsar cluster that connection names.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_pulsar.examples import shop_events
from airflow_pulsar.examples.shop_events import ALERTS_TOPIC, TOPIC
from airflow_pulsar.operators.produce import PulsarProduceOperator

EVENT_ARGS = {
    "count": "{{ dag_run.conf.get('count', 1000) }}",
    "seed": "{{ dag_run.conf.get('seed', dag_run.run_id) }}",
    "at_ms": "{{ (dag_run.run_after.timestamp() * 1000) | int }}",
}

with DAG(
    dag_id="pulsar_shop_events_producer",
    description="Publish generated shop events to Pulsar every ten minutes",
    schedule=timedelta(minutes=10),
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["pulsar", "example"],
    render_template_as_native_obj=True,
) as dag:

    @task
    def ensure_topic() -> int:
        """Create ``shop-events`` with its partitions if it does not exist yet; return the partition count."""
        return shop_events.ensure_topic()

    publish = PulsarProduceOperator(
        task_id="publish_events",
        topic=TOPIC,
        producer_function="airflow_pulsar.examples.shop_events.generate",
        producer_function_kwargs=EVENT_ARGS,
        producer_settings={"compression_type": "LZ4", "batching_max_publish_delay_ms": 10},
    )
    alerts = PulsarProduceOperator(
        task_id="publish_large_order_alerts",
        topic=ALERTS_TOPIC,
        producer_function="airflow_pulsar.examples.shop_events.large_orders",
        producer_function_kwargs=EVENT_ARGS,
    )

    ensure_topic() >> [publish, alerts]
