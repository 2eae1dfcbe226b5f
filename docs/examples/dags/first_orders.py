"""Publish ten orders, subscribe, wait for the backlog, then consume and acknowledge it."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_pulsar.operators.consume import PulsarConsumeOperator
from airflow_pulsar.operators.produce import PulsarProduceOperator
from airflow_pulsar.operators.subscriptions import PulsarCreateSubscriptionOperator
from airflow_pulsar.sensors.backlog import PulsarBacklogSensor

TOPIC = "first-orders"
SUBSCRIPTION = "order-reader"


def orders():
    """What the producer sends: (key, value) pairs; str values go out as UTF-8."""
    for number in range(10):
        yield f"customer-{number % 3}", f'{{"order": {number}}}'


def handle(message):
    """Called once per message; the operator acknowledges the message when this returns."""
    print(f"order from {message.partition_key()}: {message.data().decode()}")


with DAG("first_orders", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    produce = PulsarProduceOperator(task_id="produce", topic=TOPIC, producer_function=orders)
    subscribe = PulsarCreateSubscriptionOperator(
        task_id="subscribe", topic=TOPIC, subscription=SUBSCRIPTION, initial_position="earliest"
    )
    wait = PulsarBacklogSensor(
        task_id="wait_for_orders", topic=TOPIC, subscription=SUBSCRIPTION, threshold=10, poke_interval=1
    )
    consume = PulsarConsumeOperator(
        task_id="consume", topics=[TOPIC], subscription=SUBSCRIPTION, apply_function=handle, max_messages=10
    )

    produce >> subscribe >> wait >> consume
