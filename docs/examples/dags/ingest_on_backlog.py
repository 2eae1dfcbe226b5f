"""Event-driven ingestion (event-driven.md): a watcher fires an asset event each time the
``lakehouse`` subscription's backlog holds 1000 new messages (or its oldest new one is an hour
old), and the DAG on that asset ingests the backlog into a table; beside it, a watcher that makes
one asset event per batch of up to 500 orders. Tested by tests/airflow/test_docs_example_dags.py."""

from __future__ import annotations

# [START backlog_watcher]
from airflow.sdk import DAG, Asset, AssetWatcher

from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from airflow_pulsar.triggers.backlog_event import PulsarBacklogEventTrigger

shop_events_backlog = Asset(
    "pulsar://localhost:6650/persistent/public/default/shop-events",
    watchers=[
        AssetWatcher(
            name="shop_events_backlog",
            trigger=PulsarBacklogEventTrigger(
                topic="shop-events", subscription="lakehouse", threshold=1000, max_message_age=3600, poll_interval=10
            ),
        )
    ],
)

with DAG("ingest_on_backlog", schedule=[shop_events_backlog], max_active_runs=1):
    PulsarToTableOperator(
        task_id="ingest_events",
        topics="shop-events",
        subscription="lakehouse",
        table="shop.events",
        value_format="json",
        value_schema="event_type STRING, user_id STRING, amount DOUBLE",
    )
# [END backlog_watcher]

# [START batch_watcher]
from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger  # noqa: E402

orders = Asset(
    "pulsar://localhost:6650/persistent/public/default/orders",
    watchers=[
        AssetWatcher(
            name="orders_in_batches",
            trigger=MessageQueueTrigger(
                scheme="pulsar", topics=["orders"], subscription="airflow-orders",
                batch_size=500, batch_timeout=10,  # one asset event per 500 orders, or 10 s after the first
            ),
        )
    ],
)

with DAG("handle_order_batches", schedule=[orders]):
    ...
# [END batch_watcher]
