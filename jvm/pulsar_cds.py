"""The class-data-sharing archive of Apache Pulsar standalone (``make pulsar-cds``), which every
Pulsar JVM the tests start maps its classes from (``jvm/class_sharing.py``).

``python jvm/pulsar_cds.py`` makes it: one standalone started with ``-XX:ArchiveClassesAtExit``
serves what the tests ask of it (admin calls, a partitioned topic, batched and unbatched
produce, subscriptions, receive and acknowledge), then stops; its JVM writes the classes it
loaded as it exits.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import airflow_pulsar.client as pulsar
from jvm.apache_pulsar import CLASS_ARCHIVE, PulsarStandalone
from jvm.class_sharing import dump_archive


def exercise(service_url: str, standalone: PulsarStandalone) -> None:
    """What the tests ask of a standalone, once each."""
    standalone.admin("PUT", "/admin/v2/persistent/public/default/training/partitions", json=2).raise_for_status()
    # A cold training JVM (no archive to map, and often sharing the machine with the Spark
    # training) can take longer than the default 30 s to load its first topic.
    client = pulsar.Client(service_url, operation_timeout_seconds=180)
    try:
        for batching in (True, False):
            topic = f"persistent://public/default/training-{'batched' if batching else 'single'}"
            consumer = client.subscribe(topic, "training", initial_position=pulsar.InitialPosition.Earliest)
            producer = client.create_producer(topic, batching_enabled=batching)
            for number in range(50):
                producer.send_async(f"message {number}".encode(), None)
            producer.flush()
            for _ in range(50):
                consumer.acknowledge(consumer.receive(timeout_millis=30_000))
            standalone.topic_stats(topic.rsplit("/", 1)[1])
        client.create_producer("persistent://public/default/training").send(b"partitioned")
    finally:
        client.close()


def dump() -> None:
    """Train a standalone and leave its archive at ``CLASS_ARCHIVE``."""
    CLASS_ARCHIVE.unlink(missing_ok=True)  # the training JVM must load its classes, not map them

    def train(archive_option: str) -> None:
        with tempfile.TemporaryDirectory(prefix="pulsar-cds-") as work:
            standalone = PulsarStandalone(Path(work), log_level="warn", jvm_options=[archive_option]).start()
            try:
                exercise(standalone.service_url, standalone)
            finally:
                # The JVM writes the archive as it exits: on a busy machine that outlasts stop()'s default 30 s.
                code = standalone.stop(timeout=300)
            if code not in (0, 143):  # 143: ended by the SIGTERM, as Pulsar's launcher does
                raise SystemExit(f"the training standalone exited with {code}")

    dump_archive(CLASS_ARCHIVE, train)


if __name__ == "__main__":
    dump()
