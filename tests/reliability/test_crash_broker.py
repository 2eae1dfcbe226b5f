"""The broker killed with -9 under load, and what its restart finds.

Producers sending to a partitioned topic with dedup on: after the restarts every acknowledged
message is stored exactly once, in send order within its partition. A producer and an acking
consumer on one topic: after the restart the entry index has no hole and no entry twice, the
backlog counts agree with the entries, the cursor (mark-delete and individually acked entries)
holds every acknowledgement the broker confirmed, and deduplication knows the last sequence id."""

from __future__ import annotations

import threading
import time
from typing import Any

import pulsar

from airflow_pulsar.client import ConsumerType, InitialPosition
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.exceptions import PulsarException, Timeout
from tests.support.polling import wait_until
from tests.support.reliability_checks import (
    SendLog,
    check_exactly_once_in_order,
    partition_names,
    read_all_official,
    read_all_ours,
    stamp,
    unstamp,
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


SENDS = 3000
UNACKED_EVERY = 5  # the consumer leaves every fifth message unacknowledged: gaps above the mark-delete


def test_broker_killed_under_load_restarts_with_cursor_dedup_and_entry_index_consistent(
    broker_factory: Any, topic_name: str
) -> None:
    broker = broker_factory("--dedup")
    topic = f"persistent://public/default/{topic_name}"
    log = SendLog()
    confirmed: set[bytes] = set()  # acknowledgements the broker answered (ack receipts)
    attempted: set[bytes] = set()  # acknowledgements sent, answered or not (one in flight at the kill may be either)
    killed = threading.Event()
    producing_client = Client(broker.service_url, operation_timeout_seconds=15)
    consuming_client = Client(broker.service_url, operation_timeout_seconds=15)
    try:
        consumer = consuming_client.subscribe(topic, "audit", consumer_type=ConsumerType.Shared, ack_receipt_enabled=True)
        producer = producing_client.create_producer(
            # Unbatched, so that each acknowledgement is an entry's (a batch is acknowledged only as a whole).
            topic, producer_name="steady", batching_enabled=False, block_if_queue_full=True, send_timeout_millis=60_000
        )

        def produce() -> None:
            for seq in range(SENDS):
                producer.send_async(stamp(0, seq), log.callback(stamp(0, seq)))
                if seq % 10 == 9:
                    time.sleep(0.005)

        def consume() -> None:
            while not killed.is_set():
                try:
                    message = consumer.receive(200)
                except Timeout:
                    continue
                if unstamp(message.data())[1] % UNACKED_EVERY:
                    attempted.add(message.data())
                    try:
                        consumer.acknowledge(message)
                    except PulsarException:
                        continue  # not confirmed: may come again
                    confirmed.add(message.data())

        threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
        for thread in threads:
            thread.start()
        assert log.wait_for(SENDS // 3, timeout=60), "the stream stalled"
        wait_until(lambda: len(confirmed) >= 50, "the consumer acknowledging under load", timeout=30)
        broker.kill()
        killed.set()
        unreceipted_at_kill = SENDS - len(log.acked)
        assert unreceipted_at_kill, "the kill came after the producer was done"
        broker.start()
        for thread in threads:
            thread.join(60)
        producer.flush()
        assert not log.failed and len(log.acked) == SENDS
        consumer.close()
        producer.close()

        # The entry index: dense entry ids, each message once, the counts agreeing.
        stored = read_all_ours(producing_client, topic)
        entries = sorted({message_id.entry_id() for _, message_id in stored})
        assert entries == list(range(len(entries))), "a hole or a repeated entry id"
        check_exactly_once_in_order({topic: stored}, log)
        assert len(stored) == SENDS
        with PulsarAdmin(broker.web_url) as admin:
            admin.create_subscription(topic_name, "recount", InitialPosition.Earliest)
            assert admin.topic_stats(topic_name)["subscriptions"]["recount"]["msgBacklog"] == len(entries)
            assert admin.message_backlog(topic_name, "recount").messages == SENDS

            # The cursor: nothing the broker confirmed comes again; everything else does.
            backlog_entries = admin.topic_stats(topic_name)["subscriptions"]["audit"]["msgBacklog"]
        again = consuming_client.subscribe(topic, "audit", consumer_type=ConsumerType.Shared)
        redelivered: dict[bytes, int] = {}
        try:
            while True:
                message = again.receive(2000)
                redelivered[message.data()] = message.message_id().entry_id()
        except Timeout:
            pass
        again.close()
        assert not confirmed & set(redelivered), "a confirmed acknowledgement was lost in the crash"
        everything = {data for data, _ in stored}
        assert everything - attempted <= set(redelivered), "a message never acknowledged was not delivered again"
        assert set(redelivered) <= everything - confirmed
        assert len(set(redelivered.values())) == backlog_entries, "the backlog disagrees with the restored cursor"
    finally:
        killed.set()
        producing_client.close()
        consuming_client.close()

    # Deduplication: the official client, under the same producer name, is told the last sequence id,
    # and a resend of an old one is recognised, not stored.
    official = pulsar.Client(broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        resender = official.create_producer(topic, producer_name="steady", batching_enabled=False)
        assert resender.last_sequence_id() == SENDS - 1
        duplicate = resender.send(stamp(0, SENDS - 1), sequence_id=SENDS - 1)
        assert (duplicate.ledger_id(), duplicate.entry_id()) == (-1, -1)
        resender.close()
    finally:
        official.close()
    assert len(read_all_official(broker.service_url, topic)) == SENDS
    print(
        f"\nRELIABILITY broker kill -9 under load: {unreceipted_at_kill} sends without a receipt at the kill, "
        f"{log.deduplicated()} resends deduplicated; {len(entries)} entries dense, {len(confirmed)} confirmed acks kept, "
        f"{len(redelivered)} unacknowledged messages delivered again over {backlog_entries} backlog entries "
        f"({len(attempted - confirmed)} acknowledgements unanswered at the kill)"
    )
