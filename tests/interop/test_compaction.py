"""Topic compaction on the module's broker (each test runs on ours and on Apache Pulsar, with the
same calls and the same expected outcome): the admin trigger and status, and what readers and
consumers with ``is_read_compacted`` get, through the official client and ours."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import httpx
import pulsar
import pytest

from airflow_pulsar.client import Client, MessageId
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.exceptions import Timeout
from tests.support.polling import wait_until

pytestmark = pytest.mark.interop

# Sent unbatched, in order; "" is a tombstone (an empty payload), None no key.
BEFORE = [("k1", "a1"), ("k2", "b1"), ("k1", "a2"), ("k3", "c1"), ("k2", ""), (None, "no key")]
# Sent as one batch of three: compaction keeps two of its messages.
BATCH = [("k4", "d1"), ("k4", "d2"), ("k5", "e1")]
# Sent after compaction: past the horizon, read as they are.
AFTER = [("k1", "a3"), ("k2", "b2")]
COMPACTED = [("k1", "a2"), ("k3", "c1"), ("k4", "d2"), ("k5", "e1"), ("k1", "a3"), ("k2", "b2")]
# The official client hands over the message compaction took out of the batch as an empty one
# without a key (ours skips it, as it skips what a batch's ack set marks acknowledged).
OFFICIAL_COMPACTED = [*COMPACTED[:2], ("", ""), *COMPACTED[2:]]
EVERYTHING = [(key or "", value) for key, value in BEFORE + BATCH + AFTER]


@pytest.fixture
def our_client(broker: Any) -> Any:
    client = Client(broker.service_url, operation_timeout_seconds=10)
    yield client
    client.close()


def _send(client: Any, topic: str, messages: list[tuple[str | None, str]], batch: bool = False, **settings: Any) -> None:
    producer = client.create_producer(
        topic, batching_enabled=batch, batching_max_messages=len(messages), batching_max_publish_delay_ms=60_000, **settings
    )
    for key, value in messages:
        if key is None:
            producer.send_async(value.encode(), None)
        else:
            producer.send_async(value.encode(), None, partition_key=key)
    producer.flush()
    producer.close()


def _compact(broker: Any, topic: str) -> dict[str, Any]:
    """Trigger compaction through our admin client and wait for the run to end; its final status."""
    with PulsarAdmin(broker.web_url, timeout_seconds=30) as admin:
        admin.trigger_compaction(topic)
        return wait_until(lambda: (status := admin.compaction_status(topic))["status"] != "RUNNING" and status, "compaction", 30)


def _read_all(read_next: Any) -> list[tuple[str, str]]:
    messages = []
    try:
        while True:
            message = read_next(2000)
            messages.append((message.partition_key(), message.data().decode()))
    except (pulsar.Timeout, Timeout):
        return messages


def _compacted_topic(broker: Any, official: pulsar.Client, topic_name: str, **batch_settings: Any) -> str:
    topic = f"persistent://public/default/{topic_name}"
    _send(official, topic, BEFORE)
    _send(official, topic, BATCH, batch=True, **batch_settings)
    assert _compact(broker, topic) == {"status": "SUCCESS", "lastError": ""}
    _send(official, topic, AFTER)
    return topic


def test_status_before_any_run(broker: Any, official: pulsar.Client, topic_name: str) -> None:
    official.create_producer(topic_name).close()
    response = httpx.get(f"{broker.web_url}/admin/v2/persistent/public/default/{topic_name}/compaction", timeout=30)
    assert (response.status_code, response.json()) == (200, {"status": "NOT_RUN", "lastError": ""})


@pytest.mark.parametrize("compression", [pulsar.CompressionType.NONE, pulsar.CompressionType.LZ4, pulsar.CompressionType.ZSTD])
def test_official_compacted_reader_and_consumer(
    broker: Any, official: pulsar.Client, topic_name: str, compression: pulsar.CompressionType
) -> None:
    """The latest value of each key up to the horizon (tombstoned and keyless messages gone,
    batches thinned, compressed or not), then everything after it; a reader without the flag
    sees every message."""
    topic = _compacted_topic(broker, official, topic_name, compression_type=compression)
    compacted = official.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert _read_all(compacted.read_next) == OFFICIAL_COMPACTED
    consumer = official.subscribe(
        topic, "compacted", is_read_compacted=True, initial_position=pulsar.InitialPosition.Earliest
    )
    assert _read_all(consumer.receive) == OFFICIAL_COMPACTED
    plain = official.create_reader(topic, pulsar.MessageId.earliest)
    assert _read_all(plain.read_next) == EVERYTHING


def test_our_compacted_reader(broker: Any, official: pulsar.Client, our_client: Client, topic_name: str) -> None:
    topic = _compacted_topic(broker, official, topic_name)
    reader = our_client.create_reader(topic, MessageId.earliest, is_read_compacted=True)
    assert _read_all(reader.read_next) == COMPACTED


def test_a_partitioned_topic_is_compacted_partition_by_partition(
    broker: Any, official: pulsar.Client, topic_name: str
) -> None:
    topic = f"persistent://public/default/{topic_name}"
    with PulsarAdmin(broker.web_url, timeout_seconds=30) as admin:
        admin.create_partitioned_topic(topic, 2)
        _send(official, topic, [("k1", "old"), ("k2", "old"), ("k1", "new"), ("k2", "new")])
        admin.trigger_compaction(topic)
        for index in range(2):
            partition = f"{topic}-partition-{index}"
            wait_until(lambda partition=partition: admin.compaction_status(partition)["status"] == "SUCCESS", "compaction", 30)
    reader = official.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert sorted(_read_all(reader.read_next)) == [("k1", "new"), ("k2", "new")]


def test_a_topic_past_its_namespace_threshold_is_compacted(
    broker_kind: str, broker: Any, broker_factory: Any, official_factory: Any, topic_name: str
) -> None:
    """With the namespace's compactionThreshold set, the broker compacts a topic that grew past it
    by itself (its monitor runs every 5 s on the test Pulsar, every 2 s on ours here)."""
    target = broker_factory("--compaction-monitor-interval-seconds", "2") if broker_kind == "embedded" else broker
    namespace = "public/" + topic_name[-50:]
    path = f"{target.web_url}/admin/v2/namespaces/{namespace}/compactionThreshold"
    httpx.put(f"{target.web_url}/admin/v2/namespaces/{namespace}", timeout=30).raise_for_status()
    assert httpx.put(path, json=-1, timeout=30).status_code == 412
    httpx.put(path, json=200, timeout=30).raise_for_status()
    assert httpx.get(path, timeout=30).json() == 200
    topic = f"persistent://{namespace}/prices"
    official = official_factory(target)
    _send(official, topic, [(f"k{index % 4}", f"value {index:02} " + "x" * 40) for index in range(12)])
    with PulsarAdmin(target.web_url, timeout_seconds=30) as admin:
        wait_until(lambda: admin.compaction_status(topic)["status"] == "SUCCESS", "automatic compaction", 30)
    reader = official.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    assert [value[:8] for _, value in _read_all(reader.read_next)] == [f"value {index:02}" for index in range(8, 12)]


def test_the_documented_example(broker: Any, topic_name: str) -> None:
    """docs/examples/broker/compaction.py does what the broker page says."""
    example = runpy.run_path(str(Path(__file__).parents[2] / "docs" / "examples" / "broker" / "compaction.py"))
    topic = f"persistent://public/default/{topic_name}"
    assert example["main"](broker.service_url, broker.web_url, topic) == ["eur=0.93", "usd=1.0"]
