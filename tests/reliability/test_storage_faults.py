"""Writes failing on the broker's storage while producers send and consumers read, as on a full disk
or a failing one: injected through the broker's test-only fault switch (disk full, I/O error) and
for real, with a database capped by --max-storage-size filling up.

What Pulsar does when BookKeeper writes fail, the broker does: the failed entry's SEND is answered
with SEND_ERROR PersistenceError after CLOSE_PRODUCER, the topic is fenced until its writes in
flight have settled, and clients reconnect and resend. No send gets a receipt while writes fail,
every receipt given is a stored message, stored once, in order; consumers of this topic and of
others keep reading what is stored, on their connections; once writes succeed again the pending
sends complete without a broker restart, the resends deduplicated.

Embedded only (``broker_factory``): faults are injected into, and the database capped on, our broker.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.broker.storage_faults import StorageFault, StorageFaultSwitch
from airflow_pulsar.client import InitialPosition, MessageId
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.exceptions import Timeout
from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.checksum import crc32c
from airflow_pulsar.client.protocol.frames import encode_command, encode_entry, encode_payload_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, MessageMetadata, ServerError
from tests.support.either_producer import EitherProducer
from tests.support.polling import wait_until
from tests.support.raw_connection import RawConnection
from tests.support.reliability_checks import SendLog, check_exactly_once_in_order, read_all_official, read_all_ours, stamp

T = BaseCommand.Type
BEFORE = 300  # sent and stored before writes fail
DURING = 300  # sent while writes fail: stored once they succeed again
OTHER = 100  # on another topic, stored before
FAILING_SECONDS = 3.0
PADDING = b"." * 4000


def full(topic: str) -> str:
    return f"persistent://public/default/{topic}"


def send_by_hand_and_expect_persistence_error(broker: Any, topic: str) -> str:
    """While writes fail: a producer on a new topic gets ERROR PersistenceError (the topic cannot be
    stored); on an existing topic, a SEND gets CLOSE_PRODUCER, then SEND_ERROR PersistenceError, as
    with Pulsar on a failed BookKeeper write. Returns the SEND_ERROR's message."""
    connection = RawConnection(broker)
    try:
        connection.handshake()
        connection.send(encode_command(commands.make(T.PRODUCER, topic=full(topic + "-new"), producer_id=2, request_id=2)))
        refused = connection.reply(T.ERROR).error
        assert (refused.request_id, refused.error) == (2, ServerError.PersistenceError)
        connection.request(T.PRODUCER, T.PRODUCER_SUCCESS, topic=full(topic), producer_id=1, request_id=1)
        entry = encode_entry(MessageMetadata(producer_name="raw", sequence_id=0, publish_time=1), b"payload")
        send = commands.make(T.SEND, producer_id=1, sequence_id=0)
        connection.send(encode_payload_command(send, entry, checksum=crc32c(entry)))
        replies = connection.replies_until(T.SEND_ERROR)
        assert [reply.type for reply in replies] == [T.CLOSE_PRODUCER, T.SEND_ERROR]
        error = replies[-1].send_error
        assert (error.producer_id, error.sequence_id, error.error) == (1, 0, ServerError.PersistenceError)
        return str(error.message)
    finally:
        connection.close()


def consumer_addresses(broker: Any, topic: str) -> list[tuple[str, str]]:
    """(address, connectedSince) of each consumer of the topic's subscriptions: a reconnect changes them."""
    subscriptions = broker.topic_stats(topic)["subscriptions"]
    return sorted((c["address"], c["connectedSince"]) for s in subscriptions.values() for c in s["consumers"])


def receive_stamped(consumer: Any, count: int) -> list[bytes]:
    got = []
    for _ in range(count):
        message = consumer.receive(15_000)
        consumer.acknowledge(message)
        got.append(message.data())
    return got


@pytest.mark.parametrize(("kind", "fault"), [("ours", StorageFault.IO_ERROR), ("official", StorageFault.DISK_FULL)])
def test_failed_commits_give_no_receipt_lose_nothing_and_recover_without_restart(
    broker_factory: Any, topic_name: str, tmp_path: Path, kind: str, fault: StorageFault
) -> None:
    switch = StorageFaultSwitch(tmp_path / "storage-fault")
    broker = broker_factory("--dedup", "--test-storage-fault-file", str(switch.path))
    other = f"{topic_name}-other"
    log = SendLog()
    watcher = Client(broker.service_url, operation_timeout_seconds=15)
    producer = None
    try:
        seeding = watcher.create_producer(other)
        for seq in range(OTHER):
            seeding.send(stamp(9, seq))
        seeding.close()
        watch = watcher.subscribe(topic_name, "watch")
        watcher.create_producer(f"{topic_name}-raw").close()  # the raw producer's topic exists
        watch_other = watcher.subscribe(other, "watch", initial_position=InitialPosition.Earliest)
        producer = EitherProducer(kind, broker.service_url, topic_name, log, producer_name="steady")
        # A consumer on the producer's own client (its connection), of a topic nothing is sent to.
        bystander_topic = f"{topic_name}-bystander"
        producer.client.subscribe(bystander_topic, "bystander")
        for seq in range(BEFORE):
            producer.send_async(stamp(0, seq))
        producer.flush()
        assert len(log.acked) == BEFORE and not log.failed
        assert receive_stamped(watch, BEFORE) == [stamp(0, seq) for seq in range(BEFORE)]
        assert receive_stamped(watch_other, OTHER // 2) == [stamp(9, seq) for seq in range(OTHER // 2)]
        connected = consumer_addresses(broker, topic_name), consumer_addresses(broker, other)
        bystander = consumer_addresses(broker, bystander_topic)

        switch.switch(fault)
        message = send_by_hand_and_expect_persistence_error(broker, f"{topic_name}-raw")
        assert fault.message in message
        for seq in range(BEFORE, BEFORE + DURING):
            producer.send_async(stamp(0, seq))
        # The other topic's consumer keeps reading what was stored (its acks are not saved meanwhile).
        assert receive_stamped(watch_other, OTHER - OTHER // 2) == [stamp(9, seq) for seq in range(OTHER // 2, OTHER)]
        time.sleep(FAILING_SECONDS)
        assert len(log.acked) == BEFORE, "a receipt for a send while every write fails"
        assert not log.failed, f"sends failed outright: {dict(list(log.failed.items())[:3])}"
        assert broker.topic_stats(topic_name)["msgInCounter"] == BEFORE
        with pytest.raises(Timeout):
            watch.receive(500)  # nothing new was stored

        switch.switch(None)  # space returns: no restart
        assert log.wait_for(BEFORE + DURING, timeout=90), f"{len(log.acked)} of {BEFORE + DURING} sends completed"
        assert not log.failed, f"sends failed: {dict(list(log.failed.items())[:3])}"
        assert receive_stamped(watch, DURING) == [stamp(0, seq) for seq in range(BEFORE, BEFORE + DURING)]
        with pytest.raises(Timeout):
            watch.receive(500)  # delivered once
        assert (consumer_addresses(broker, topic_name), consumer_addresses(broker, other)) == connected, "a consumer reconnected"
        # Ours keeps the connection (the broker closed the producer before its SEND_ERROR came); the
        # official client closes its connection on any SEND_ERROR but ChecksumError: its consumer resubscribes.
        rejoined = wait_until(lambda: consumer_addresses(broker, bystander_topic), "the bystander consumer")
        assert (rejoined != bystander) == (kind == "official")
        stored = {topic_name: read_all_ours(watcher, full(topic_name))}
    finally:
        if producer is not None:
            producer.close()
        watcher.close()
    checked = check_exactly_once_in_order(stored, log)
    assert [data for data, _ in stored[topic_name]] == read_all_official(broker.service_url, full(topic_name))
    print(
        f"\nRELIABILITY storage fault {fault.value} ({kind} producer): {checked} acknowledged messages stored once in "
        f"order, none of {DURING} sent during {FAILING_SECONDS:g} s of failing writes receipted before recovery; "
        f"{log.deduplicated()} resends deduplicated"
    )


def padded(payload: bytes) -> bytes:
    """A stamped payload padded to a size that no longer fits a full database."""
    return payload + PADDING


def unpadded(log: SendLog, stored: list[tuple[bytes, Any]]) -> tuple[SendLog, list[tuple[bytes, Any]]]:
    """The log and the stored messages with the padding taken off, for the exactly-once check."""
    plain = SendLog(acked={data.removesuffix(PADDING): m for data, m in log.acked.items()})
    return plain, [(data.removesuffix(PADDING), message_id) for data, message_id in stored]


@pytest.mark.parametrize("kind", ["ours", "official"])
def test_a_full_database_refuses_sends_until_a_deleted_topic_frees_space(broker_factory: Any, topic_name: str, kind: str) -> None:
    broker = broker_factory("--dedup", "--max-storage-size", str(2 * 1024 * 1024))
    filler_topic = f"{topic_name}-filler"
    filled, log = SendLog(), SendLog()
    reader_client = Client(broker.service_url, operation_timeout_seconds=15)
    unbatched = {"batching_enabled": False, "send_timeout_millis": 3000}
    filler = EitherProducer("ours", broker.service_url, filler_topic, filled, **unbatched)
    producer = None
    try:
        watch_filler = reader_client.subscribe(filler_topic, "watch")
        seq = 0
        while not filled.failed:  # fill fast, until a group of sends no longer fits
            for _ in range(50):
                filler.send_async(padded(stamp(1, seq)))
                seq += 1
            filler.flush()
        while True:  # then one at a time, until a single message no longer fits
            try:
                filler.producer.send(padded(stamp(1, seq)))
            except Timeout:
                break
            seq += 1
        filler.close()
        stored_filler = reader_client.create_reader(filler_topic, MessageId.earliest)
        count = 0
        while stored_filler.has_message_available():
            stored_filler.read_next(10_000)
            count += 1
        stored_filler.close()
        assert count >= len(filled.acked) > 100
        waiting = unbatched | {"send_timeout_millis": 120_000}
        producer = EitherProducer(kind, broker.service_url, topic_name, log, producer_name="steady", **waiting)
        for seq in range(DURING):
            producer.send_async(padded(stamp(0, seq)))
        # The filler topic's consumer reads every stored message while the database is full.
        got = [watch_filler.receive(15_000).data() for _ in range(count)]
        assert len(set(got)) == count
        time.sleep(FAILING_SECONDS)
        assert not log.acked and not log.failed, "a send completed while the database was full"
        watch_filler.close()

        def freed() -> bool:  # the delete may share a failing group with the resends: try again
            try:
                with PulsarAdmin(broker.web_url) as admin:
                    admin.delete_topic(filler_topic, force=True)
                return True
            except Exception:
                return False

        wait_until(freed, "the filler topic deleted", timeout=30)
        assert log.wait_for(DURING, timeout=90), f"{len(log.acked)} of {DURING} sends completed after space returned"
        assert not log.failed
        plain_log, stored = unpadded(log, read_all_ours(reader_client, full(topic_name)))
    finally:
        if producer is not None:
            producer.close()
        reader_client.close()
    checked = check_exactly_once_in_order({topic_name: stored}, plain_log)
    print(
        f"\nRELIABILITY full database ({kind} producer): {count} filler messages of {len(PADDING)} bytes filled 2 MiB; "
        f"{checked} sends waited and were stored once in order after the filler topic was deleted"
    )


def test_the_full_disk_example_waits_then_stores_every_order_once(broker_factory: Any, topic_name: str) -> None:
    broker = broker_factory("--dedup", "--max-storage-size", str(1024 * 1024))
    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "reliability" / "full_disk_producer.py"
    env = os.environ | {"PULSAR_SERVICE_URL": broker.service_url, "PULSAR_WEB_URL": broker.web_url, "PULSAR_TOPIC": topic_name}
    run = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    orders = ", ".join(f"order-{n}" for n in range(10))
    expected = rf"filled with \d+ messages; 0 receipts while full; after freeing: 10 receipts, all ok; stored: {orders}\n"
    assert re.fullmatch(expected, run.stdout), run.stdout
