"""Four event-driven DAGs for tests/deployment/test_event_driven_deployed.py: one scheduled by a
watcher that makes an asset event per batch of up to 10 messages, one by a backlog watcher that
fires on 20 new messages, whose run drains the subscription as an ingestion would, and two whose
watchers acknowledge a batch only once its run succeeded: the first run of one fails, and the
runs of the other wait for the test's word, so that the triggerer can be stopped meanwhile."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_pulsar.operators.run_messages import PulsarAcknowledgeRunMessagesOperator, PulsarReleaseRunMessagesOperator
from airflow_pulsar.triggers.backlog_event import PulsarBacklogEventTrigger
from airflow_pulsar.triggers.message_event import PulsarMessageEventTrigger

BATCH_TOPIC = "persistent://public/default/deploy-order-batches"
BACKLOG_TOPIC = "persistent://public/default/deploy-backlog"
SETTLED_TOPIC = "persistent://public/default/deploy-settled-orders"
RESTART_TOPIC = "persistent://public/default/deploy-restart-orders"
BATCH_SIZE = 10
SETTLED_BATCH = 6
THRESHOLD = 20
POLL_SECONDS = 1.0

order_batches = Asset(
    "deploy_order_batches",
    watchers=[
        AssetWatcher(
            name="order_batches",
            trigger=PulsarMessageEventTrigger(
                topics=BATCH_TOPIC, subscription="batches", initial_position="Earliest",
                batch_size=BATCH_SIZE, batch_timeout=2,
            ),
        )
    ],
)

backlog = Asset(
    "deploy_backlog",
    watchers=[
        AssetWatcher(
            name="backlog",
            trigger=PulsarBacklogEventTrigger(
                topic=BACKLOG_TOPIC, subscription="ingest", threshold=THRESHOLD, poll_interval=POLL_SECONDS
            ),
        )
    ],
)


def run_acknowledged(name: str, topic: str, subscription: str) -> Asset:
    """Asset ``deploy_<name>``, watched by a trigger that acknowledges a batch once its run succeeded."""
    trigger = PulsarMessageEventTrigger(
        topics=topic, subscription=subscription, batch_size=SETTLED_BATCH, batch_timeout=2,
        acknowledge="on_success", ack_timeout=900, redelivery_delay=1,
    )
    return Asset(f"deploy_{name}", watchers=[AssetWatcher(name=name, trigger=trigger)])


settled_orders = run_acknowledged("settled_orders", SETTLED_TOPIC, "settled")
restart_orders = run_acknowledged("restart_orders", RESTART_TOPIC, "restart")


def batch_values(triggering_asset_events: dict | None) -> list:
    """The values of every message of the batches among a run's triggering asset events."""
    return [
        item["message"]["value"]
        for events in (triggering_asset_events or {}).values()
        for event in events
        for item in event.extra["payload"]["messages"]
    ]


with DAG("pulsar_order_batches", schedule=[order_batches], start_date=datetime(2025, 1, 1), catchup=False):

    @task
    def handle(triggering_asset_events=None) -> list:  # noqa: ANN001 - filled in by Airflow
        """The values of every message of the batches that started this run."""
        return batch_values(triggering_asset_events)

    handle()

with DAG("pulsar_ingest_on_backlog", schedule=[backlog], start_date=datetime(2025, 1, 1), catchup=False, max_active_runs=1):

    @task
    def ingest() -> int:
        """Drain the subscription, acknowledging cumulatively as PulsarToTableOperator does."""
        from airflow_pulsar.client import Timeout
        from airflow_pulsar.hooks.pulsar import PulsarHook

        consumer = PulsarHook().get_client().subscribe(BACKLOG_TOPIC, "ingest")
        by_partition = {}
        while True:
            try:
                message = consumer.receive(timeout_millis=2000)
            except Timeout:  # drained
                break
            by_partition.setdefault(message.topic_name(), []).append(message)
        # A cumulative acknowledgement covers one partition: one per partition.
        for messages in by_partition.values():
            consumer.acknowledge_cumulative(messages[-1])
        consumer.close()
        return sum(len(messages) for messages in by_partition.values())

    ingest()

with DAG("pulsar_settled_orders", schedule=[settled_orders], start_date=datetime(2025, 1, 1), catchup=False):

    @task
    def handle_once_failing(triggering_asset_events=None) -> list:  # noqa: ANN001 - filled in by Airflow
        """The values of the run's messages; the deployment's first run of it fails instead."""
        failed_once = Path(os.environ["AIRFLOW_HOME"]) / "settled-orders-failed-once"
        if not failed_once.exists():
            failed_once.touch()
            raise RuntimeError("the first run fails: its messages must come back")
        return batch_values(triggering_asset_events)

    handled = handle_once_failing()
    handled >> PulsarAcknowledgeRunMessagesOperator(task_id="acknowledge")
    handled >> PulsarReleaseRunMessagesOperator(task_id="release")

with DAG("pulsar_restart_orders", schedule=[restart_orders], start_date=datetime(2025, 1, 1), catchup=False):

    @task
    def handle_when_told(triggering_asset_events=None) -> list:  # noqa: ANN001 - filled in by Airflow
        """The values of the run's messages, once the test has created AIRFLOW_HOME/restart-orders-go."""
        import time

        go = Path(os.environ["AIRFLOW_HOME"]) / "restart-orders-go"
        deadline = time.monotonic() + 600
        while not go.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{go} never appeared")
            time.sleep(0.5)
        return batch_values(triggering_asset_events)

    told = handle_when_told()
    told >> PulsarAcknowledgeRunMessagesOperator(task_id="acknowledge")
    told >> PulsarReleaseRunMessagesOperator(task_id="release")
