"""Bounded batches of messages for message events: how many a batch takes, how long it waits, and
how many bytes one asset event may hold.

A batch is what the message event trigger's consumer hands its triggers at once: up to
``batch_size`` messages, closed ``batch_timeout`` seconds after its first message arrived if it
is not full by then. Each trigger turns the messages of a batch it accepts into events of at most
``max_event_bytes`` bytes of JSON (Airflow stores an event's payload in the asset event's
``extra``, a JSON column of its metadata database, and hands the consumed events to every task of
the run it starts), so a batch too large for one event becomes several. A single message larger
than the budget is an event of its own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_pulsar import arguments
from airflow_pulsar.client import Message, Result
from airflow_pulsar.client.asyncio import Consumer as AsyncConsumer
from airflow_pulsar.client.asyncio import PulsarException

# 1 MiB: far below what Airflow's JSON column and its process channels take (see the event-driven
# page), and small enough that a run's consumed events stay cheap to hand to each of its tasks.
DEFAULT_MAX_EVENT_BYTES = 1024 * 1024


@dataclass(frozen=True)
class BatchLimits:
    """How a batch is bounded: ``size`` messages, ``timeout`` seconds after its first message,
    and ``max_event_bytes`` of JSON per event made from it."""

    size: int = 1
    timeout: float = 5.0
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES

    @classmethod
    def checked(cls, size: Any, timeout: Any, max_event_bytes: Any) -> BatchLimits:
        """The limits from a DAG author's arguments, each checked (ValueError naming the argument)."""
        return cls(
            arguments.positive_int(size, "batch_size"),
            arguments.seconds(timeout, "batch_timeout", allow_zero=True),
            arguments.positive_int(max_event_bytes, "batch_max_bytes", minimum=1024),
        )


@dataclass(eq=False)
class MessageBatch:
    """Messages received together; triggers mark the ones their function failed on as rejected,
    and those their events name as fired.

    The same object is each trigger's raw event and what the shared stream's producer settles:
    every message is acknowledged once all triggers passed the batch, except the rejected ones,
    which are negatively acknowledged (and so redelivered, or dead-lettered), and, for a watcher
    that acknowledges on success, the fired ones, which it holds for their run. Such a watcher
    gives the batch a ``recorder`` that puts fired messages in flight before their events are stored.
    """

    messages: tuple[Message, ...]
    rejected: set[int] = field(default_factory=set)  # indexes into messages
    fired: set[int] = field(default_factory=set)  # indexes into messages
    recorder: Callable[[Sequence[Message]], Awaitable[None]] | None = None

    def reject(self, index: int) -> None:
        """Have the message at ``index`` negatively acknowledged instead of acknowledged."""
        self.rejected.add(index)

    async def fire(self, indexes: Iterable[int]) -> None:
        """Mark the messages at ``indexes`` as named by an event, recording them first (if this
        batch has a recorder) for those not marked already."""
        new = sorted(set(indexes) - self.fired)
        if new and self.recorder is not None:
            await self.recorder([self.messages[index] for index in new])
        self.fired.update(new)


async def receive_batch(consumer: AsyncConsumer, limits: BatchLimits) -> MessageBatch:
    """Wait for a message, then take more until the batch is full or ``limits.timeout`` passed."""
    messages = [await consumer.receive()]
    deadline = asyncio.get_running_loop().time() + limits.timeout
    while len(messages) < limits.size:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            break
        try:
            messages.append(await consumer.receive(timeout_millis=max(int(remaining * 1000), 1)))
        except PulsarException as exc:
            if exc.error() != Result.Timeout:
                raise
            break
    return MessageBatch(tuple(messages))


def json_size(value: Any) -> int:
    """Bytes of ``value`` as the compact JSON text a database column would hold."""
    return len(json.dumps(value, separators=(",", ":")).encode("utf-8"))


def split_by_bytes(items: Sequence[dict[str, Any]], max_bytes: int) -> Iterator[list[dict[str, Any]]]:
    """``items`` in order, in groups whose JSON list stays within ``max_bytes`` (an item larger
    than that alone makes a group)."""
    group: list[dict[str, Any]] = []
    size = 2  # the list's brackets
    for item in items:
        item_size = json_size(item) + 1  # and its comma
        if group and size + item_size > max_bytes:
            yield group
            group, size = [], 2
        group.append(item)
        size += item_size
    if group:
        yield group
