"""Abusive clients are held off: the broker's memory stays bounded and a well-behaved client keeps
being served while raw connections do what no client library would.

- a consumer grants 2^31-1 permits on a backlog of BACKLOG_MIB MiB and never reads: dispatch
  stops once its socket backs up (the write buffer's high water mark), so the broker's RSS
  does not grow with the backlog;
- a producer floods SENDs and never reads its receipts: past 1000 pending sends, and then once
  its receipts back up, the broker stops reading it, so it cannot send on and RSS stays bounded;
- 1,000 connections trickle one byte at a time and never complete a frame: each is closed after
  the keepalive interval (before CONNECT: the handshake timeout), and the broker stays responsive.

Each test asserts bounds, not times: RSS growth in MiB (from /proc/PID/status), and the
well-behaved client's median round trip within a factor of its median without the abuser. On
the embedded broker only: they measure its process, and they need short keepalive intervals.
"""

from __future__ import annotations

import re
import selectors
import socket
import statistics
import struct
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client, ConsumerType, InitialPosition
from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.frames import encode_command, encode_entry, encode_payload_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, MessageMetadata, ServerError
from airflow_pulsar.client.protocol.wire import U64_MASK
from tests.support.polling import wait_until
from tests.support.raw_connection import RawConnection
from tests.support.reliability_checks import MemorySampler, rss_bytes

T = BaseCommand.Type
MIB = 2**20
BACKLOG_MIB = 150
ENTRY_BYTES = 100 * 1024
MAX_PERMITS = 2**31 - 1
# How much a well-behaved client's median round trip may grow while an abuser is at work: the
# broker is one event loop on a 2-core machine shared with the abuser and the test itself.
LATENCY_FACTOR = 10
# Round trips below this are noise on a busy machine: the factor applies above it.
LATENCY_FLOOR_SECONDS = 0.05
ROUND_TRIPS = 30
# What a flooding producer may write before the broker stops reading it: the sockets' buffers on
# both sides and the receipts of the sends read meanwhile (measured: 11 MiB of 53-byte SENDs).
FLOOD_CAP = 64 * MIB
# The broker's RSS growth with the ~170,000 tiny entries stored by then: the ledger's 16 MiB tail
# cache with its objects, SQLite's page caches and the allocator's arenas (measured: +44 MiB, and
# +43 MiB with 300,000 entries stored by a producer that does read its receipts: it levels off).
STORED_FLOOD_RSS = 64 * MIB


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    # A short keepalive so that the trickling connections are closed within the test.
    process = BrokerProcess(tmp_path / "data", "--no-fsync", "--keep-alive-interval-seconds", "2").start()
    try:
        yield process
    finally:
        process.stop()


def round_trip_median(client: Client, topic: str) -> float:
    """Median seconds of ROUND_TRIPS sends each received back and acknowledged."""
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "probe", receiver_queue_size=10)
    times = []
    for i in range(ROUND_TRIPS):
        started = time.perf_counter()
        producer.send(b"probe-%d" % i)
        message = consumer.receive(30_000)
        consumer.acknowledge(message)
        times.append(time.perf_counter() - started)
        assert message.data() == b"probe-%d" % i
    producer.close()
    consumer.close()
    return statistics.median(times)


def assert_still_served(before: float, during: float) -> None:
    assert during <= max(before, LATENCY_FLOOR_SECONDS) * LATENCY_FACTOR, (
        f"median round trip {during * 1000:.1f} ms with the abuser, {before * 1000:.1f} ms without"
    )


BACKLOG_ENTRIES = BACKLOG_MIB * MIB // ENTRY_BYTES


def fill_backlog(broker: BrokerProcess, topic: str) -> None:
    """BACKLOG_MIB MiB of ENTRY_BYTES entries, stored by the broker."""
    with Client(broker.service_url) as client:
        producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=200, block_if_queue_full=True)
        payload = b"x" * ENTRY_BYTES
        for _ in range(BACKLOG_ENTRIES):
            producer.send_async(payload, None)
        producer.flush()
    assert stats_counter(broker, topic, "msgInCounter") == BACKLOG_ENTRIES


def stats_counter(broker: BrokerProcess, topic: str, field: str) -> int:
    stats = broker.topic_stats(topic)
    return int(stats[field] if field in stats else stats["subscriptions"]["sub"][field])


def settled(broker: BrokerProcess, topic: str, field: str, quiet: float = 1.5) -> int:
    """A stats counter once it stopped moving for ``quiet`` seconds."""
    last, since = stats_counter(broker, topic, field), time.monotonic()
    deadline = since + 60
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = stats_counter(broker, topic, field)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return now
    raise AssertionError(f"{field} of {topic} kept moving for a minute")


def test_a_consumer_that_never_reads_does_not_make_the_broker_buffer_its_backlog(broker: BrokerProcess) -> None:
    fill_backlog(broker, "backlog")
    with Client(broker.service_url) as client:
        quiet_latency = round_trip_median(client, "probe-backlog")
        baseline = rss_bytes(broker.process.pid)  # type: ignore[union-attr]
        greedy = RawConnection(broker)
        greedy.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        greedy.handshake()
        greedy.request(
            T.SUBSCRIBE, T.SUCCESS, topic="persistent://public/default/backlog", subscription="sub",
            subType=0, consumer_id=1, request_id=1, initialPosition=1,
        )  # fmt: skip
        with MemorySampler({"broker": broker.process.pid}, interval=0.2) as memory:  # type: ignore[union-attr]
            greedy.send(encode_command(commands.make(T.FLOW, consumer_id=1, messagePermits=MAX_PERMITS)))
            delivered = settled(broker, "backlog", "msgOutCounter")
            busy_latency = round_trip_median(client, "probe-backlog")
        greedy.close()
    backlog = BACKLOG_ENTRIES
    growth = max(memory.samples["broker"]) - baseline
    print(
        f"\ngreedy consumer: {delivered} of {backlog} entries sent; broker RSS {baseline / MIB:.0f} MiB before, "
        f"peak +{growth / MIB:.1f} MiB; round trip median {quiet_latency * 1000:.1f} ms alone, "
        f"{busy_latency * 1000:.1f} ms beside it"
    )
    assert delivered < backlog / 4, "dispatch went on into a socket nobody reads"
    # One read block of entries in flight (100 of 100 KiB) and the buffers' high water marks.
    assert growth < 40 * MIB, memory.summary("broker")
    assert_still_served(quiet_latency, busy_latency)


def test_a_producer_that_never_reads_its_receipts_is_not_read(broker: BrokerProcess) -> None:
    with Client(broker.service_url) as client:
        quiet_latency = round_trip_median(client, "probe-flood")
        baseline = rss_bytes(broker.process.pid)  # type: ignore[union-attr]
        flooder = RawConnection(broker)
        flooder.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        flooder.handshake()
        flooder.request(T.PRODUCER, T.PRODUCER_SUCCESS, topic="persistent://public/default/flood", producer_id=1, request_id=1)
        metadata = MessageMetadata(producer_name="flooder", sequence_id=0, publish_time=int(time.time() * 1000))
        send = encode_payload_command(commands.make(T.SEND, producer_id=1, sequence_id=0, num_messages=1), encode_entry(metadata, b"m"))
        flooder.sock.settimeout(3)
        sent = 0
        with MemorySampler({"broker": broker.process.pid}, interval=0.2) as memory:  # type: ignore[union-attr]
            try:
                while sent < FLOOD_CAP:
                    flooder.sock.sendall(send * 1000)
                    sent += len(send) * 1000
            except TimeoutError:
                pass  # the broker stopped reading: the socket's buffers are full
            stored = settled(broker, "flood", "msgInCounter")
            busy_latency = round_trip_median(client, "probe-flood")
        flooder.close()
    growth = max(memory.samples["broker"]) - baseline
    print(
        f"\nflooding producer: {sent / MIB:.1f} MiB of SENDs written, {stored} stored before the broker stopped "
        f"reading; broker RSS peak +{growth / MIB:.1f} MiB; round trip median {quiet_latency * 1000:.1f} ms alone, "
        f"{busy_latency * 1000:.1f} ms beside it"
    )
    assert sent < FLOOD_CAP, "the broker read on while its receipts went unread"
    assert growth < STORED_FLOOD_RSS, memory.summary("broker")
    assert_still_served(quiet_latency, busy_latency)


def test_trickling_connections_are_closed_and_the_broker_stays_responsive(broker: BrokerProcess) -> None:
    with Client(broker.service_url) as client:
        quiet_latency = round_trip_median(client, "probe-trickle")
        # A tenth complete CONNECT first, then trickle like the rest: connected, they are closed
        # for sending no whole frame, the others for never completing CONNECT.
        connect = encode_command(commands.make(T.CONNECT, client_version="trickler", protocol_version=20))
        tricklers = []
        for index in range(1000):
            tricklers.append(socket.create_connection(("127.0.0.1", broker.port), timeout=5))
            if index < 100:
                tricklers[-1].sendall(connect)
        frame_start = struct.pack(">I", 60_000)  # a frame that never completes
        selector = selectors.DefaultSelector()
        for sock in tricklers:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        open_ = set(tricklers)
        step = 0
        started = time.monotonic()
        busy_latency = None
        while open_ and time.monotonic() - started < 60:
            for sock in list(open_):
                try:
                    sock.send(frame_start[step % 4 : step % 4 + 1] if step < 4 else b"\0")
                except OSError:
                    open_.discard(sock)
            step += 1
            for key, _ in selector.select(timeout=0.25):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    while sock.recv(65536):
                        pass
                except BlockingIOError:
                    continue
                except OSError:
                    pass
                open_.discard(sock)
                selector.unregister(sock)
            if busy_latency is None:
                busy_latency = round_trip_median(client, "probe-trickle")
        closed_after = time.monotonic() - started
        for sock in tricklers:
            sock.close()
        selector.close()
        after_latency = round_trip_median(client, "probe-trickle")
    reasons = Counter(re.findall(r"closing connection from \S+: (.*)", broker.log_path.read_text()))
    print(
        f"\n1000 trickling connections closed by the broker within {closed_after:.1f} s (keepalive 2 s); round trip "
        f"median {quiet_latency * 1000:.1f} ms alone, {busy_latency * 1000 if busy_latency else 0:.1f} ms beside them"
    )
    assert not open_, f"{len(open_)} trickling connections still open after a minute"
    assert reasons == {"no CONNECT within 2 s": 900, "no frame for 4 s": 100}, reasons
    assert busy_latency is not None
    assert_still_served(quiet_latency, busy_latency)
    assert_still_served(quiet_latency, after_latency)


def test_a_large_frame_before_connect_is_refused_at_its_size(broker: BrokerProcess) -> None:
    raw = RawConnection(broker)
    raw.send(struct.pack(">I", 5 * MIB))  # 5 MiB announced, nothing more
    reply = raw.sock.recv(65536)
    raw.assert_closed_by_broker()
    assert b"before CONNECT" in reply and b"exceeds the limit of 65536 bytes" in reply


def test_connections_past_the_limit_per_address_are_refused_as_pulsar_refuses_them(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", "--broker-max-connections-per-ip", "2").start()
    try:
        kept = [RawConnection(broker), RawConnection(broker)]
        for raw in kept:
            raw.handshake()
        refused = RawConnection(broker)
        frames = refused.decoder.feed(refused.sock.recv(65536))
        refused.assert_closed_by_broker()
        error = frames[0].command.error
        assert (error.request_id, error.error) == (U64_MASK, ServerError.NotAllowedError)
        port = refused.sock.getsockname()[1]
        assert error.message == f"Reached the maximum number of connections on address/127.0.0.1:{port}"
        kept[0].close()
        wait_until(lambda: _connects(broker), timeout=10, what="a connection once one closed")
    finally:
        broker.stop()


def _connects(broker: BrokerProcess) -> bool:
    raw = RawConnection(broker)
    try:
        raw.handshake()
        return True
    except AssertionError:
        return False
    finally:
        raw.close()


def test_consumer_and_producer_limits_answer_as_pulsar(tmp_path: Path) -> None:
    from airflow_pulsar.client.exceptions import ConsumerBusy, ProducerBusy

    broker = BrokerProcess(
        tmp_path / "data", "--max-producers-per-topic", "1", "--max-consumers-per-subscription", "2"
    ).start()
    try:
        with Client(broker.service_url, operation_timeout_seconds=5) as client:
            client.create_producer("limited")
            with pytest.raises(ProducerBusy, match="Topic 'persistent://public/default/limited' reached max producers limit"):
                client.create_producer("limited")
            for _ in range(2):
                client.subscribe("limited", "sub", consumer_type=ConsumerType.Shared, initial_position=InitialPosition.Earliest)
            with pytest.raises(ConsumerBusy, match="Subscription reached max consumers limit"):
                client.subscribe("limited", "sub", consumer_type=ConsumerType.Shared)
    finally:
        broker.stop()
