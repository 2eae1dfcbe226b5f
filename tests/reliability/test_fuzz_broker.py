"""Fuzz the broker's binary port with over 100 000 hostile frames (seeded; FUZZ_SEED to vary).

Well-formed nonsense goes in batches on long-lived connections, each batch closed by a PING whose
PONG proves the broker read it all and kept the connection. Malformed frames go one per connection,
many connections at a time; the broker may only close that connection. Meanwhile a client keeps
doing round trips through the broker and an idle connection stays open; afterwards the broker's
descriptors are back where they were, its memory has not run away, and its log holds no traceback.
"""

from __future__ import annotations

import os
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.client import Client
from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.frames import encode_command
from tests.support.fault_proxy import T, frame_kind, split_frames
from tests.support.frame_mutations import FrameFuzzer
from tests.support.reliability_checks import open_fds, rss_bytes

SEED = int(os.environ.get("FUZZ_SEED", "20240917"))
NONSENSE_CONNECTIONS = 10
NONSENSE_BATCHES = 4
BATCH = 2_000
MALFORMED_CONNECTIONS = 22_000
CONCURRENCY = 64
FUZZ_TOPICS = [
    "persistent://public/default/fuzz-a",
    "persistent://public/default/fuzz-b",
    "persistent://public/default/fuzz-p",  # partitioned (2)
    "persistent://public/default/fuzz-p-partition-1",
]
CONNECT = encode_command(commands.make(T.CONNECT, client_version="fuzz", protocol_version=20))
PING = encode_command(commands.make(T.PING))
# Where the broker must refuse (an ERROR, then close) rather than answer the PING behind the frame.
# A SEND with a wrong CRC is not among them: as with Pulsar, that SEND alone fails (SEND_ERROR).
MUST_REFUSE = {"unsupported command", "second CONNECT", "SEND without payload", "bad payload section", "huge size prefix"}


class RawPeer:
    """A hand-driven connection to the broker that reads replies only to count PONGs."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self._buffer = bytearray()
        self.send_and_wait(CONNECT, T.CONNECTED)

    def send_and_wait(self, data: bytes, kind: int = T.PONG) -> None:
        """Send, then read until a reply of ``kind``; fails if the broker closes first."""
        self.sock.sendall(data)
        while True:
            chunk = self.sock.recv(1 << 20)
            assert chunk, "the broker closed a connection that sent nothing malformed"
            self._buffer += chunk
            if any(frame_kind(frame) == kind for frame in split_frames(self._buffer)):
                return

    def close(self) -> None:
        self.sock.close()


class RoundTrips:
    """A client doing produce-and-receive round trips through the broker on a background thread."""

    def __init__(self, broker: BrokerProcess, topic: str):
        self.client = Client(broker.service_url, operation_timeout_seconds=10)
        self.consumer = self.client.subscribe(topic, "health")
        self.producer = self.client.create_producer(topic)
        self.done = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="round-trips", daemon=True)

    def __enter__(self) -> RoundTrips:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.client.close()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            payload = b"round-trip-%d" % self.done
            try:
                self.producer.send(payload)
                message = self.consumer.receive(10_000)
                assert message.data() == payload, f"round trip got {message.data()!r} for {payload!r}"
                self.consumer.acknowledge(message)
                self.done += 1
            except BaseException as exc:  # reported by the test, not lost on this thread
                self.errors.append(exc)
                return


def _nonsense(port: int, fuzzer: FrameFuzzer, lock: threading.Lock, sent: list[int]) -> None:
    """Batches of well-formed nonsense on one connection; each batch must come back with its PONG."""
    peer = RawPeer(port)
    try:
        for _ in range(NONSENSE_BATCHES):
            with lock:  # one generator, one seed: frames are drawn in a reproducible order per batch
                frames = [fuzzer.nonsense_frame() for _ in range(BATCH)]
            peer.send_and_wait(b"".join(frames) + PING)
            with lock:
                sent[0] += len(frames)
    finally:
        peer.close()


def _one_per_connection(port: int, payloads: list[bytes]) -> list[bytes]:
    """Send each payload on its own connection (``CONCURRENCY`` at a time), half-close, and read
    until the broker closes; returns every connection's replies."""
    replies: list[bytearray] = [bytearray() for _ in payloads]
    started: dict[socket.socket, tuple[int, float]] = {}
    selector = selectors.DefaultSelector()
    next_index = 0
    while next_index < len(payloads) or started:
        while next_index < len(payloads) and len(started) < CONCURRENCY:
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(payloads[next_index])
            sock.shutdown(socket.SHUT_WR)  # a truncated frame then ends at our FIN
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            started[sock] = (next_index, time.monotonic())
            next_index += 1
        for key, _ in selector.select(timeout=1):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            index, _ = started[sock]
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if chunk:
                replies[index] += chunk
                continue
            selector.unregister(sock)
            sock.close()
            del started[sock]
        stuck = [i for i, since in started.values() if time.monotonic() - since > 15]
        assert not stuck, f"the broker kept {len(stuck)} connections open after their FIN, e.g. {payloads[stuck[0]]!r}"
    selector.close()
    return [bytes(reply) for reply in replies]


@pytest.fixture
def fuzz_broker(broker_factory: Any) -> Iterator[BrokerProcess]:
    """A broker without fsync (the protocol is under test, not the disk), with dedup on."""
    broker = broker_factory("--no-fsync", "--dedup")
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_partitioned_topic("fuzz-p", 2)
    yield broker
    log = broker.log_path.read_text(errors="replace")
    for sign in ("Traceback", "Exception in callback", "Fatal error"):
        assert sign not in log, f"the broker logged {sign!r}:\n{log[log.index(sign) - 2000 : log.index(sign) + 3000]}"


def test_broker_survives_100k_hostile_frames(fuzz_broker: BrokerProcess, topic_name: str) -> None:
    broker = fuzz_broker
    pid = broker.process.pid
    fuzzer = FrameFuzzer(SEED, FUZZ_TOPICS, ["fuzz-sub-0", "fuzz-sub-1", "fuzz-sub-2"])
    start = time.monotonic()
    with RoundTrips(broker, topic_name) as trips:
        bystander = RawPeer(broker.port)
        fds_before, rss_before = open_fds(pid), rss_bytes(pid)

        lock = threading.Lock()
        sent = [0]
        errors: list[BaseException] = []
        for round_index in range(NONSENSE_CONNECTIONS // 2):  # two connections at a time
            threads = [
                threading.Thread(target=_catching(_nonsense, errors), args=(broker.port, fuzzer, lock, sent))
                for _ in range(2)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert not errors, f"nonsense round {round_index} (seed {SEED}): {errors[0]}"
        nonsense_time = time.monotonic() - start

        mutations = [fuzzer.malformed_frame() for _ in range(MALFORMED_CONNECTIONS)]
        # Most after a handshake; every eighth before it, where only CONNECT may come first.
        payloads = [(CONNECT if i % 8 else b"") + frame + PING for i, (_, frame) in enumerate(mutations)]
        replies = _one_per_connection(broker.port, payloads)

        bystander.send_and_wait(PING)  # the idle connection lived through it all
        bystander.close()
        assert broker.process.poll() is None, "the broker died"
        assert not trips.errors, f"a round trip failed meanwhile: {trips.errors[0]!r}"
        assert trips.done >= 3, "too few round trips to tell the broker kept serving"

    outcomes: dict[str, Counter[str]] = {}
    for index, ((name, frame), reply) in enumerate(zip(mutations, replies, strict=True)):
        kinds = {frame_kind(f) for f in split_frames(bytearray(reply))}
        outcome = "refused" if T.ERROR in kinds else "answered" if T.PONG in kinds else "closed"
        outcomes.setdefault(name, Counter())[outcome] += 1
        if name in MUST_REFUSE and index % 8:
            assert outcome == "refused", f"{name}: {frame[:80]!r} was {outcome}, not refused"
    deadline = time.monotonic() + 10
    while open_fds(pid) > fds_before and time.monotonic() < deadline:
        time.sleep(0.1)
    fds_after, rss_after = open_fds(pid), rss_bytes(pid)
    assert fds_after <= fds_before, f"the broker holds {fds_after - fds_before} more descriptors than before"
    growth = rss_after - rss_before
    assert growth < 32 * 2**20, f"the broker's memory grew by {growth / 2**20:.0f} MiB"

    total = sent[0] + len(mutations)
    assert total >= 100_000
    elapsed = time.monotonic() - start
    by_outcome = Counter()
    for counts in outcomes.values():
        by_outcome.update(counts)
    print(
        f"\nRELIABILITY broker fuzz (seed {SEED}): {total} hostile frames in {elapsed:.1f} s: {sent[0]} well-formed "
        f"nonsense on {NONSENSE_CONNECTIONS} connections kept open ({nonsense_time:.1f} s), {len(mutations)} malformed "
        f"one per connection ({dict(by_outcome)}); {trips.done} round trips meanwhile, none failed; "
        f"broker FDs {fds_before} -> {fds_after}, RSS {rss_before / 2**20:.1f} -> {rss_after / 2**20:.1f} MiB"
    )
    for name, counts in sorted(outcomes.items()):
        print(f"  {name}: {dict(counts)}")


def _catching(target: Any, errors: list[BaseException]) -> Any:
    def run(*args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:
            errors.append(exc)

    return run
