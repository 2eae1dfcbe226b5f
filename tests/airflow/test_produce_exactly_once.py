"""The produce operator in real DAG runs (dag.test()): no losses, no duplicates, on both brokers.

* Default settings publish more messages than a producer's pending queue holds: sends wait for
  room instead of failing (Apache Pulsar acknowledges slowly enough to fill the queue).
* A produce task killed mid-send (SIGKILL of the process running dag.test()) and run again for
  the same task instance (dag.test() at the same logical date: the same run id), or failing
  part-way and retried by Airflow (try 2), leaves each message on the topic once: with
  deduplication on, the broker reports what the earlier try stored under the task instance's
  producer name, and the retry sends only the rest. Deduplication is on in a namespace of the
  test's own: the Pulsar instance is shared by the session, so ``public/default`` keeps its policies.
* Where deduplication is off, the task says so in one warning and still succeeds.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.client import BatchingType, Client, MessageId
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.produce import PulsarProduceOperator
from tests.support.dag_runs import dag_run_process, run_dag
from tests.support.polling import wait_until

PARTITIONS = 3


def read_all(service_url: str, topic: str, partitions: int) -> list[str]:
    """Every message value on the topic (all partitions), read from the start."""
    names = [f"{topic}-partition-{i}" for i in range(partitions)] if partitions else [topic]
    values: list[str] = []
    with Client(service_url) as client:
        for name in names:
            reader = client.create_reader(name, MessageId.earliest)
            while reader.has_message_available():
                values.append(reader.read_next(timeout_millis=10_000).data().decode())
            reader.close()
    return values


def settled_count(service_url: str, topic: str, partitions: int) -> int:
    """How many messages the topic holds once sends in flight at a kill have landed."""
    previous = -1
    while True:
        count = len(read_all(service_url, topic, partitions))
        if count == previous:
            return count
        previous = count
        time.sleep(0.5)


def expected_values(count: int) -> Counter[str]:
    return Counter(f"m{i}" for i in range(count))


@pytest.fixture
def dedup_topic(broker_admin: PulsarAdmin, request: pytest.FixtureRequest) -> str:
    """A partitioned topic in a namespace of the test's own with deduplication on, in force on
    every partition."""
    namespace = f"public/exactly-once-{uuid.uuid4().hex[:10]}"
    broker_admin.create_namespace(namespace)
    broker_admin.set_namespace_deduplication(namespace, True)
    topic = f"persistent://{namespace}/{request.node.originalname}"
    broker_admin.create_partitioned_topic(topic, PARTITIONS)
    for index in range(PARTITIONS):
        partition = f"{topic}-partition-{index}"
        wait_until(
            lambda partition=partition: broker_admin.topic_stats(partition).get("deduplicationStatus") == "Enabled",
            f"deduplication on {partition}",
        )
    return topic


def test_default_settings_publish_more_than_the_pending_queue_holds(
    broker: Any, broker_admin: PulsarAdmin, topic_name: str
) -> None:
    count = 20_000  # 20 times the default max_pending_messages
    topic = f"persistent://public/default/{topic_name}"
    broker_admin.create_partitioned_topic(topic, PARTITIONS)

    result = run_dag("pulsar_produce_default", topic=topic, count=count)

    assert result.state == "success", result.states
    produced = result.xcoms["produce"]
    assert (produced["messages"], produced["already_stored"]) == (count, 0)
    per_partition = [read_all(broker.service_url, f"{topic}-partition-{i}", 0) for i in range(PARTITIONS)]
    assert Counter(value for values in per_partition for value in values) == expected_values(count)
    # Unkeyed messages go round the partitions a batch's worth (1000) at a time.
    assert [len(values) for values in per_partition] == [7000, 7000, 6000]


def test_killed_produce_task_run_again_publishes_each_message_once(
    broker: Any, dedup_topic: str, tmp_path: Path
) -> None:
    count, slow_after = 6000, 3000
    marker = tmp_path / "sending"
    conf = {"topic": dedup_topic, "count": count, "marker": str(marker), "slow_after": slow_after}
    # The same logical date for both runs gives the same run id: the same task instance.
    moment = datetime(2031, 1, 1, tzinfo=timezone.utc)
    log = tmp_path / "child.log"
    child = dag_run_process("pulsar_produce_killed", conf, moment, log)
    try:
        wait_until(lambda: marker.exists() or child.poll() is not None, "the task to start sending", timeout=180)
        assert child.poll() is None, log.read_text(errors="replace")[-3000:]
        # Into the slow half, where a batch is always filling or on its way to the broker.
        time.sleep(0.5)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    before = settled_count(broker.service_url, dedup_topic, PARTITIONS)
    assert 0 < before < count, f"the kill should leave a part on the topic, found {before} of {count}"

    result = run_dag("pulsar_produce_killed", logical_date=moment, **conf)

    assert result.state == "success", result.states
    produced = result.xcoms["produce"]
    assert (produced["messages"], produced["already_stored"]) == (count, before)
    assert Counter(read_all(broker.service_url, dedup_topic, PARTITIONS)) == expected_values(count)


def test_retry_after_a_partial_failure_publishes_each_message_once(
    broker: Any, dedup_topic: str, tmp_path: Path
) -> None:
    count, fail_after = 5000, 2500
    marker = tmp_path / "first-try"
    result = run_dag("pulsar_produce_retried", topic=dedup_topic, count=count, marker=str(marker), fail_after=fail_after)

    assert result.state == "success", result.states
    produced = result.xcoms["produce"]
    # The failed try flushed what it had queued before failing: the retry found those stored.
    assert (produced["messages"], produced["already_stored"]) == (count, fail_after)
    assert Counter(read_all(broker.service_url, dedup_topic, PARTITIONS)) == expected_values(count)


def test_nothing_is_sent_after_a_message_that_failed(broker: Any, broker_admin: PulsarAdmin, topic_name: str) -> None:
    """Later messages stored after a failed one would make a retry skip the failed one for good."""
    result = run_dag("pulsar_produce_too_big", topic=topic_name, count=500, at=200)

    assert result.state == "failed"
    assert Counter(read_all(broker.service_url, f"persistent://public/default/{topic_name}", 0)) == expected_values(200)


def test_deduplication_off_is_one_warning_not_a_failure(
    broker: Any, broker_admin: PulsarAdmin, topic_name: str, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_dag("pulsar_produce_default", topic=topic_name, count=10)

    assert result.state == "success", result.states
    assert result.xcoms["produce"]["messages"] == 10
    # Task logs reach the test's output through Airflow's structlog, not Python's logging.
    warnings = [line for line in capfd.readouterr().out.splitlines() if "Deduplication is" in line]
    assert len(warnings) == 1, warnings
    assert "[warning  ]" in warnings[0]
    assert f"Deduplication is off for {topic_name}: a retry of this task after a partial failure" in warnings[0]
    assert "pulsar-admin namespaces set-deduplication public/default --enable" in warnings[0]


def test_producer_name_is_the_task_instance_s(broker_admin: PulsarAdmin, topic_name: str) -> None:
    first = run_dag("pulsar_produce_default", logical_date=datetime(2032, 1, 1, tzinfo=timezone.utc), topic=topic_name, count=1)
    again = run_dag("pulsar_produce_default", logical_date=datetime(2032, 1, 1, tzinfo=timezone.utc), topic=topic_name, count=1)
    other = run_dag("pulsar_produce_default", logical_date=datetime(2032, 1, 2, tzinfo=timezone.utc), topic=topic_name, count=1)
    names = [run.xcoms["produce"]["producer_name"] for run in (first, again, other)]
    assert names[0] == names[1] != names[2]
    assert names[0].startswith("airflow.pulsar_produce_default.produce.manual__2032-01-01T00_00_00_00_00.")


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"producer_name": "mine"}, "must not set 'producer_name': the operator names its producer"),
        ({"initial_sequence_id": 5}, "must not set 'initial_sequence_id'"),
        ({"block_if_queue_full": False}, "must not set 'block_if_queue_full' to False"),
        ({"skip_full_partitions": True}, "must not set 'skip_full_partitions'"),
        ({"batching_type": "KeyBased"}, "must not set 'batching_type' to KeyBased"),
        ({"batching_type": BatchingType.KeyBased}, "must not set 'batching_type' to KeyBased"),
        ({"send_timeout_millis": 30_000}, "must not set 'send_timeout_millis': the operator sends without a timeout"),
    ],
)
def test_settings_that_defeat_deduplication_fail_at_parse_time(settings: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        PulsarProduceOperator(task_id="p", topic="t", producer_function="pkg.fn", producer_settings=settings)
