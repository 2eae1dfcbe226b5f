"""Reconnect and resend: a broker killed with -9 mid-stream, dedup on, loses and duplicates nothing."""

from __future__ import annotations

import threading
import time
from typing import Any

import pulsar

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.exceptions import Result


def test_kill_9_mid_stream_keeps_every_message_exactly_once(broker_factory: Any, topic_name: str) -> None:
    broker = broker_factory("--dedup")
    count = 3000
    results: list[Any] = [None] * count
    acked = threading.Semaphore(0)
    with Client(broker.service_url, operation_timeout_seconds=10) as client:
        producer = client.create_producer(
            topic_name, block_if_queue_full=True, batching_max_messages=50, send_timeout_millis=20_000
        )

        def record(i: int) -> Any:
            def callback(result: Result, message_id: Any) -> None:
                results[i] = result
                acked.release()

            return callback

        def produce() -> None:
            for i in range(count):
                producer.send_async(b"msg-%05d" % i, record(i))
                if i % 100 == 99:
                    time.sleep(0.005)  # spread the stream so the crash lands in its middle

        sender = threading.Thread(target=produce)
        sender.start()
        for _ in range(800):
            assert acked.acquire(timeout=10)
        broker.restart(crash=True)
        sender.join(30)
        producer.flush()
        assert results == [Result.Ok] * count
        assert producer.is_connected() and producer.last_sequence_id() == count - 1
        producer.close()

    official = pulsar.Client(broker.service_url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        reader = official.create_reader(topic_name, pulsar.MessageId.earliest)
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(5000).data())
        assert got == [b"msg-%05d" % i for i in range(count)]
    finally:
        official.close()
