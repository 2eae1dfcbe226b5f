"""Killing a broker of the cluster while a reader takes messages from it, from a thread of the test.

The thread polls the stats of partitions the broker owns; as soon as they have delivered a message
(nothing else reads them: a subscription held without permits gets none), it kills the broker
with -9, notes how many of the partitions' messages had been delivered by then, and starts the
broker again on its ports.
"""

from __future__ import annotations

import threading
import time

from jvm.pulsar_cluster import ClusterBroker, PulsarCluster

POLL_SECONDS = 0.1


class KillOnRead:
    """Kills ``broker`` once one of ``partitions`` (which it owns) has delivered a message, then restarts it."""

    def __init__(self, cluster: PulsarCluster, broker: ClusterBroker, partitions: list[str], timeout: float):
        self.cluster = cluster
        self.broker = broker
        self.partitions = partitions
        self.timeout = timeout
        #: Messages the partitions had delivered, and held, at the last look before the kill (None: no kill).
        self.delivered: int | None = None
        self.held = 0
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._watch, name=f"kill-{broker.name}-on-read", daemon=True)

    def start(self) -> KillOnRead:
        """Start watching."""
        self._thread.start()
        return self

    def join(self, timeout: float) -> None:
        """Wait for the kill and the restart; raise what the thread raised."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.broker.name} was not killed and started again within {timeout:g} s"
        if self._error is not None:
            raise self._error

    def _counters(self) -> tuple[int, int]:
        delivered = held = 0
        for partition in self.partitions:
            path = partition.replace("persistent://", "/admin/v2/persistent/") + "/stats"
            stats = self.broker.admin("GET", path).json()
            delivered += stats["msgOutCounter"]
            held += stats["msgInCounter"]
        return delivered, held

    def _watch(self) -> None:
        try:
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline:
                delivered, held = self._counters()
                if delivered:
                    self.broker.kill()
                    self.delivered, self.held = delivered, held
                    self.cluster.start_broker(self.cluster.brokers.index(self.broker))
                    return
                time.sleep(POLL_SECONDS)
        except BaseException as exc:  # handed to the test by join()
            self._error = exc
