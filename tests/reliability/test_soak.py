"""A bounded soak: several producers and consumers (threads, our client) on partitioned topics for
SOAK_SECONDS (20 s here; run the long form with ``SOAK_SECONDS=600 pytest -m soak -s``).

Every acknowledged message is received; a message is received again only when it was negatively
acknowledged or the broker marks it redelivered (at-least-once), and those are counted; the
subscriptions end with no backlog; the RSS of this process and of the broker is sampled: the client's
must stay flat once warmed up, the broker's within its read caches (16 MiB per partition).
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from typing import Any

import pytest

from airflow_pulsar.broker.ledger import DEFAULT_CACHE_BYTES
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.consumer import ConsumerType, InitialPosition
from airflow_pulsar.client.exceptions import Result, Timeout
from tests.support.reliability_checks import MemorySampler, stamp, unstamp

SOAK_SECONDS = float(os.environ.get("SOAK_SECONDS", "20"))
TOPICS = 2
PARTITIONS = 3
PRODUCERS_PER_TOPIC = 2
CONSUMERS_PER_TOPIC = 2
NACK_EVERY = 500
# Growth allowed for this process between the middle and the last third of the run (allocator
# noise). The broker may also fill its read cache of recent entries, bounded per partition.
RSS_SLACK = 24 * 2**20
BROKER_BOUND = TOPICS * PARTITIONS * DEFAULT_CACHE_BYTES + RSS_SLACK

pytestmark = [pytest.mark.soak, pytest.mark.timeout(SOAK_SECONDS + 300)]


class Tally:
    """Per producer, flags of acknowledged sends and counts of receptions (compact, so the test's
    own bookkeeping does not pass for a leak)."""

    def __init__(self, producers: int):
        self._lock = threading.Lock()
        self.acked = [array("B") for _ in range(producers)]
        self.received = [array("B") for _ in range(producers)]
        self.failed = 0
        self.nacked = 0
        self.flagged_redeliveries = 0
        self.unflagged_repeats = 0

    @staticmethod
    def _mark(counts: array, seq: int) -> int:
        if len(counts) <= seq:
            counts.extend(bytes(seq + 1 - len(counts) + 4096))
        counts[seq] = min(counts[seq] + 1, 255)
        return counts[seq]

    def sent(self, producer: int, seq: int) -> Any:
        def done(result: Result, message_id: Any) -> None:
            with self._lock:
                if result is Result.Ok:
                    self._mark(self.acked[producer], seq)
                else:
                    self.failed += 1

        return done

    def got(self, data: bytes, redelivery_count: int) -> None:
        producer, seq = unstamp(data)
        with self._lock:
            if self._mark(self.received[producer], seq) > 1:
                if redelivery_count > 0:
                    self.flagged_redeliveries += 1
                else:
                    self.unflagged_repeats += 1

    def nack(self) -> None:
        with self._lock:
            self.nacked += 1

    def acked_total(self) -> int:
        with self._lock:
            return sum(sum(1 for c in counts if c) for counts in self.acked)

    def missing(self) -> list[tuple[int, int]]:
        """Acknowledged sends never received."""
        with self._lock:
            return [
                (p, seq)
                for p, counts in enumerate(self.acked)
                for seq, flag in enumerate(counts)
                if flag and (seq >= len(self.received[p]) or not self.received[p][seq])
            ]

    def receptions(self) -> tuple[int, int]:
        """(messages received at least once, receptions in all)."""
        with self._lock:
            return sum(sum(1 for c in counts if c) for counts in self.received), sum(sum(c) for c in self.received)


def test_soak_partitioned_topics_lose_nothing_and_stay_flat(broker_factory: Any, topic_name: str) -> None:
    broker = broker_factory()
    topics = [f"{topic_name}-{i}" for i in range(TOPICS)]
    with PulsarAdmin(broker.web_url) as admin:
        for topic in topics:
            admin.create_partitioned_topic(topic, PARTITIONS)
    producers_total = TOPICS * PRODUCERS_PER_TOPIC
    tally = Tally(producers_total)
    stop_producing = threading.Event()
    stop_consuming = threading.Event()
    errors: list[BaseException] = []

    producer_client = Client(broker.service_url, operation_timeout_seconds=30)
    consumer_client = Client(broker.service_url, operation_timeout_seconds=30)
    try:
        consumers = [
            consumer_client.subscribe(
                topic,
                "soak",
                consumer_type=ConsumerType.Shared,
                initial_position=InitialPosition.Earliest,
                negative_ack_redelivery_delay_ms=200,
                batch_index_ack_enabled=True,
                receiver_queue_size=500,
            )
            for topic in topics
            for _ in range(CONSUMERS_PER_TOPIC)
        ]
        producers = [
            producer_client.create_producer(topics[i % TOPICS], block_if_queue_full=True, batching_max_messages=50)
            for i in range(producers_total)
        ]

        def produce(index: int) -> None:
            seq = 0
            try:
                while not stop_producing.is_set():
                    for _ in range(25):
                        producers[index].send_async(stamp(index, seq), tally.sent(index, seq))
                        seq += 1
                    time.sleep(0.01)
                producers[index].flush()
            except BaseException as exc:  # reported by the test
                errors.append(exc)

        def consume(consumer: Any) -> None:
            taken = 0
            try:
                while not stop_consuming.is_set():
                    try:
                        message = consumer.receive(200)
                    except Timeout:
                        continue
                    taken += 1
                    tally.got(message.data(), message.redelivery_count())
                    if taken % NACK_EVERY == 0:
                        tally.nack()
                        consumer.negative_acknowledge(message)
                    else:
                        consumer.acknowledge(message)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=produce, args=(i,), name=f"soak-producer-{i}") for i in range(producers_total)]
        threads += [threading.Thread(target=consume, args=(c,), name="soak-consumer") for c in consumers]
        with MemorySampler({"test process": os.getpid(), "broker": broker.process.pid}) as memory:
            start = time.monotonic()
            for thread in threads:
                thread.start()
            time.sleep(SOAK_SECONDS)
            stop_producing.set()
            for thread in threads[:producers_total]:
                thread.join(60)
            produced_in = time.monotonic() - start
        # Drain: everything acknowledged arrives, and every nack comes back.
        deadline = time.monotonic() + 60
        while tally.missing() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # the last nacks' redelivery delay
        stop_consuming.set()
        for thread in threads[producers_total:]:
            thread.join(30)
        for consumer in consumers:
            consumer.close()
    finally:
        producer_client.close()
        consumer_client.close()

    assert not errors, f"a producer or consumer thread failed: {errors[0]!r}"
    assert tally.failed == 0, f"{tally.failed} sends failed"
    missing = tally.missing()
    assert not missing, f"{len(missing)} acknowledged messages never received, e.g. {missing[:5]}"
    unique, receptions = tally.receptions()
    acked = tally.acked_total()
    assert unique == acked, f"received {unique} distinct messages, {acked} were acknowledged to producers"
    assert tally.unflagged_repeats == 0, f"{tally.unflagged_repeats} messages came again without being redelivered"
    with PulsarAdmin(broker.web_url) as admin:
        backlog = sum(admin.backlog(topic, "soak").msg_backlog for topic in topics)
    assert backlog == 0, f"{backlog} messages left unacknowledged"
    report = []
    for name in ("test process", "broker"):
        middle, last = memory.growth(name)
        report.append(memory.summary(name) + f", growth over the last third {(last - middle) / 2**20:+.1f} MiB")
    middle, last = memory.growth("test process")
    assert last - middle < RSS_SLACK, f"the client's RSS grew from {middle / 2**20:.1f} to {last / 2**20:.1f} MiB"
    broker_rss = memory.samples["broker"]
    assert max(broker_rss) - broker_rss[0] < BROKER_BOUND, "the broker's RSS grew past its entry caches"
    print(
        f"\nRELIABILITY soak {SOAK_SECONDS:.0f} s: {producers_total} producers, {len(consumers)} consumers, "
        f"{TOPICS} topics x {PARTITIONS} partitions: {acked} messages acknowledged ({acked / produced_in:.0f}/s), "
        f"all {unique} received, {receptions - unique} at-least-once redeliveries "
        f"({tally.nacked} nacks, {tally.flagged_redeliveries} flagged redelivered), 0 unflagged repeats, backlog 0"
    )
    for line in report:
        print(f"  {line}")
