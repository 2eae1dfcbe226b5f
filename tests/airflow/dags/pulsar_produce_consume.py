"""Produce then consume, once per acknowledgement mode, a consumer whose function fails (without
and with a dead-letter policy), and produce -> backlog sensor -> consume of 20,000 messages with
default settings.

The topic, subscription, message count and output file come from ``dag_run.conf`` through the
operators' templated fields (tests/airflow/test_produce_consume_operators.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG

from airflow_pulsar.operators.consume import PulsarConsumeOperator
from airflow_pulsar.operators.produce import PulsarProduceOperator
from airflow_pulsar.sensors.backlog import PulsarBacklogSensor

TOPIC = "{{ dag_run.conf['topic'] }}"
SUBSCRIPTION = "{{ dag_run.conf['subscription'] }}"
OUT = {"out": "{{ dag_run.conf['out'] }}"}


def _produce() -> PulsarProduceOperator:
    return PulsarProduceOperator(
        task_id="produce",
        topic=TOPIC,
        producer_function="pulsar_test_functions.numbered",
        producer_function_args=["{{ dag_run.conf['count'] }}"],
        producer_settings={"batching_max_messages": 7, "compression_type": "LZ4"},
    )


# ack mode -> (subscription type, function argument). A Failover subscription's first dispatch
# waits a second (Pulsar's activeConsumerFailoverDelayTimeMillis), so polls wait longer than that.
CONSUMERS = {
    "individual": ("Shared", {"apply_function": "pulsar_test_functions.record"}),
    "cumulative": ("Exclusive", {"apply_function_batch": "pulsar_test_functions.record_batch"}),
    "never": ("Failover", {"apply_function": "pulsar_test_functions.record"}),
}

for ack, (subscription_type, function) in CONSUMERS.items():
    with DAG(f"pulsar_produce_consume_{ack}", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
        _produce() >> PulsarConsumeOperator(
            task_id="consume",
            topics=[TOPIC],
            subscription=SUBSCRIPTION,
            subscription_type=subscription_type,
            ack=ack,
            apply_function_kwargs=OUT,
            max_batch_size=4,
            poll_timeout=2.0 if subscription_type == "Failover" else 0.5,
            **function,
        )

# A function failing on the value conf["bad"]: without a dead-letter policy the task fails; with
# one, the bad message (for a batch function, its batch) goes to the dead-letter topic (the
# default <topic>-<subscription>-DLQ) after its redeliveries, and the task succeeds.
FAILING: dict[str, dict[str, Any]] = {
    "pulsar_consume_failing": {"apply_function": "pulsar_test_functions.record_until"},
    "pulsar_consume_dead_letter": {"apply_function": "pulsar_test_functions.record_until", "max_redeliver_count": 2},
    "pulsar_consume_batch_dead_letter": {
        "apply_function_batch": "pulsar_test_functions.record_batch_until",
        "max_redeliver_count": 1,
    },
}
for dag_id, consumer in FAILING.items():
    with DAG(dag_id, schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
        _produce() >> PulsarConsumeOperator(
            task_id="consume",
            topics=TOPIC,
            subscription=SUBSCRIPTION,
            apply_function_kwargs={**OUT, "bad": "{{ dag_run.conf['bad'] }}"},
            max_batch_size=4,
            poll_timeout=0.5,
            **consumer,
        )

# The flow a first DAG has: produce with default settings, wait for the whole backlog, consume it.
FLOW_MESSAGES = 20_000
with DAG("pulsar_produce_wait_consume", schedule=None, start_date=datetime(2024, 1, 1), catchup=False):
    (
        PulsarProduceOperator(
            task_id="produce",
            topic=TOPIC,
            producer_function="pulsar_test_functions.numbered",
            producer_function_args=[str(FLOW_MESSAGES)],
        )
        >> PulsarBacklogSensor(
            task_id="wait", topic=TOPIC, subscription=SUBSCRIPTION, threshold=FLOW_MESSAGES, poke_interval=0.5, timeout=120
        )
        >> PulsarConsumeOperator(
            task_id="consume",
            topics=[TOPIC],
            subscription=SUBSCRIPTION,
            subscription_type="Exclusive",
            ack="cumulative",
            apply_function_batch="pulsar_test_functions.record_batch",
            apply_function_kwargs=OUT,
            max_messages=FLOW_MESSAGES,
            poll_timeout=5,
        )
    )
