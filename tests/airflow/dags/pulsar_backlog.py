"""Backlog sensors: deferred and poking, ready by message count or by age, and timing out
(tests/airflow/test_backlog_sensor.py). Topic and subscription come from ``dag_run.conf``."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_pulsar.sensors.backlog import PulsarBacklogSensor

POLL_SECONDS = 0.3
WATCHED = {"topic": "{{ dag_run.conf['topic'] }}", "subscription": "{{ dag_run.conf['subscription'] }}"}

# dag id -> sensor arguments
SENSORS = {
    "pulsar_backlog_deferred": {"threshold": 5, "timeout": 60, "deferrable": True},
    "pulsar_backlog_poke": {"threshold": 5, "timeout": 60, "deferrable": False, "mode": "poke"},
    # A threshold in messages that default batching packs into a few entries.
    "pulsar_backlog_batched": {"threshold": 2000, "timeout": 60, "deferrable": True},
    "pulsar_backlog_age": {
        "threshold": 1000,
        "max_message_age": 1.0,
        "timeout": 60,
        "deferrable": False,
        "mode": "reschedule",
    },
    "pulsar_backlog_timeout": {"threshold": 1000, "timeout": 1, "deferrable": True},
    "pulsar_backlog_timeout_soft": {"threshold": 1000, "timeout": 1, "soft_fail": True, "deferrable": True},
    "pulsar_backlog_poke_timeout_soft": {"threshold": 1000, "timeout": 1, "soft_fail": True, "deferrable": False},
}

for dag_id, arguments in SENSORS.items():
    with DAG(dag_id, schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
        PulsarBacklogSensor(task_id="wait", poke_interval=POLL_SECONDS, **WATCHED, **arguments)
