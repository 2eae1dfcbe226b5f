"""A consumer behind a proxy that cuts its connection inside MESSAGE frames (a batch half
delivered) and inside ACK frames (acks lost): it resubscribes, gets the redeliveries, and in the
end every message was received and acknowledged; duplicates are only at-least-once redeliveries."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import ConsumerType, InitialPosition
from airflow_pulsar.client.exceptions import Timeout
from tests.support.fault_proxy import TO_BROKER, TO_CLIENT, FaultProxy, T
from tests.support.polling import wait_until
from tests.support.reliability_checks import stamp

PARTITIONS = 2
COUNT = 5000
CUTS = 40


@pytest.mark.parametrize("consumer_type", [ConsumerType.Exclusive, ConsumerType.Shared], ids=lambda t: t.name)
def test_connections_cut_mid_frame_redeliver_and_lose_nothing(
    broker: BrokerProcess, topic_name: str, consumer_type: ConsumerType
) -> None:
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_partitioned_topic(topic_name, PARTITIONS)
    payloads = {stamp(0, seq) for seq in range(COUNT)}
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic_name, batching_max_messages=20, block_if_queue_full=True)
        for payload in sorted(payloads):
            producer.send_async(payload, None)
        producer.flush()

    with FaultProxy("127.0.0.1", broker.port) as proxy, Client(proxy.service_url, operation_timeout_seconds=15) as client:
        consumer = client.subscribe(
            topic_name,
            "faults",
            consumer_type=consumer_type,
            initial_position=InitialPosition.Earliest,
            receiver_queue_size=100,
            ack_group_time_ms=10,
        )
        received: Counter[bytes] = Counter()
        armed = []
        taken = 0
        while len(received) < COUNT:
            if len(armed) < CUTS and taken >= len(armed) * COUNT // CUTS:
                # Alternate: a batch cut half-way on its way to the consumer, then acks cut on the way back.
                armed.append(proxy.cut_inside(*((TO_CLIENT, T.MESSAGE) if len(armed) % 2 == 0 else (TO_BROKER, T.ACK))))
            message = consumer.receive(20_000)
            received[message.data()] += 1
            consumer.acknowledge(message)
            taken += 1
            if taken % 20 == 0:
                time.sleep(0.002)  # a consumer that works, so acks flow while messages arrive
        proxy.disarm()
        drained = _drain(consumer, received)
        cuts = sum(done.is_set() for done in armed)
        stats = consumer.stats()
        consumer.close()
        connections = proxy.connections
    assert set(received) == payloads
    with PulsarAdmin(broker.web_url) as admin:
        assert admin.backlog(topic_name, "faults").msg_backlog == 0, "some acknowledgements never arrived"
    duplicates = sum(received.values()) - COUNT
    assert cuts >= CUTS // 2, f"only {cuts} cuts landed while consuming"
    print(
        f"\nRELIABILITY consumer faults ({consumer_type.name}): {cuts} connections cut mid-frame (MESSAGE batches "
        f"and ACKs), {connections} connections, {stats.reconnects} resubscribes, {COUNT} messages all received, "
        f"{duplicates} at-least-once redeliveries ({drained} after the last new one), backlog 0 after acks"
    )


def test_a_seek_resubscribes_only_once_the_broker_answered_it(broker: BrokerProcess, topic_name: str) -> None:
    """Pulsar closes the consumer, then answers SEEK once it removed it and reset the cursor. A
    SUBSCRIBE in between, under the same consumer id, is answered "already created" for the dying
    consumer, which then delivers nothing. Our broker removes it at once, so the proxy holds the
    answer back to open that window: the consumer must wait for the answer before resubscribing."""
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic_name, batching_enabled=False)
        for i in range(5):
            producer.send(f"m{i}".encode())
    with FaultProxy("127.0.0.1", broker.port) as proxy, Client(proxy.service_url) as client:
        consumer = client.subscribe(topic_name, "seek", initial_position=InitialPosition.Earliest)
        messages = [consumer.receive(5000) for _ in range(5)]
        subscribes = proxy.forwarded[TO_BROKER, T.SUBSCRIBE]
        proxy.hold(TO_CLIENT, T.SUCCESS)
        seek = threading.Thread(target=consumer.seek, args=(messages[1].message_id(),))
        seek.start()
        wait_until(lambda: proxy.forwarded[TO_CLIENT, T.CLOSE_CONSUMER] == 1)
        time.sleep(1.0)  # several backoff steps of a resubscribe that would not wait
        assert proxy.forwarded[TO_BROKER, T.SUBSCRIBE] == subscribes
        proxy.resume()
        seek.join(10)
        assert not seek.is_alive()
        assert proxy.forwarded[TO_BROKER, T.SUBSCRIBE] == subscribes + 1
        assert consumer.receive(5000).message_id() == messages[2].message_id()


def _drain(consumer: Any, received: Counter[bytes]) -> int:
    """Take (and acknowledge) the redeliveries still coming after every message arrived once."""
    count = 0
    while True:
        try:
            message = consumer.receive(500)
        except Timeout:
            return count
        received[message.data()] += 1
        consumer.acknowledge(message)
        count += 1
