"""Subscription and topic admin from a DAG (tests/airflow/test_subscription_operators.py): create
the topic and a subscription at earliest (twice: the second leaves it), produce, watch the backlog
(also with a fresh subscription the sensor creates), consume it all, reset to earliest and watch the
same backlog again, delete the subscription (twice: the second finds none). Topic, subscriptions
and output file come from ``dag_run.conf``; one DAG per topic shape."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_pulsar.operators.consume import PulsarConsumeOperator
from airflow_pulsar.operators.produce import PulsarProduceOperator
from airflow_pulsar.operators.subscriptions import (
    PulsarCreateSubscriptionOperator,
    PulsarDeleteSubscriptionOperator,
    PulsarResetSubscriptionOperator,
)
from airflow_pulsar.operators.topics import PulsarCreateTopicOperator
from airflow_pulsar.sensors.backlog import PulsarBacklogSensor

TOPIC = "{{ dag_run.conf['topic'] }}"
SUBSCRIPTION = "{{ dag_run.conf['subscription'] }}"
FRESH = "{{ dag_run.conf['fresh'] }}"
MESSAGES = 6
WATCH = {"threshold": MESSAGES, "deferrable": False, "mode": "poke", "poke_interval": 0.2, "timeout": 30}

for dag_id, partitions in (("pulsar_subscriptions_plain", 0), ("pulsar_subscriptions_partitioned", 3)):
    with DAG(dag_id, schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
        create_topic = PulsarCreateTopicOperator(task_id="create_topic", topic=TOPIC, partitions=partitions)
        subscribe = PulsarCreateSubscriptionOperator(task_id="subscribe", topic=TOPIC, subscription=SUBSCRIPTION)
        subscribe_again = PulsarCreateSubscriptionOperator(
            task_id="subscribe_again", topic=TOPIC, subscription=SUBSCRIPTION, initial_position="latest"
        )
        produce = PulsarProduceOperator(
            task_id="produce",
            topic=TOPIC,
            producer_function="pulsar_test_functions.numbered",
            producer_function_args=[str(MESSAGES)],
        )
        wait = PulsarBacklogSensor(task_id="wait", topic=TOPIC, subscription=SUBSCRIPTION, **WATCH)
        wait_fresh = PulsarBacklogSensor(
            task_id="wait_fresh", topic=TOPIC, subscription=FRESH, create_subscription=True, **WATCH
        )
        consume = PulsarConsumeOperator(
            task_id="consume",
            topics=TOPIC,
            subscription=SUBSCRIPTION,
            apply_function="pulsar_test_functions.record",
            apply_function_kwargs={"out": "{{ dag_run.conf['out'] }}"},
            max_messages=MESSAGES,
            poll_timeout=5,
        )
        rewind = PulsarResetSubscriptionOperator(task_id="rewind", topic=TOPIC, subscription=SUBSCRIPTION, to="earliest")
        wait_again = PulsarBacklogSensor(task_id="wait_again", topic=TOPIC, subscription=SUBSCRIPTION, **WATCH)
        delete = PulsarDeleteSubscriptionOperator(task_id="delete", topic=TOPIC, subscription=SUBSCRIPTION)
        delete_again = PulsarDeleteSubscriptionOperator(task_id="delete_again", topic=TOPIC, subscription=SUBSCRIPTION)
        (
            create_topic
            >> subscribe
            >> subscribe_again
            >> produce
            >> wait
            >> wait_fresh
            >> consume
            >> rewind
            >> wait_again
            >> delete
            >> delete_again
        )

# A sensor on a subscription nobody created: fails naming create_subscription.
with DAG("pulsar_subscriptions_missing", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    PulsarBacklogSensor(task_id="wait", topic=TOPIC, subscription=SUBSCRIPTION, **{**WATCH, "threshold": 1})
