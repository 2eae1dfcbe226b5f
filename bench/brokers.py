"""The brokers a benchmark runs against: ours (embedded) or Apache Pulsar standalone, fsync on or off.

Our broker's ``--no-fsync`` and Pulsar's ``journalSyncData=false`` are the same trade: a receipt
no longer waits for the disk. Everything else keeps each broker's defaults for one machine (the
Pulsar launcher in ``jvm/apache_pulsar.py`` says which).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import httpx
import pulsar

from airflow_pulsar.broker.process import BrokerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout root, for its jvm package
from jvm.apache_pulsar import PulsarStandalone  # noqa: E402

KINDS = ("embedded", "pulsar")
LABELS = {"embedded": "our broker", "pulsar": "Apache Pulsar"}


class Broker(Protocol):
    """What a benchmark uses of a broker process."""

    service_url: str
    web_url: str

    def admin(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...
    def topic_stats(self, topic: str) -> dict[str, Any]: ...


def start(kind: str, data_dir: Path, fsync: bool) -> BrokerProcess | PulsarStandalone:
    """Start a broker of ``kind`` in ``data_dir`` (not waited on to stop: see ``running``)."""
    if kind == "embedded":
        return BrokerProcess(data_dir, *([] if fsync else ["--no-fsync"])).start()
    if kind == "pulsar":
        return PulsarStandalone(data_dir, config={"journalSyncData": str(fsync).lower()}, log_level="warn").start()
    raise ValueError(f"broker kind must be one of {KINDS}, got {kind!r}")


@contextmanager
def running(kind: str, fsync: bool) -> Iterator[Any]:
    """A broker of ``kind`` for the duration of the block, stopped (by pid) afterwards; Apache
    Pulsar warmed up first (see :func:`warm_up`)."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as data_dir:
        broker = start(kind, Path(data_dir), fsync)
        try:
            if kind == "pulsar":
                warm_up(broker)
            yield broker
        finally:
            broker.stop()


WARM_UP_MESSAGES = 200_000


def warm_up(broker: Broker) -> None:
    """Publish and consume ``WARM_UP_MESSAGES`` unbatched and as many batched, with the official
    client, so that the JVM has compiled its publish and dispatch paths before the first round: a
    cold JVM ran the first rounds at a quarter to a half of the later ones' rate (2026-11-28)."""
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    payload = b"w" * 100
    try:
        for batching in (False, True):
            topic = f"persistent://public/default/bench-warm-up-{'batched' if batching else 'unbatched'}"
            consumer = client.subscribe(topic, "warm-up", initial_position=pulsar.InitialPosition.Earliest)
            producer = client.create_producer(topic, batching_enabled=batching, max_pending_messages=5000, block_if_queue_full=True)
            for _ in range(WARM_UP_MESSAGES):
                producer.send_async(payload, None)
            producer.flush()
            for _ in range(WARM_UP_MESSAGES):
                consumer.acknowledge(consumer.receive(30_000))
            producer.close()
            consumer.close()
    finally:
        client.close()


def on(kind: str) -> str:
    """The suffix a figure carries for the broker it ran on (none for ours, the default)."""
    return "" if kind == "embedded" else ", on Apache Pulsar"
