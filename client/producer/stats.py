"""Producer statistics: what was sent, how well it batched and compressed, and how fast it was acked.

Updated once per op (a batch, a message or a chunk), never per message of a batch; latencies are
kept for the most recent ops only. What was written is counted per partition producer, by the one
thread holding its lock, so an unbatched message's op takes no lock of the statistics' own.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any

__all__ = ["ProducerStats", "WrittenCounts"]

log = logging.getLogger(__name__)
_LATENCY_WINDOW = 4096


class WrittenCounts:
    """What one partition producer's ops hold: counted by the thread that holds the partition
    producer's lock (the only writer, so no lock here), read by :class:`ProducerStats`."""

    __slots__ = ("payload_bytes", "wire_bytes", "batches", "batched_messages")

    def __init__(self) -> None:
        self.payload_bytes = 0
        self.wire_bytes = 0
        self.batches = 0
        self.batched_messages = 0

    def record(self, num_messages: int, payload_bytes: int, wire_bytes: int, batched: bool) -> None:
        """An op was built: its uncompressed and compressed sizes."""
        self.payload_bytes += payload_bytes
        self.wire_bytes += wire_bytes
        if batched:
            self.batches += 1
            self.batched_messages += num_messages


class ProducerStats:
    """Counters of one producer (all its partitions)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.messages_acked = 0
        self.messages_failed = 0
        self._written: list[WrittenCounts] = []
        self._latencies: deque[float] = deque(maxlen=_LATENCY_WINDOW)

    def written_counts(self) -> WrittenCounts:
        """The counts of one more partition producer's ops, summed into this producer's figures."""
        counts = WrittenCounts()
        with self._lock:
            self._written.append(counts)
        return counts

    def written(self) -> WrittenCounts:
        """What every op built so far holds, all partitions summed."""
        total = WrittenCounts()
        for counts in list(self._written):
            total.payload_bytes += counts.payload_bytes
            total.wire_bytes += counts.wire_bytes
            total.batches += counts.batches
            total.batched_messages += counts.batched_messages
        return total

    def record_acked(self, num_messages: int, latency_seconds: float) -> None:
        """An op's receipt arrived ``latency_seconds`` after its first message was sent."""
        with self._lock:
            self.messages_acked += num_messages
            self._latencies.append(latency_seconds * 1000)

    def record_acked_ops(self, num_messages: int, latencies_seconds: list[float]) -> None:
        """Receipts of several ops arrived: their ``num_messages`` in all, and each op's latency."""
        with self._lock:
            self.messages_acked += num_messages
            self._latencies.extend([latency * 1000 for latency in latencies_seconds])

    def record_failed(self, num_messages: int) -> None:
        """Messages failed (error, timeout or close)."""
        with self._lock:
            self.messages_failed += num_messages

    def snapshot(self, pending: int) -> dict[str, Any]:
        """A plain dict of the figures; ``pending`` is supplied by the producer."""
        written = self.written()
        payload_bytes, wire_bytes, batches = written.payload_bytes, written.wire_bytes, written.batches
        with self._lock:
            latencies = sorted(self._latencies)
            return {
                "messages": self.messages_acked,
                "failed": self.messages_failed,
                "bytes": payload_bytes,
                "wire_bytes": wire_bytes,
                "batches": batches,
                "mean_batch_size": written.batched_messages / batches if batches else 0.0,
                "compression_ratio": wire_bytes / payload_bytes if payload_bytes else 1.0,
                "pending": pending,
                "latency_ms": {
                    "p50": _percentile(latencies, 0.50),
                    "p95": _percentile(latencies, 0.95),
                    "p99": _percentile(latencies, 0.99),
                    "max": latencies[-1] if latencies else 0.0,
                },
            }

    @staticmethod
    def log_line(topic: str, snapshot: dict[str, Any]) -> None:
        """Log one summary line, as the official client's periodic stats do."""
        latency = snapshot["latency_ms"]
        log.info(
            "producer %s: %d msgs acked, %d failed, %d bytes, %d batches (mean %.1f msgs), "
            "compression %.2f, %d pending, latency p50 %.1f p99 %.1f max %.1f ms",
            topic,
            snapshot["messages"],
            snapshot["failed"],
            snapshot["bytes"],
            snapshot["batches"],
            snapshot["mean_batch_size"],
            snapshot["compression_ratio"],
            snapshot["pending"],
            latency["p50"],
            latency["p99"],
            latency["max"],
        )


def _percentile(ordered: list[float], fraction: float) -> float:
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
