"""The run-acknowledged example of the docs (event-driven.md): a watcher that leaves each batch of
orders unacknowledged until the run it started has succeeded, and the run's last tasks that
acknowledge them, or release them when the run failed. Tested by
tests/airflow/test_run_acknowledgement.py."""

from __future__ import annotations

# [START acknowledge_on_success]
from datetime import timedelta

from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_pulsar.operators.run_messages import (
    PulsarAcknowledgeRunMessagesOperator,
    PulsarReleaseRunMessagesOperator,
)
from airflow_pulsar.triggers.message_event import PulsarMessageEventTrigger

orders = Asset(
    "paid_orders",
    watchers=[
        AssetWatcher(
            name="paid_orders_watcher",
            trigger=PulsarMessageEventTrigger(
                topics="paid-orders", subscription="airflow-paid-orders",
                batch_size=100, batch_timeout=10,
                acknowledge="on_success",  # hold each batch until its run succeeded
                ack_timeout=timedelta(hours=2),  # longer than dagrun_timeout: a killed run's batch comes back
                redelivery_delay=30,  # a released batch comes back after 30 s
            ),
        )
    ],
)

with DAG("ship_paid_orders", schedule=[orders], dagrun_timeout=timedelta(hours=1)) as dag:

    @task
    def ship(triggering_asset_events=None) -> int:  # noqa: ANN001 - filled in by Airflow
        """Ship every order of the batches that started this run."""
        shipped = 0
        for events in (triggering_asset_events or {}).values():
            for event in events:
                shipped += len(event.extra["payload"]["messages"])  # each item: {"message": {...}, "result": ...}
        return shipped

    shipped = ship()
    # all_success: the watcher acknowledges the run's orders; one_failed: it delivers them again.
    shipped >> PulsarAcknowledgeRunMessagesOperator(task_id="acknowledge_orders")
    shipped >> PulsarReleaseRunMessagesOperator(task_id="release_orders")
# [END acknowledge_on_success]
