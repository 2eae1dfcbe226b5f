"""A consumer process killed with -9 while holding unacknowledged messages: another consumer of the
subscription receives exactly those, none lost, and none of the acknowledged ones again."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pulsar
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import ConsumerType
from airflow_pulsar.client.exceptions import ConsumerBusy, Timeout
from tests.support import consumer_process

CHILD = Path(consumer_process.__file__)
PARTITIONS = 2
COUNT = 600


def _subscribe_when_free(client: Client, topic: str, consumer_type: ConsumerType) -> Any:
    """Subscribe, waiting while the broker still counts the killed Exclusive consumer."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return client.subscribe(topic, "work", consumer_type=consumer_type, batch_index_ack_enabled=True)
        except ConsumerBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize("consumer_type", [ConsumerType.Shared, ConsumerType.Exclusive], ids=lambda t: t.name)
def test_killed_consumer_hands_its_unacked_messages_to_another(
    broker: BrokerProcess, topic_name: str, consumer_type: ConsumerType
) -> None:
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_partitioned_topic(topic_name, PARTITIONS)
        admin.create_subscription(topic_name, "work")
    payloads = [f"m-{i:05d}" for i in range(COUNT)]
    with Client(broker.service_url, operation_timeout_seconds=10) as client:
        producer = client.create_producer(topic_name, batching_max_messages=10)
        for payload in payloads:
            producer.send_async(payload.encode(), None)
        producer.flush()

        child = subprocess.Popen(
            [sys.executable, str(CHILD), broker.service_url, topic_name, "work", consumer_type.name, str(COUNT)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            line = child.stdout.readline()
            assert line, f"the consumer process exited with {child.wait(10)}"
            report = json.loads(line)
            assert sorted(report["received"]) == payloads
            unacked = sorted(set(payloads) - set(report["acked"]))
            survivor = None
            if consumer_type == ConsumerType.Shared:
                # Joined before the crash, it gets nothing while the other holds every message.
                survivor = _subscribe_when_free(client, topic_name, consumer_type)
                with pytest.raises(Timeout):
                    survivor.receive(300)
        finally:
            child.kill()
            child.wait(10)
        if survivor is None:
            survivor = _subscribe_when_free(client, topic_name, consumer_type)
        got = []
        for _ in unacked:
            message = survivor.receive(10_000)
            got.append(message.data().decode())
            survivor.acknowledge(message)
        with pytest.raises(Timeout):
            extra = survivor.receive(300)
            pytest.fail(f"an acknowledged message came again: {extra.data()!r}")
        survivor.close()
    assert sorted(got) == unacked, "the survivor must get exactly the messages the dead consumer did not acknowledge"

    # The official client, as a second opinion, finds nothing left on the subscription.
    official = pulsar.Client(broker.service_url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        consumer = official.subscribe(topic_name, "work", consumer_type=pulsar.ConsumerType.Shared)
        with pytest.raises(pulsar.Timeout):
            consumer.receive(500)
    finally:
        official.close()
    with PulsarAdmin(broker.web_url) as admin:
        assert admin.backlog(topic_name, "work").msg_backlog == 0
    print(
        f"\nRELIABILITY consumer kill -9 ({consumer_type.name}): {COUNT} received by the killed consumer, "
        f"{len(report['acked'])} acknowledged, {len(unacked)} unacknowledged all received by the survivor, "
        "0 lost, 0 acknowledged ones redelivered"
    )
