"""Run when Pulsar delivers a high-severity alert: an asset scheduled by messages, not by time.

The asset is the topic itself: ``pulsar://localhost:6650/persistent/public/default/shop-alerts``
names the cluster by its service URL's host and port (Pulsar's default here; write your cluster's)
and the topic by its full name, as the OpenLineage datasets of the provider's operators do; the
trigger reads the topic through the ``pulsar_default`` connection. It is watched through the
``pulsar`` message-queue provider: a trigger in Airflow's triggerer consumes ``shop-alerts`` on the
``airflow-alert-handler`` subscription, passes each message to
``airflow_pulsar.examples.shop_events.is_alert``, and every accepted message becomes an asset event
that schedules this DAG. The message is acknowledged once its asset event is stored, and a
message the filter raises on is negatively acknowledged and redelivered. The DAG's task reads
the alerts from the triggering asset events. Airflow may hand an alert that arrives while the
previous one still waits for its run to the run of the next alert instead (see docs/event-driven.md).
"""

from __future__ import annotations

from datetime import datetime

from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger
from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_pulsar.examples.shop_events import ALERTS_TOPIC

shop_alerts = Asset(
    "pulsar://localhost:6650/persistent/public/default/shop-alerts",
    watchers=[
        AssetWatcher(
            name="shop_alerts_watcher",
            trigger=MessageQueueTrigger(
                scheme="pulsar",
                topics=[ALERTS_TOPIC],
                subscription="airflow-alert-handler",
                apply_function="airflow_pulsar.examples.shop_events.is_alert",
                apply_function_kwargs={"severity": "high"},
                initial_position="Earliest",
            ),
        )
    ],
)

with DAG(
    dag_id="pulsar_alert_handler",
    description="Handle large-order alerts as Pulsar delivers them",
    schedule=[shop_alerts],
    start_date=datetime(2025, 1, 1),
    catchup=False,
    tags=["pulsar", "example"],
) as dag:

    @task
    def handle(triggering_asset_events=None) -> list:  # noqa: ANN001 - filled in by Airflow
        """Log each alert of the asset events that started this run; return their messages."""
        alerts = [event.extra["payload"] for events in (triggering_asset_events or {}).values() for event in events]
        for alert in alerts:
            print(f"alert: {alert}")
        return alerts

    handle()
