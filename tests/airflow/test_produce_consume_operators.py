"""Produce and consume operators in real DAG runs (dag.test()) against the broker process.

The subscription's backlog in the admin stats proves what the consumer acknowledged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_pulsar.client import Client, ConsumerType, InitialPosition, MessageId, exceptions
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.consume import PulsarConsumeOperator
from airflow_pulsar.operators.produce import PulsarProduceOperator
from tests.support.dag_runs import run_dag, subscription_stats

COUNT = 10
EXPECTED = [f"m{i}" for i in range(COUNT)]


@pytest.mark.parametrize(
    ("ack", "backlog_after", "acknowledged"),
    [("individual", 0, COUNT), ("cumulative", 0, COUNT), ("never", COUNT, 0)],
)
def test_produce_then_consume_with_each_ack_mode(
    broker_admin: PulsarAdmin, topic_name: str, tmp_path: Path, ack: str, backlog_after: int, acknowledged: int
) -> None:
    out = tmp_path / "consumed.txt"
    result = run_dag(f"pulsar_produce_consume_{ack}", topic=topic_name, subscription="sub", count=COUNT, out=str(out))

    assert result.state == "success", result.states
    produced = result.xcoms["produce"]
    assert produced["messages"] == COUNT and produced["topic"] == topic_name
    assert produced["last_message_id"].startswith("(")
    assert result.xcoms["consume"] == {
        "topics": [topic_name],
        "topics_pattern": None,
        "subscription": "sub",
        "ack": ack,
        "messages": COUNT,
        "batches": 3,  # max_batch_size=4
        "acknowledged": acknowledged,
        "dead_lettered": 0,
    }
    assert out.read_text().split() == EXPECTED  # templated kwargs reached the function
    assert broker_admin.message_backlog(topic_name, "sub").messages == backlog_after
    assert subscription_stats(broker_admin, topic_name, "sub")["consumers"] == []  # the task closed its consumer


def test_produced_messages_carry_keys_and_properties(
    broker, broker_admin: PulsarAdmin, topic_name: str, tmp_path: Path
) -> None:
    # ack="never" leaves every message in the subscription, so a second consumer sees them all again.
    out = str(tmp_path / "consumed.txt")
    result = run_dag("pulsar_produce_consume_never", topic=topic_name, subscription="sub", count=3, out=out)
    assert result.state == "success"
    with Client(broker.service_url) as client:
        consumer = client.subscribe(topic_name, "sub", consumer_type=ConsumerType.Failover)
        got = [consumer.receive(timeout_millis=5000) for _ in range(3)]
    assert [(m.partition_key(), m.data(), m.properties()) for m in got] == [
        (f"k{i}", f"m{i}".encode(), {"i": str(i)}) for i in range(3)
    ]
    assert got[0].redelivery_count() == 0


def test_failing_function_nacks_and_fails_the_task(
    broker, broker_admin: PulsarAdmin, topic_name: str, tmp_path: Path
) -> None:
    out = tmp_path / "consumed.txt"
    conf = {"topic": topic_name, "subscription": "sub", "count": COUNT, "out": str(out), "bad": "m5"}
    result = run_dag("pulsar_consume_failing", **conf)

    assert result.state == "failed"
    assert result.states == {"produce": "success", "consume": "failed"}
    assert out.read_text().split() == EXPECTED[:5]
    # The five messages before the failure were acknowledged (batch-index acks, which admin REST does
    # not show: a batch acknowledged in part counts whole there), the rest were not: only those come back.
    with Client(broker.service_url) as client:
        consumer = client.subscribe(topic_name, "sub", consumer_type=ConsumerType.Shared)
        redelivered = {}
        while True:
            try:
                message = consumer.receive(timeout_millis=1000)
            except exceptions.Timeout:
                break
            redelivered[message.data().decode()] = message.redelivery_count()
            consumer.acknowledge(message)
    # Redelivery counts are not compared: Pulsar forgets them when a subscription's last consumer
    # leaves (the task's), so every message comes back here as a first delivery.
    assert sorted(redelivered) == EXPECTED[5:]


def test_dead_letter_policy_moves_the_failing_message_and_the_task_goes_on(
    broker, broker_admin: PulsarAdmin, topic_name: str, tmp_path: Path
) -> None:
    out = tmp_path / "consumed.txt"
    dead_letter_topic = f"persistent://public/default/{topic_name}-sub-DLQ"  # Pulsar's default name
    with Client(broker.service_url) as client:
        # Subscribed first, so Pulsar keeps what arrives there.
        dead_letters = client.subscribe(dead_letter_topic, "inspect", initial_position=InitialPosition.Earliest)
        conf = {"topic": topic_name, "subscription": "sub", "count": COUNT, "out": str(out), "bad": "m5"}
        result = run_dag("pulsar_consume_dead_letter", **conf)

        assert result.states == {"produce": "success", "consume": "success"}
        summary = result.xcoms["consume"]
        # m5 failed on its first delivery and on both redeliveries; then it was moved.
        assert (summary["messages"], summary["acknowledged"], summary["dead_lettered"]) == (COUNT + 2, COUNT - 1, 1)
        assert out.read_text().split() == EXPECTED[:5] + EXPECTED[6:]
        moved = dead_letters.receive(timeout_millis=5000)
        assert moved.data() == b"m5" and moved.partition_key() == "k5"
        properties = moved.properties()
        assert properties["i"] == "5"  # the message's own properties travel with it
        assert properties["REAL_TOPIC"] == f"persistent://public/default/{topic_name}"
        with pytest.raises(exceptions.Timeout):
            dead_letters.receive(timeout_millis=300)
        reader = client.create_reader(topic_name, MessageId.earliest)
        origin = next(m for m in (reader.read_next(5000) for _ in range(COUNT)) if m.data() == b"m5")
        assert properties["ORIGIN_MESSAGE_ID"] == str(origin.message_id())
    assert broker_admin.message_backlog(topic_name, "sub").messages == 0  # acknowledged on the source too


def test_dead_letter_policy_with_a_batch_function_moves_the_failing_batch(
    broker, broker_admin: PulsarAdmin, topic_name: str, tmp_path: Path
) -> None:
    out = tmp_path / "consumed.txt"
    with Client(broker.service_url) as client:
        dead_letters = client.subscribe(f"{topic_name}-sub-DLQ", "inspect", initial_position=InitialPosition.Earliest)
        conf = {"topic": topic_name, "subscription": "sub", "count": COUNT, "out": str(out), "bad": "m5"}
        result = run_dag("pulsar_consume_batch_dead_letter", **conf)

        assert result.states == {"produce": "success", "consume": "success"}
        moved = []
        while True:
            try:
                moved.append(dead_letters.receive(timeout_millis=1000).data().decode())
            except exceptions.Timeout:
                break
    # Which messages share the bad one's batch depends on arrival; each message is in exactly one place.
    recorded = out.read_text().split()
    assert "m5" in moved and sorted(recorded + moved, key=EXPECTED.index) == EXPECTED
    assert result.xcoms["consume"]["dead_lettered"] == len(moved)
    assert broker_admin.message_backlog(topic_name, "sub").messages == 0


def test_cumulative_ack_on_a_shared_subscription_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="ack='cumulative' needs an Exclusive or Failover subscription, got Shared"):
        PulsarConsumeOperator(task_id="c", topics="t", subscription="s", apply_function=print, ack="cumulative")
    with pytest.raises(ValueError, match="got KeyShared"):
        PulsarConsumeOperator(
            task_id="c",
            topics="t",
            subscription="s",
            apply_function=print,
            ack="cumulative",
            subscription_type="Key_Shared",
        )


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"apply_function": None}, "give exactly one of apply_function or apply_function_batch"),
        ({"apply_function_batch": print}, "give exactly one of apply_function or apply_function_batch"),
        ({"apply_function": "not a path"}, "apply_function must be a callable or a dotted path"),
        ({"ack": "sometimes"}, "ack must be one of individual, cumulative, end_of_operator, never, got 'sometimes'"),
        ({"subscription_type": "Solo"}, "subscription_type must be one of Exclusive, Shared, Failover, KeyShared"),
        ({"initial_position": "middle"}, "initial_position must be one of Latest, Earliest"),
        ({"topics": []}, "topics must be a topic name or a non-empty list"),
        ({"topics": ["bad topic name/x/y/z"]}, "topics:"),
        ({"subscription": ""}, "subscription must be a non-empty string"),
        ({"max_messages": 0}, "max_messages must be an int >= 1 or None"),
        ({"max_batch_size": -1}, "max_batch_size must be an int >= 1"),
        ({"poll_timeout": "soon"}, "poll_timeout must be a non-negative number"),
        ({"apply_function_args": "abc"}, "apply_function_args must be a list or tuple"),
        ({"consumer_settings": {"receiver_queue_size": -1}}, "consumer_settings: Argument receiver_queue_size must be"),
        ({"consumer_settings": {"consumer_type": 1}}, "consumer_settings must not set 'consumer_type'"),
        ({"max_redeliver_count": 0}, "max_redeliver_count must be an int >= 1"),
        ({"dead_letter_topic": "dlq"}, "dead_letter_topic 'dlq' needs max_redeliver_count"),
        ({"max_redeliver_count": 3, "dead_letter_topic": ""}, "dead_letter_topic must be a non-empty topic name"),
        (
            {"max_redeliver_count": 3, "subscription_type": "Failover"},
            "max_redeliver_count needs a Shared or KeyShared subscription, got Failover",
        ),
        (
            {"consumer_settings": {"dead_letter_policy": None}},
            "consumer_settings must not set 'dead_letter_policy': use max_redeliver_count",
        ),
        (
            {"max_redeliver_count": 3, "ack": "end_of_operator"},
            "ack='end_of_operator' cannot be combined with max_redeliver_count",
        ),
    ],
)
def test_consume_operator_rejects_bad_arguments(arguments: dict, error: str) -> None:
    given = {"topics": "t", "subscription": "s", "apply_function": print, **arguments}
    with pytest.raises(ValueError, match=error.replace("(", r"\(")):
        PulsarConsumeOperator(task_id="c", **given)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"topic": ""}, "topic must be a non-empty topic name"),
        ({"producer_function": 42}, "producer_function must be a callable or a dotted path"),
        ({"producer_settings": {"batching_max_messages": 0}}, "producer_settings: Argument batching_max_messages must be >= 1"),
        ({"producer_settings": {"compression_type": "RAR"}}, "compression_type'\\] must be one of NONE, LZ4"),
        ({"producer_settings": {"colour": "blue"}}, "unexpected keyword argument\\(s\\): colour"),
        ({"producer_function_kwargs": {1: 2}}, "producer_function_kwargs must be a dict with str keys"),
        ({"pulsar_conn_id": ""}, "pulsar_conn_id must be a non-empty string"),
    ],
)
def test_produce_operator_rejects_bad_arguments(arguments: dict, error: str) -> None:
    given = {"topic": "t", "producer_function": "pkg.fn", **arguments}
    with pytest.raises(ValueError, match=error):
        PulsarProduceOperator(task_id="p", **given)


def test_templated_fields() -> None:
    assert set(PulsarProduceOperator.template_fields) == {
        "topic",
        "producer_function_args",
        "producer_function_kwargs",
        "pulsar_conn_id",
    }
    assert set(PulsarConsumeOperator.template_fields) == {
        "topics",
        "topics_pattern",
        "subscription",
        "apply_function_args",
        "apply_function_kwargs",
        "pulsar_conn_id",
    }
    # Templated topic names are left as written for the task to render, then checked.
    operator = PulsarConsumeOperator(task_id="c", topics="{{ params.topic }}", subscription="s", apply_function=print)
    assert operator.topics == "{{ params.topic }}"


def test_produce_wait_for_the_backlog_then_consume_20000_with_default_settings(
    broker_admin: PulsarAdmin, topic_name: str, tmp_path: Path
) -> None:
    """Default batching packs 20,000 messages into a few entries: the sensor counts messages, fires
    at 20,000, and the consumer then takes every one, each once, and acknowledges to the end."""
    broker_admin.create_topic(topic_name)
    broker_admin.create_subscription(topic_name, "sub", InitialPosition.Earliest)
    out = tmp_path / "consumed.txt"

    result = run_dag("pulsar_produce_wait_consume", topic=topic_name, subscription="sub", out=str(out))

    assert result.state == "success", result.states
    assert result.xcoms["produce"]["messages"] == 20_000
    waited = result.xcoms["wait"]
    assert (waited["messages"], waited["exact"]) == (20_000, True)
    assert waited["entries"] < 20_000  # batched: Pulsar's msgBacklog alone would never reach the threshold
    assert result.xcoms["consume"]["messages"] == 20_000
    values = out.read_text().split()
    assert len(values) == 20_000 and set(values) == {f"m{i}" for i in range(20_000)}
    assert broker_admin.message_backlog(topic_name, "sub").messages == 0
