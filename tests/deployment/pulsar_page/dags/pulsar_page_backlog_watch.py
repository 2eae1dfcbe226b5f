"""A backlog sensor waiting deferred on the topic and subscription of the run's conf, with a
threshold it never reaches: its trigger reads the backlog every second, and each reading goes to
the history the Pulsar page draws its chart from."""

from __future__ import annotations

import pendulum
from airflow.sdk import dag

from airflow_pulsar.sensors.backlog import PulsarBacklogSensor


@dag(dag_id="watch_orders_backlog", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def watch_orders_backlog() -> None:
    PulsarBacklogSensor(
        task_id="wait_for_backlog",
        topic="{{ dag_run.conf['topic'] }}",
        subscription="{{ dag_run.conf['subscription'] }}",
        threshold=10**9,
        deferrable=True,
        poke_interval=1,
        timeout=3600,
    )


watch_orders_backlog()
