"""The event-driven scheduling examples of the docs (event-driven.md): a DAG scheduled by the
messages of a topic, and a watcher's trigger with a dead-letter policy. Tested by
tests/airflow/test_docs_example_dags.py."""

from __future__ import annotations

# [START asset_watcher]
from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger
from airflow.sdk import DAG, Asset, AssetWatcher

alerts = Asset(
    "pulsar://localhost:6650/persistent/public/default/alerts",  # the watched topic (see below)
    watchers=[
        AssetWatcher(
            name="alerts_watcher",
            trigger=MessageQueueTrigger(
                scheme="pulsar", topics=["alerts"], subscription="airflow-alerts",
                apply_function="my_project.alerts.is_critical",
            ),
        )
    ],
)

with DAG("handle_alerts", schedule=[alerts]):
    ...
# [END asset_watcher]

# [START dead_letters]
trigger = MessageQueueTrigger(
    scheme="pulsar", topics=["alerts"], subscription="airflow-alerts",
    apply_function="my_project.alerts.is_critical",
    redelivery_delay=10, max_redeliver_count=5, dead_letter_topic="alerts-rejected",
)
# [END dead_letters]
