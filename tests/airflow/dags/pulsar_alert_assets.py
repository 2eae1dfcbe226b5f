"""An asset watched through the ``pulsar`` message-queue provider, and the DAG it schedules
(tests/airflow/test_message_events.py)."""

from __future__ import annotations

from datetime import datetime

from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger
from airflow.sdk import DAG, Asset, AssetWatcher, task

ALERTS_TOPIC = "airflow-test-alerts"
ALERTS_SUBSCRIPTION = "airflow-test-alerts-watch"

alerts = Asset(
    "pulsar_test_alerts",
    watchers=[
        AssetWatcher(
            name="pulsar_test_alerts_watcher",
            trigger=MessageQueueTrigger(
                scheme="pulsar",
                topics=[ALERTS_TOPIC],
                subscription=ALERTS_SUBSCRIPTION,
                apply_function="pulsar_test_functions.is_alert",
                apply_function_kwargs={"level": "alert"},
                initial_position="Earliest",
                redelivery_delay=0.2,
            ),
        )
    ],
)

with DAG("pulsar_alerts_consumer", schedule=[alerts], start_date=datetime(2024, 1, 1), catchup=False):

    @task
    def report(triggering_asset_events=None) -> list:
        """The message payloads of the asset events that started this run."""
        return [event.extra["payload"] for events in triggering_asset_events.values() for event in events]

    report()
