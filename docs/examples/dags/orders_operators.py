"""The operators' examples of the docs (produce-consume.md, subscriptions.md, sensors-triggers.md),
in one DAG that tests/airflow/test_docs_example_dags.py runs against the embedded broker."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from airflow_pulsar.operators.consume import PulsarConsumeOperator
from airflow_pulsar.operators.produce import PulsarProduceOperator
from airflow_pulsar.operators.subscriptions import (
    PulsarCreateSubscriptionOperator,
    PulsarResetSubscriptionOperator,
)
from airflow_pulsar.operators.topics import PulsarCreateTopicOperator
from airflow_pulsar.sensors.await_message import PulsarAwaitMessageSensor
from airflow_pulsar.sensors.backlog import PulsarBacklogSensor

with DAG("orders_operators", schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    # [START subscriptions]
    create = PulsarCreateTopicOperator(task_id="orders_topic", topic="orders", partitions=4)
    subscribe = PulsarCreateSubscriptionOperator(task_id="subscribe", topic="orders", subscription="warehouse")
    replay = PulsarResetSubscriptionOperator(
        task_id="replay_today", topic="orders", subscription="warehouse", to="{{ data_interval_start }}"
    )
    create >> subscribe >> replay
    # [END subscriptions]
    watch = PulsarCreateSubscriptionOperator(task_id="watch", topic="orders", subscription="order-watch")

    # [START produce]
    publish = PulsarProduceOperator(
        task_id="publish_orders",
        topic="orders",
        producer_function="my_project.orders.rows",
        producer_settings={"compression_type": "LZ4", "batching_max_messages": 500},
    )
    # [END produce]

    # [START backlog_sensor]
    wait = PulsarBacklogSensor(
        task_id="wait_for_orders",
        topic="orders",
        subscription="warehouse",
        threshold=10_000,
        max_message_age=timedelta(minutes=15),
        poke_interval=30,
        timeout=timedelta(hours=2),
    )
    # [END backlog_sensor]

    # [START await_message]
    order_42 = PulsarAwaitMessageSensor(
        task_id="wait_for_order_42",
        topics="orders",
        subscription="order-watch",
        apply_function="my_project.orders.is_order",
        apply_function_kwargs={"number": 42},
        timeout=timedelta(hours=1),
    )
    # [END await_message]

    # [START consume]
    load = PulsarConsumeOperator(
        task_id="load_orders",
        topics=["orders"],
        subscription="warehouse",
        subscription_type="Exclusive",
        ack="cumulative",
        apply_function_batch="my_project.orders.load",
        max_messages=10_000,
        poll_timeout=5,
    )
    # [END consume]

    publish_events = PulsarProduceOperator(task_id="publish_events", topic="events", producer_function="my_project.events.produce")
    dead_letters = PulsarCreateSubscriptionOperator(task_id="dead_letters", topic="events-dead", subscription="audit")
    # [START consume_dead_letters]
    load_events = PulsarConsumeOperator(
        task_id="load_events",
        topics=["events"],
        subscription="warehouse",  # Shared, the default
        apply_function="my_project.events.load_one",
        max_redeliver_count=3,  # a message failing 4 times goes to events-dead, the task goes on
        dead_letter_topic="events-dead",
        poll_timeout=5,
    )
    # [END consume_dead_letters]

    replay >> watch >> publish >> [wait, order_42]
    wait >> load
    dead_letters >> load_events
    PulsarCreateSubscriptionOperator(task_id="events_subscription", topic="events", subscription="warehouse") >> publish_events
    publish_events >> load_events
