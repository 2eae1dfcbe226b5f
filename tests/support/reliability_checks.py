"""What the reliability tests share: stamped payloads, a log of what producers were told, reading
a topic back partition by partition, the exactly-once-in-order check, and process figures."""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulsar

from airflow_pulsar.client.client import Client
from airflow_pulsar.client.exceptions import Result
from airflow_pulsar.client.protocol.message_id import MessageId

_STAMP = re.compile(rb"p(\d+)-(\d+)")


def stamp(producer: int, seq: int) -> bytes:
    """The payload of message ``seq`` of producer ``producer``."""
    return b"p%d-%07d" % (producer, seq)


def unstamp(data: bytes) -> tuple[int, int]:
    """(producer, seq) of a stamped payload."""
    match = _STAMP.fullmatch(data)
    assert match is not None, f"not a stamped payload: {data[:40]!r}"
    return int(match.group(1)), int(match.group(2))


@dataclass
class SendLog:
    """What every send callback said, keyed by payload; safe to call from the IO threads."""

    acked: dict[bytes, MessageId] = field(default_factory=dict)
    failed: dict[bytes, Result] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _changed: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self._changed = threading.Condition(self._lock)

    def callback(self, payload: bytes) -> Callable[[Result, Any], None]:
        """The send_async callback of ``payload``."""

        def done(result: Result, message_id: Any) -> None:
            with self._lock:
                if result is Result.Ok:
                    self.acked[payload] = message_id
                else:
                    self.failed[payload] = result
                self._changed.notify_all()

        return done

    def wait_for(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` callbacks ran in all."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self.acked) + len(self.failed) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def deduplicated(self) -> int:
        """Acks that came as the broker's duplicate receipt (-1, -1): a resend of a stored message."""
        return sum(1 for m in self.acked.values() if m.ledger_id() < 0)


def partition_names(topic: str, partitions: int) -> list[str]:
    """The partition topic names of a partitioned topic in public/default."""
    return [f"persistent://public/default/{topic}-partition-{i}" for i in range(partitions)]


def read_all_ours(client: Client, topic: str) -> list[tuple[bytes, MessageId]]:
    """Every message of one (partition) topic with its id, in storage order, with our reader."""
    reader = client.create_reader(topic, MessageId.earliest)
    try:
        got = []
        while reader.has_message_available():
            message = reader.read_next(10_000)
            got.append((message.data(), message.message_id()))
        return got
    finally:
        reader.close()


def read_all_official(service_url: str, topic: str) -> list[bytes]:
    """Every payload of one (partition) topic, in storage order, with the official client."""
    client = pulsar.Client(service_url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(10_000).data())
        return got
    finally:
        client.close()


def check_exactly_once_in_order(stored: dict[str, list[tuple[bytes, MessageId]]], log: SendLog) -> int:
    """Assert every acknowledged message is stored exactly once, each producer's messages in send
    order within a partition, and each ack's id (unless a duplicate receipt) where it is stored.
    Returns how many messages were checked."""
    counts = Counter(data for messages in stored.values() for data, _ in messages)
    duplicates = {data: n for data, n in counts.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} messages stored more than once, e.g. {sorted(duplicates)[:5]}"
    missing = set(log.acked) - set(counts)
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"
    for topic, messages in stored.items():
        last: dict[int, int] = {}
        for data, message_id in messages:
            producer, seq = unstamp(data)
            assert seq > last.get(producer, -1), f"{topic}: producer {producer} sent {seq} after {last[producer]}"
            last[producer] = seq
            acked_id = log.acked.get(data)
            if acked_id is not None and acked_id.ledger_id() >= 0:
                assert (acked_id.ledger_id(), acked_id.entry_id(), acked_id.batch_index()) == (
                    message_id.ledger_id(),
                    message_id.entry_id(),
                    message_id.batch_index(),
                ), f"{data!r} acknowledged as {acked_id} but stored at {message_id}"
    return len(log.acked)


def rss_bytes(pid: int | None = None) -> int:
    """Resident memory of a process (this one by default)."""
    with open(f"/proc/{pid or os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    """Open file descriptors of a process."""
    return len(os.listdir(f"/proc/{pid}/fd"))


class MemorySampler:
    """Samples the RSS of some processes every ``interval`` seconds on a background thread."""

    def __init__(self, pids: dict[str, int], interval: float = 0.5):
        self.pids = pids
        self.interval = interval
        self.samples: dict[str, list[int]] = {name: [] for name in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            for name, pid in self.pids.items():
                self.samples[name].append(rss_bytes(pid))
            if self._stop.wait(self.interval):
                return

    def growth(self, name: str) -> tuple[int, int]:
        """(median RSS of the middle third, median of the last third), in bytes: the first third
        is warm-up (imports, caches, queues filling up)."""
        values = self.samples[name]
        third = max(1, len(values) // 3)
        middle, last = sorted(values[third : 2 * third] or values), sorted(values[-third:])
        return middle[len(middle) // 2], last[len(last) // 2]

    def summary(self, name: str) -> str:
        """One line: samples and MiB at start, middle, end and peak."""
        values = self.samples[name]
        mib = [v / 2**20 for v in values]
        return (
            f"{name} RSS MiB start {mib[0]:.1f} mid {mib[len(mib) // 2]:.1f} end {mib[-1]:.1f} "
            f"peak {max(mib):.1f} ({len(mib)} samples)"
        )
