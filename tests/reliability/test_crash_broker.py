"""The broker killed with -9 while producers send to a partitioned topic with dedup on: after the
restarts every acknowledged message is stored exactly once, in send order within its partition."""

from __future__ import annotations

import threading
import time
from typing import Any

from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.client import Client
from tests.support.reliability_checks import (
    SendLog,
    check_exactly_once_in_order,
    partition_names,
    read_all_official,
    read_all_ours,
    stamp,
)

PARTITIONS = 4
PRODUCERS = 3
PER_PRODUCER = 2500
CRASHES = 3


def test_broker_killed_mid_stream_keeps_acked_messages_once_in_order(broker_factory: Any, topic_name: str) -> None:
    broker = broker_factory("--dedup")
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_partitioned_topic(topic_name, PARTITIONS)
    log = SendLog()
    total = PRODUCERS * PER_PRODUCER
    # One client per producer: separate connections that each notice the crash and reconnect.
    clients = [Client(broker.service_url, operation_timeout_seconds=15) for _ in range(PRODUCERS)]
    try:
        producers = [
            client.create_producer(
                topic_name,
                batching_max_messages=25,
                block_if_queue_full=True,
                max_pending_messages=100,  # at most 1 200 in flight: each kill lands before the last send
                send_timeout_millis=60_000,
            )
            for client in clients
        ]

        sent = [0] * PRODUCERS

        def produce(index: int) -> None:
            for seq in range(PER_PRODUCER):
                payload = stamp(index, seq)
                producers[index].send_async(payload, log.callback(payload))
                sent[index] = seq + 1
                if seq % 10 == 9:
                    time.sleep(0.01)  # a steady stream, so the crashes land in its middle

        senders = [threading.Thread(target=produce, args=(i,)) for i in range(PRODUCERS)]
        for sender in senders:
            sender.start()
        in_flight = []
        for crash in range(1, CRASHES + 1):
            assert log.wait_for(total * crash // (CRASHES + 1), timeout=60), f"stream stalled before crash {crash}"
            broker.kill()
            assert sum(sent) < total, "the crash came after the producers were done"
            in_flight.append(sum(sent) - len(log.acked))
            broker.start()
        for sender in senders:
            sender.join(60)
        for producer in producers:
            producer.flush()
        assert not log.failed, f"sends failed: {dict(list(log.failed.items())[:5])}"
        assert len(log.acked) == total
        for producer in producers:
            assert producer.is_connected()
            producer.close()
        stored = {name: read_all_ours(clients[0], name) for name in partition_names(topic_name, PARTITIONS)}
    finally:
        for client in clients:
            client.close()
    checked = check_exactly_once_in_order(stored, log)
    # The official client reads the same partitions back identically.
    for name, messages in stored.items():
        assert read_all_official(broker.service_url, name) == [data for data, _ in messages]
    print(
        f"\nRELIABILITY broker kill -9: {CRASHES} crashes, {PRODUCERS} producers x {PARTITIONS} partitions, "
        f"{checked} acknowledged messages checked exactly once in order "
        f"({'+'.join(map(str, in_flight))} unacknowledged at the kills), "
        f"{log.deduplicated()} resends deduplicated by the broker"
    )
