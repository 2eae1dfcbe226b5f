"""Producers behind a proxy that cuts their connection inside SEND frames (batches half written)
and inside SEND_RECEIPT frames (receipts lost): they resend, the broker deduplicates, and every
acknowledged message is stored once, in order."""

from __future__ import annotations

import threading
import time
from typing import Any

from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.client import Client
from tests.support.fault_proxy import TO_BROKER, TO_CLIENT, FaultProxy, T
from tests.support.reliability_checks import SendLog, check_exactly_once_in_order, partition_names, read_all_ours, stamp

PARTITIONS = 3
PRODUCERS = 2
PER_PRODUCER = 3000
CUTS = 40


def test_connections_cut_mid_frame_lose_and_duplicate_nothing(broker_factory: Any, topic_name: str) -> None:
    broker = broker_factory("--dedup")
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_partitioned_topic(topic_name, PARTITIONS)
    log = SendLog()
    total = PRODUCERS * PER_PRODUCER
    with FaultProxy("127.0.0.1", broker.port) as proxy:
        clients = [Client(proxy.service_url, operation_timeout_seconds=15) for _ in range(PRODUCERS)]
        try:
            producers = [
                client.create_producer(
                    topic_name, batching_max_messages=20, block_if_queue_full=True, send_timeout_millis=60_000
                )
                for client in clients
            ]

            def produce(index: int) -> None:
                for seq in range(PER_PRODUCER):
                    payload = stamp(index, seq)
                    producers[index].send_async(payload, log.callback(payload))
                    if seq % 10 == 9:
                        time.sleep(0.005)

            senders = [threading.Thread(target=produce, args=(i,)) for i in range(PRODUCERS)]
            for sender in senders:
                sender.start()
            # Spread over the stream, alternately: a batch cut half-way to the broker, then
            # receipts cut half-way back.
            armed = []
            for cut in range(CUTS):
                if not log.wait_for(cut * total // CUTS, timeout=30):
                    break
                armed.append(proxy.cut_inside(*((TO_BROKER, T.SEND) if cut % 2 == 0 else (TO_CLIENT, T.SEND_RECEIPT))))
            for sender in senders:
                sender.join(60)
            for producer in producers:
                producer.flush()
            proxy.disarm()
            cuts = sum(done.is_set() for done in armed)
            assert not log.failed, f"sends failed: {dict(list(log.failed.items())[:5])}"
            assert len(log.acked) == total
            for producer in producers:
                producer.close()
        finally:
            for client in clients:
                client.close()
        connections = proxy.connections
    assert cuts >= CUTS * 3 // 4, f"only {cuts} cuts landed inside the stream"
    with Client(broker.service_url) as reader_client:
        stored = {name: read_all_ours(reader_client, name) for name in partition_names(topic_name, PARTITIONS)}
    checked = check_exactly_once_in_order(stored, log)
    print(
        f"\nRELIABILITY producer faults: {cuts} connections cut mid-frame (SEND batches and receipts), "
        f"{connections} connections made, {checked} acknowledged messages checked exactly once in order, "
        f"{log.deduplicated()} resends deduplicated by the broker"
    )
