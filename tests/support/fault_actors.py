"""The producer and consumer processes of a fault run, which the run kills with -9 and starts again.

    python -m tests.support.fault_actors producer SERVICE_URL TOPIC INDEX HISTORY DEADLINE RATE BATCHING
    python -m tests.support.fault_actors consumer SERVICE_URL TOPIC SUBSCRIPTION HISTORY RECEIPTS

Each appends its history to HISTORY, one JSON object a line, written through to the file as it
happens so that a kill loses none of it: ``start`` (each process, with its time), then a
producer's ``send``, ``receipt`` (with the message id the broker answered) and ``fail`` per
sequence id, and a consumer's ``recv`` and ``ack`` (with ack receipts: once the broker confirmed it)
or ``ack-failed`` per payload.

The producer is named ``fault-producer-INDEX`` and numbers its messages itself (sequence id = the
payload's sequence), so a restarted one resumes under the same name: from the message after the
last one it holds a receipt for, resending what the killed one sent without a receipt, which
deduplication must not store twice. It sends RATE messages a second, keyed ``k<seq % KEYS>``,
until DEADLINE (a Unix time), then flushes and exits. The consumer receives and acknowledges
until it is killed.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from airflow_pulsar.client import Client, ConsumerType, InitialPosition, Result
from airflow_pulsar.client.exceptions import PulsarException, Timeout
from airflow_pulsar.client.protocol.message_id import MessageId
from tests.support.reliability_checks import stamp

KEYS = 8
# Sends wait out a broker restart (Apache Pulsar's takes up to a minute) rather than fail.
SEND_TIMEOUT_MILLIS = 180_000
RETRY_SECONDS = 0.5
# A connection a partition silenced is closed after two of these without traffic (30 s by default).
KEEPALIVE_SECONDS = 3


class HistoryWriter:
    """Appends JSON lines to a history file, each written through at once; thread-safe."""

    def __init__(self, path: Path):
        self._file = open(path, "a", buffering=1)  # open for the process's life: a kill loses no line
        self._lock = threading.Lock()

    def write(self, event: str, **fields: Any) -> None:
        """One line: ``event``, the time, and ``fields``."""
        line = json.dumps({"ev": event, "t": time.time(), **fields})
        with self._lock:
            self._file.write(line + "\n")


def id_fields(message_id: MessageId) -> list[int]:
    """A message id as [partition, ledger, entry, batch index]."""
    return [message_id.partition(), message_id.ledger_id(), message_id.entry_id(), message_id.batch_index()]


def last_receipted(history: Path) -> int:
    """The highest sequence id the earlier processes of this producer hold a receipt for (-1: none)."""
    if not history.exists():
        return -1
    last = -1
    for line in history.read_text().splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line the kill cut short
        if event["ev"] == "receipt":
            last = max(last, event["seq"])
    return last


def _retry(action: Any, what: str, history: HistoryWriter) -> Any:
    """Call ``action`` until it succeeds: the broker may be down or cut off when a process starts."""
    while True:
        try:
            return action()
        except PulsarException as exc:
            history.write("retry", what=what, error=type(exc).__name__)
            time.sleep(RETRY_SECONDS)


def produce(service_url: str, topic: str, index: int, history_path: Path, deadline: float, rate: float, batching: bool) -> None:
    first = last_receipted(history_path) + 1
    history = HistoryWriter(history_path)
    history.write("start", first=first)
    if time.time() >= deadline:
        return  # restarted after the run's end: what the killed one sent without a receipt may be lost
    client = Client(service_url, operation_timeout_seconds=15, keep_alive_interval_seconds=KEEPALIVE_SECONDS)
    producer = _retry(
        lambda: client.create_producer(
            topic,
            producer_name=f"fault-producer-{index}",
            batching_enabled=batching,
            batching_max_publish_delay_ms=5,
            block_if_queue_full=True,
            max_pending_messages=200,
            send_timeout_millis=SEND_TIMEOUT_MILLIS,
        ),
        "create_producer",
        history,
    )

    def done(seq: int) -> Any:
        def callback(result: Result, message_id: Any) -> None:
            if result is Result.Ok:
                history.write("receipt", seq=seq, id=id_fields(message_id))
            else:
                history.write("fail", seq=seq, result=str(result))

        return callback

    began = time.monotonic()
    seq = first
    while time.time() < deadline:
        history.write("send", seq=seq)
        producer.send_async(stamp(index, seq), done(seq), partition_key=f"k{seq % KEYS}", sequence_id=seq)
        seq += 1
        time.sleep(max(0.0, began + (seq - first) / rate - time.monotonic()))
    producer.flush()
    producer.close()
    client.close()
    history.write("done", last=seq - 1)


def consume(service_url: str, topic: str, subscription: str, history_path: Path, receipts: bool) -> None:
    history = HistoryWriter(history_path)
    history.write("start", receipts=receipts)
    client = Client(service_url, operation_timeout_seconds=15, keep_alive_interval_seconds=KEEPALIVE_SECONDS)
    consumer = _retry(
        lambda: client.subscribe(
            topic,
            subscription,
            consumer_type=ConsumerType.Failover,
            initial_position=InitialPosition.Earliest,
            ack_receipt_enabled=receipts,
        ),
        "subscribe",
        history,
    )
    history.write("subscribed")
    while True:
        try:
            message = consumer.receive(1_000)
        except Timeout:
            continue
        payload = message.data().decode()
        history.write("recv", m=payload, id=id_fields(message.message_id()), redeliveries=message.redelivery_count())
        try:
            consumer.acknowledge(message)  # with receipts: returns once the broker confirmed it
        except PulsarException as exc:
            history.write("ack-failed", m=payload, error=type(exc).__name__)
            continue
        history.write("ack", m=payload)


def main(argv: list[str]) -> None:
    role, service_url, topic, *rest = argv
    if role == "producer":
        index, history, deadline, rate, batching = rest
        produce(service_url, topic, int(index), Path(history), float(deadline), float(rate), batching == "batched")
    elif role == "consumer":
        subscription, history, receipts = rest
        consume(service_url, topic, subscription, Path(history), receipts == "receipts")
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
