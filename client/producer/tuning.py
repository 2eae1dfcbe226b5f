"""Producer settings from message size, partition count and latency budget.

The reasoning, step by step, from how a message travels:

1. ``max_pending_messages`` is each partition's pending queue. 1000-2000 suits most producers;
   raise it with the send rate. The topic-wide cap is set to ``max_pending_messages *
   partitions`` so that the per-partition limit is the one that applies
   (``min(max_pending, across / partitions)`` otherwise shrinks as partitions are added).
2. ``memory_limit_bytes`` (a client setting) is what all pending messages may hold:
   ``max_pending * partitions * message_size``, so the memory limit and the pending limit bind
   at about the same point. Production producers commonly run 64-256 MiB; we clamp to that range.
   One producer per client, since the limit is shared by every producer of the client.
3. ``batching_max_messages = max_pending / 2``: a batch never needs more than half the pending
   queue, so while one batch awaits its receipt the other half can fill the next one. A batch
   larger than the pending queue could never fill and would always wait out its delay.
4. ``batching_max_allowed_size_in_bytes = min(max_pending * message_size / 2, 1 MiB)``, by the
   same argument in bytes, capped at 1 MiB.
5. ``batching_max_publish_delay_ms`` comes from the latency budget: a message may wait this long
   for its batch; half the budget is left for the round trip and the broker's write. Typical
   delays are 1-100 ms; longer delays make bigger batches and better compression.
6. ``batching_partition_switch_frequency_by_publish_delay = 1``: round robin moves to the next
   partition after each batch, so no partition's pending queue runs dry waiting for the switch.
7. Batching and LZ4 compression on (the broker is IO-bound; whole batches compress well), and
   ``block_if_queue_full=True`` so a full queue slows the sender instead of failing messages it
   would then have to handle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..protocol.compression import CompressionType
from ..protocol.frames import DEFAULT_MAX_MESSAGE_SIZE
from .routers import PartitionsRoutingMode

__all__ = ["ProducerTuning", "recommend_settings"]

_MIB = 1024 * 1024
_MIN_MEMORY = 64 * _MIB
_MAX_MEMORY = 256 * _MIB
_MAX_BATCH_BYTES = _MIB


@dataclass(frozen=True)
class ProducerTuning:
    """Recommended settings: ``Client(**client_settings)`` and ``create_producer(**producer_settings)``."""

    producer_settings: dict[str, Any]
    client_settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def recommend_settings(
    message_size_bytes: int,
    partitions: int,
    latency_budget_ms: float,
    max_pending_messages: int = 1000,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
) -> ProducerTuning:
    """Settings for one producer (see the module docstring for the why of each line).

    ``partitions`` is 1 for a non-partitioned topic; ``max_message_size`` the broker's limit.
    """
    if message_size_bytes <= 0:
        raise ValueError(f"message_size_bytes must be positive, got {message_size_bytes}")
    if partitions <= 0:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    if latency_budget_ms <= 0:
        raise ValueError(f"latency_budget_ms must be positive, got {latency_budget_ms}")
    if max_pending_messages < 2:
        raise ValueError(f"max_pending_messages must be at least 2, got {max_pending_messages}")
    notes: list[str] = []
    memory = max_pending_messages * partitions * message_size_bytes
    clamped = min(max(memory, _MIN_MEMORY), _MAX_MEMORY)
    if clamped != memory:
        notes.append(f"memory limit {memory} bytes clamped to {clamped} (the 64-256 MiB range)")
    batch_bytes = min(max_pending_messages * message_size_bytes // 2, _MAX_BATCH_BYTES)
    delay = int(min(100, max(1, latency_budget_ms // 2)))
    producer: dict[str, Any] = {
        "max_pending_messages": max_pending_messages,
        "max_pending_messages_across_partitions": max_pending_messages * partitions,
        "block_if_queue_full": True,
        "compression_type": CompressionType.LZ4,
        "message_routing_mode": PartitionsRoutingMode.RoundRobinDistribution,
    }
    if message_size_bytes > max_message_size:
        notes.append("messages exceed the broker's max message size: batching off, chunking on")
        producer.update(batching_enabled=False, chunking_enabled=True)
    elif message_size_bytes > batch_bytes or message_size_bytes > _MAX_BATCH_BYTES // 2:
        notes.append("messages are too large for batches to hold more than one: batching off")
        producer["batching_enabled"] = False
    else:
        producer.update(
            batching_enabled=True,
            batching_max_messages=max_pending_messages // 2,
            batching_max_allowed_size_in_bytes=batch_bytes,
            batching_max_publish_delay_ms=delay,
            batching_partition_switch_frequency_by_publish_delay=1,
        )
        if latency_budget_ms < 2:
            notes.append("a budget under 2 ms leaves the 1 ms minimum delay; expect small batches")
    return ProducerTuning(producer, {"memory_limit_bytes": clamped}, notes)
