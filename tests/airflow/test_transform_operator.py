"""PulsarTransformOperator in DAG runs (dag.test()) on both brokers, with transaction coordinators.

* A run transforms every input message into one output, each once, and leaves no backlog; mapped
  over topics an upstream TaskFlow task returns, with a batch function and cumulative acks too.
* A task process killed with SIGKILL mid-batch (its function holding after the batch's earlier
  messages were published and acknowledged in the open transaction) and run again for the same
  task instance: the coordinator aborts the dead transaction at its timeout, the retry waits for
  it no longer than that, and the output topic holds each input's output exactly once.
* A function raising aborts its batch's transaction: the batches before stay committed, the
  failing batch's inputs are back in the backlog.
* The docs' example DAG (docs/examples/dags/exactly_once_orders.py) runs as shown.
* A broker without coordinators fails the task before it consumes anything, naming the setting.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException

from airflow_pulsar.client import Client, InitialPosition, exceptions
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.transform import PulsarTransformOperator
from tests.support.dag_runs import dag_run_process, run_dag, run_docs_example_dag, subscription_stats
from tests.support.polling import wait_until

ORDERS = 10_000  # docs/examples/plugins/my_project/orders.py's
TRANSACTION_TIMEOUT = 10.0  # the test DAGs' (tests/airflow/dags/pulsar_transform.py)


@pytest.fixture
def admin(transaction_broker: Any, pulsar_conn: Any, airflow_db: None) -> Iterator[PulsarAdmin]:
    """The default Pulsar connection points at the broker with coordinators; an admin client on it."""
    pulsar_conn(host=transaction_broker.service_url, extra={"admin_url": transaction_broker.web_url})
    with PulsarAdmin(transaction_broker.web_url) as client:
        yield client


def publish(service_url: str, topic: str, values: list[str]) -> None:
    with Client(service_url) as client:
        producer = client.create_producer(topic)
        for index, value in enumerate(values):
            producer.send(value.encode(), partition_key=f"k{index}")
        producer.flush()


def committed_values(service_url: str, topic: str) -> list[str]:
    """Every message a consumer receives on ``topic`` from the start: the committed ones only."""
    values: list[str] = []
    with Client(service_url) as client:
        consumer = client.subscribe(topic, "check", initial_position=InitialPosition.Earliest)
        while True:
            try:
                message = consumer.receive(timeout_millis=3000)
            except exceptions.Timeout:
                return values
            values.append(message.data().decode())
            consumer.acknowledge(message)


def backlog(admin: PulsarAdmin, topic: str, subscription: str) -> int:
    return int(subscription_stats(admin, topic, subscription)["msgBacklog"])


def test_a_run_transforms_each_message_once(transaction_broker: Any, admin: PulsarAdmin, topic_name: str) -> None:
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    inputs = [f"m{i}" for i in range(25)]
    publish(transaction_broker.service_url, source, inputs)

    result = run_dag("pulsar_transform", input=source, output=target, subscription="transform")

    assert result.state == "success", result.states
    summary = result.xcoms["transform"]
    assert (summary["consumed"], summary["produced"]) == (25, 25)
    assert summary["batches"] >= 3  # at most 10 messages a batch
    assert summary["last_consumed_message_ids"].keys() == {f"persistent://public/default/{source}"}
    assert summary["last_produced_message_id"]
    assert Counter(committed_values(transaction_broker.service_url, target)) == Counter(v.upper() for v in inputs)
    wait_until(lambda: backlog(admin, source, "transform") == 0, "the input's backlog to be 0")
    assert admin.topic_stats(target)["committedTxnCount"] == summary["batches"]


def test_a_failing_function_aborts_its_batch_only(transaction_broker: Any, admin: PulsarAdmin, topic_name: str) -> None:
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    inputs = [f"m{i}" for i in range(30)]
    publish(transaction_broker.service_url, source, inputs)

    result = run_dag("pulsar_transform", input=source, output=target, subscription="transform", fail_at="m15")

    assert result.state == "failed"
    outputs = committed_values(transaction_broker.service_url, target)
    # The batches before the failing one are committed; the failing one's outputs (m15's batch
    # began at or before it) are not, and its messages, acknowledged in the aborted transaction,
    # are back in the backlog with every later one.
    assert 0 < len(outputs) <= 15
    assert outputs == [value.upper() for value in inputs[: len(outputs)]]
    wait_until(lambda: backlog(admin, source, "transform") == len(inputs) - len(outputs), "the uncommitted inputs in the backlog")
    stats = admin.topic_stats(target)
    assert (stats["ongoingTxnCount"], stats["abortedTxnCount"]) == (0, 1)


def test_mapped_over_topics_from_a_taskflow_task(transaction_broker: Any, admin: PulsarAdmin, topic_name: str) -> None:
    sources, target = [f"{topic_name}-a", f"{topic_name}-b"], f"{topic_name}-out"
    admin.create_partitioned_topic(sources[0], 3)  # cumulative acknowledgements per partition
    for source in sources:
        publish(transaction_broker.service_url, source, [f"{source[-1]}{i}" for i in range(12)])

    result = run_dag("pulsar_transform_mapped", inputs=sources, output=target, subscription="transform")

    assert result.state == "success", result.states
    expected = Counter(f"{letter}{i}!".upper() for letter in "ab" for i in range(12))
    assert Counter(committed_values(transaction_broker.service_url, target)) == expected
    for source in sources:
        wait_until(lambda source=source: backlog(admin, source, "transform") == 0, f"{source}'s backlog to be 0")


def test_task_killed_mid_batch_and_run_again_publishes_each_output_once(
    transaction_broker: Any, admin: PulsarAdmin, topic_name: str, tmp_path: Path
) -> None:
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    inputs = [f"m{i}" for i in range(30)]
    publish(transaction_broker.service_url, source, inputs)
    marker = tmp_path / "holding"
    conf = {"input": source, "output": target, "subscription": "transform", "hold_at": "m15", "marker": str(marker)}
    moment = datetime(2031, 6, 1, tzinfo=timezone.utc)  # both runs: the same task instance
    log = tmp_path / "child.log"
    child = dag_run_process("pulsar_transform", conf, moment, log)
    try:
        wait_until(lambda: marker.exists() or child.poll() is not None, "the function to hold", timeout=180)
        assert child.poll() is None, log.read_text(errors="replace")[-3000:]
        # Mid-batch: earlier batches committed, this one's first outputs stored in its open
        # transaction (the outputs of m0 to m14 are stored: markers do not count in msgInCounter).
        stats = wait_until(
            lambda: (s := admin.topic_stats(target))["ongoingTxnCount"] == 1 and s["msgInCounter"] == 15 and s,
            "the open transaction's outputs on the output topic",
        )
        committed_before = stats["committedTxnCount"]
        assert committed_before >= 1
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        killed_at = time.monotonic()
    finally:
        child.kill()
        child.wait()

    result = run_dag("pulsar_transform", logical_date=moment, **conf)

    assert result.state == "success", result.states
    summary = result.xcoms["transform"]
    # The retry took every input the dead task had not committed, m15 included, and nothing else.
    assert summary["consumed"] == summary["produced"] < len(inputs)
    outputs = Counter(committed_values(transaction_broker.service_url, target))
    assert outputs == Counter(v.upper() for v in inputs), "each input's output exactly once"
    stats = admin.topic_stats(target)
    assert (stats["ongoingTxnCount"], stats["abortedTxnCount"]) == (0, 1)
    assert stats["committedTxnCount"] == committed_before + summary["batches"]
    wait_until(lambda: backlog(admin, source, "transform") == 0, "the input's backlog to be 0")
    # The dead transaction held its inputs back until its timeout; then the retry went on, and
    # ended after one poll_timeout (the transaction timeout) without messages.
    assert time.monotonic() - killed_at < 2 * TRANSACTION_TIMEOUT + 20


def test_the_docs_example_dag_runs(transaction_broker: Any, admin: PulsarAdmin, tmp_path: Path) -> None:
    for region in ("eu", "us"):
        publish(transaction_broker.service_url, f"orders-{region}", [json.dumps({"order": i}) for i in range(5)])

    results = run_docs_example_dag("exactly_once_orders", transaction_broker, tmp_path / "airflow")

    assert (results["add_tax"]["consumed"], results["add_tax"]["produced"]) == (ORDERS, ORDERS)
    taxed = [json.loads(value) for value in committed_values(transaction_broker.service_url, "orders-taxed")]
    assert sorted(order["order"] for order in taxed) == list(range(ORDERS))
    assert all(order["tax"] == round(order["total"] * 0.2, 2) for order in taxed)
    assert len(committed_values(transaction_broker.service_url, "orders-tagged")) == 10
    wait_until(lambda: backlog(admin, "orders-in", "tax") == 0, "the input's backlog to be 0")


def test_poll_timeout_shorter_than_the_transaction_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match=r"poll_timeout \(5 s\) must be at least transaction_timeout \(30 s\)"):
        PulsarTransformOperator(
            task_id="t", input_topics="in", subscription="s", output_topic="out",
            apply_function=str, poll_timeout=5, transaction_timeout=30,
        )  # fmt: skip


@pytest.mark.embedded_only
def test_a_broker_without_coordinators_fails_the_task_naming_the_setting(broker: Any, pulsar_conn: Any, topic_name: str) -> None:
    pulsar_conn(host=broker.service_url, extra={"admin_url": broker.web_url})
    publish(broker.service_url, topic_name, ["m0"])
    operator = PulsarTransformOperator(
        task_id="transform", input_topics=topic_name, subscription="transform", output_topic=f"{topic_name}-out",
        apply_function=str, transaction_timeout=1,
    )  # fmt: skip

    with pytest.raises(AirflowException, match="transactionCoordinatorEnabled=true.*--transaction-coordinators N"):
        operator.execute({})

    with PulsarAdmin(broker.web_url) as admin:
        assert "transform" not in admin.topic_stats(topic_name)["subscriptions"]  # nothing consumed
