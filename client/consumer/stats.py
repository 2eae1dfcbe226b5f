"""Consumer statistics: what a "consumer looks stuck" investigation needs, in one log line.

If ``available_permits`` sits below half the queue while ``queued_messages`` stays high, the
application is not taking messages, so no FLOW goes out and the broker sends nothing more; if the
queue is empty and ``flows_sent`` grows, the broker has nothing to send (or nothing for this key).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class ConsumerStats:
    """Counters of one partition consumer, or summed over several (``combine``)."""

    topic: str
    connected: bool
    receiver_queue_size: int
    available_permits: int
    flows_sent: int
    permits_sent: int
    queued_entries: int
    queued_messages: int
    received: int
    pending_acks: int
    acks_sent: int
    pending_nacks: int
    nacked: int
    unacked_tracked: int
    ack_timeouts: int
    redeliveries: int
    reconnects: int
    dead_lettered: int
    is_active: bool | None = None

    @classmethod
    def combine(cls, topic: str, parts: list[ConsumerStats]) -> ConsumerStats:
        """Sum the counters of several partition consumers."""
        if len(parts) == 1:
            return parts[0]
        totals = {
            f.name: sum(getattr(p, f.name) for p in parts)
            for f in fields(cls)
            if f.name not in ("topic", "connected", "is_active")
        }
        active = [p.is_active for p in parts if p.is_active is not None]
        return cls(topic=topic, connected=all(p.connected for p in parts), is_active=any(active) if active else None, **totals)

    def as_dict(self) -> dict[str, object]:
        """The counters as a plain dict (for JSON or metrics)."""
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"consumer {self.topic}: connected={self.connected} permits={self.available_permits}/"
            f"{self.receiver_queue_size} flows={self.flows_sent} queued={self.queued_entries} entries+"
            f"{self.queued_messages} msgs received={self.received} pending_acks={self.pending_acks} "
            f"acks_sent={self.acks_sent} nacks={self.pending_nacks}/{self.nacked} unacked={self.unacked_tracked} "
            f"ack_timeouts={self.ack_timeouts} redeliveries={self.redeliveries} reconnects={self.reconnects} "
            f"dlq={self.dead_lettered}"
        )
