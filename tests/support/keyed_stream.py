"""A keyed stream through a cluster topic while a test breaks a part of the cluster, and its history.

One producer (our client) sends ``key:index`` messages at a steady rate while one consumer (our
client) receives and acknowledges them. Once a third of the stream is acknowledged to the
producer, ``disrupt()`` runs (a kill, an unload); once two thirds are, ``recover()`` runs, if
given, and the last third is sent after it returned. The sends wait out an outage rather than
fail. An ``audit`` subscription made before the first send keeps everything the topic stores for
:func:`tally`, which counts from that history what was lost, duplicated or reordered.

With a ``producer_name``, the producer has that name and numbers its messages itself (sequence
id = index), as an application that resumes a stream after a restart does; deduplication keys on
both.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import pulsar

from airflow_pulsar.client import Client, InitialPosition, Result, Timeout
from jvm.pulsar_cluster import PulsarCluster
from tests.support.cluster_topics import official_client, read_subscription

COUNT = 6_000
KEYS = 12
# Sends per second: slow enough that the stream spans the disruption and the reconnect after it.
RATE = 2_000
DEADLINE = 90
AUDIT = "audit"


@dataclass
class StreamHistory:
    """What the producer was told and what the live consumer saw, message by message."""

    failures: list[Result] = field(default_factory=list)
    deliveries: list[str] = field(default_factory=list)
    consumer_reconnects: int = 0
    producer_name: str = ""
    last_sequence_id: int = -1
    disrupted: bool = False
    recovered: bool = False


@dataclass(frozen=True)
class Tally:
    """Counts over a stream's history and what its topic stores, each computed from the messages."""

    sent: int
    failed: int
    stored: int
    lost: int
    stored_twice: int
    stored_out_of_key_order: int
    delivered: int
    undelivered: int
    redelivered: int
    delivered_out_of_key_order: int

    @classmethod
    def exactly_once(cls, count: int, redelivered: int = 0) -> Tally:
        """The figures of a stream of ``count`` messages that every send reached once, stored once each
        in send order per key, all delivered to the consumer (``redelivered`` of them again), the
        first deliveries in send order per key."""
        return cls(count, 0, count, 0, 0, 0, count, 0, redelivered, 0)


def _index(value: str) -> int:
    return int(value.split(":")[1])


def _keys_out_of_order(values: list[str]) -> int:
    """How many keys' indexes do not ascend in ``values`` (each value counted at its first appearance)."""
    by_key: dict[str, list[int]] = defaultdict(list)
    seen: set[str] = set()
    for value in values:
        if value not in seen:
            seen.add(value)
            key, index = value.split(":")
            by_key[key].append(int(index))
    return sum(1 for indexes in by_key.values() if indexes != sorted(indexes))


def tally(history: StreamHistory, stored: list[str], count: int = COUNT) -> Tally:
    """The figures of a stream of ``count`` messages: ``stored`` is everything the topic holds
    (read from the ``audit`` subscription), ``history`` what the producer and consumer were told."""
    sent = set(range(count))
    stored_indexes = [_index(value) for value in stored]
    delivered = {_index(value) for value in history.deliveries}
    return Tally(
        sent=count,
        failed=len(history.failures),
        stored=len(stored),
        lost=len(sent - set(stored_indexes)),
        stored_twice=len(stored_indexes) - len(set(stored_indexes)),
        stored_out_of_key_order=_keys_out_of_order(stored),
        delivered=len(delivered),
        undelivered=len(sent - delivered),
        redelivered=len(history.deliveries) - len(delivered),
        delivered_out_of_key_order=_keys_out_of_order(history.deliveries),
    )


def stored_messages(cluster: PulsarCluster, topic: str, count: int = COUNT) -> list[str]:
    """Everything ``topic`` stores on the ``audit`` subscription, read with the official client: its
    first ``count`` messages, then any more that arrive within a second."""
    values = read_subscription(cluster.service_url, topic, AUDIT, count)
    oracle = official_client(cluster.service_url)
    try:
        audit = oracle.subscribe(topic, AUDIT)
        while True:
            try:
                values.append(audit.receive(timeout_millis=1_000).data().decode())
            except pulsar.Timeout:
                return values
    finally:
        oracle.close()


class KeyedStream:
    """Runs keyed streams through topics of ``cluster``; :meth:`close` closes every client it made."""

    def __init__(self, cluster: PulsarCluster):
        self.cluster = cluster
        self._clients: list[Client] = []

    def __call__(
        self,
        topic: str,
        disrupt: Callable[[], None],
        recover: Callable[[], None] | None = None,
        producer_name: str | None = None,
    ) -> StreamHistory:
        """Stream through ``topic``, breaking the cluster on the way (see the module's docstring);
        returns once every message was acknowledged to the producer and seen by the consumer."""
        history = StreamHistory()
        client = Client(self.cluster.service_url, operation_timeout_seconds=DEADLINE)
        self._clients.append(client)
        client.subscribe(topic, AUDIT, initial_position=InitialPosition.Earliest).close()
        consumer = client.subscribe(topic, "live", initial_position=InitialPosition.Earliest)
        # Sends wait out the outage (a killed broker's session, then recovery) rather than time out on a busy machine.
        producer = client.create_producer(
            topic, producer_name=producer_name, block_if_queue_full=True, send_timeout_millis=DEADLINE * 1000
        )
        history.producer_name = producer.producer_name()
        acked = 0
        lock = threading.Lock()
        third, two_thirds = threading.Event(), threading.Event()

        def sent(outcome: Result, message_id: object) -> None:
            nonlocal acked
            if outcome is not Result.Ok:
                history.failures.append(outcome)
            with lock:
                acked += 1
                if acked == COUNT // 3:
                    third.set()
                elif acked == 2 * COUNT // 3:
                    two_thirds.set()

        def consume() -> None:
            seen: set[str] = set()
            deadline = time.monotonic() + DEADLINE
            while len(seen) < COUNT and time.monotonic() < deadline:
                try:
                    message = consumer.receive(1_000)
                except Timeout:
                    continue
                value = message.data().decode()
                history.deliveries.append(value)
                seen.add(value)
                consumer.acknowledge(message)

        consuming = threading.Thread(target=consume, daemon=True)
        consuming.start()
        started = time.monotonic()
        for i in range(COUNT):
            key = f"key-{i % KEYS}"
            sequence_id = i if producer_name is not None else None
            producer.send_async(f"{key}:{i}".encode(), sent, partition_key=key, sequence_id=sequence_id)
            if not history.disrupted and third.is_set():
                disrupt()
                history.disrupted = True
            if recover is not None and not history.recovered and two_thirds.is_set():
                recover()
                history.recovered = True
                started = time.monotonic() - (i + 1) / RATE  # the rate resumes after the pause
            time.sleep(max(0.0, started + i / RATE - time.monotonic()))
        producer.flush()
        consuming.join(DEADLINE)
        assert history.disrupted, "the stream ended before a third of it was acknowledged"
        assert recover is None or history.recovered, "the stream ended before two thirds of it were acknowledged"
        assert producer.producer_name() == history.producer_name  # deduplication is keyed by it
        history.last_sequence_id = producer.last_sequence_id()
        history.consumer_reconnects = consumer.stats().reconnects
        return history

    def close(self) -> None:
        """Close every client the streams made."""
        for client in self._clients:
            client.close()
