"""What producers, consumers and readers need from the client that made them.

Handlers (``producer/``, ``consumer/``) depend on :class:`ClientServices`, never on
:class:`~.client.Client` itself, so a test can drive a partition producer or consumer with a small
fake that has these members, and the client's pool and settings stay its own business.
:class:`~.client.Client` satisfies the protocol structurally: its factories pass the client itself
where a ``ClientServices`` is expected, so the type checker proves it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    # Type-only: the producer package imports this module for its own annotations.
    from .connection import Connection
    from .consumer.settings import InitialPosition
    from .exceptions import Result
    from .partition_watch import PartitionWatch
    from .producer.limits import MemoryLimit
    from .protocol.message_id import MessageId
    from .timer import Timer

__all__ = ["ClientServices", "Closeable", "DeadLetterSender", "TrackedHandler"]

R = TypeVar("R")


class Closeable(Protocol):
    """A producer, consumer or reader, as the client tracks it: closing the client closes it."""

    def close(self) -> None:
        """Release it (flushing a producer first); idempotent."""
        ...


class TrackedHandler(Closeable, Protocol):
    """A producer or consumer as the client tracks it: closed with it, shut down with it, and asked
    for its stats line every ``stats_interval_in_seconds``."""

    def shutdown(self) -> None:
        """Release it at once: no flush, nothing sent to the broker; pending sends fail."""
        ...

    def log_stats(self) -> None:
        """Log one line of its statistics."""
        ...

    def forked(self, parent_pid: int) -> None:
        """This process was forked from ``parent_pid``, which keeps its broker session: refuse every
        call from now on (AlreadyClosed, saying why), close without a word to the broker, take no
        lock a thread of the parent may have held."""
        ...


class DeadLetterSender(Closeable, Protocol):
    """The producer a consumer opens on its dead-letter topic: what it sends, and closing it."""

    def send(
        self,
        content: bytes,
        *,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        event_timestamp: int | None = None,
    ) -> MessageId:
        """Publish one message and wait for the broker's receipt."""
        ...


class ClientServices(Protocol):
    """The client's services to the producers, consumers and readers it creates.

    Attributes are read-only here: a fake may provide them as plain attributes.
    """

    @property
    def operation_timeout(self) -> float:
        """Seconds a broker request (PRODUCER, SUBSCRIBE, ACK with receipt, SEEK, ...) may take."""
        ...

    @property
    def timer(self) -> Timer:
        """The client's one timer thread: batch delays, send timeouts, ack grouping, redeliveries."""
        ...

    @property
    def memory_limit(self) -> MemoryLimit:
        """Uncompressed payload bytes shared by every producer of the client (``memory_limit_bytes``)."""
        ...

    @property
    def partition_watch(self) -> PartitionWatch:
        """The client's one thread that opens producers and consumers on partitions added to their topics."""
        ...

    def lookup(self, topic: str) -> Connection:
        """The connection to the broker that serves ``topic`` (one full lookup, redirects followed)."""
        ...

    def with_retries(
        self, what: str, operation: Callable[[], R], deadline: float | None = None, retryable: frozenset[Result] = ...
    ) -> R:
        """Run ``operation``, retrying ``retryable`` errors (by default those worth retrying with any
        request) with backoff until ``deadline`` (monotonic) or the operation timeout; ``what`` names
        it in the log."""
        ...

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic`` from its partitioned metadata; 0 for a non-partitioned topic."""
        ...

    def topics_of_namespace(self, namespace: str, mode: int) -> list[str]:
        """The topics of ``namespace`` of the kind ``mode`` (``CommandGetTopicsOfNamespace.Mode``)."""
        ...

    def register(self, handler: TrackedHandler) -> None:
        """Track a producer, consumer or reader once it is open, so closing the client closes it."""
        ...

    def unregister(self, handler: TrackedHandler) -> None:
        """Forget a handler that closed itself (unknown handlers are ignored)."""
        ...

    def create_producer(self, topic: str, *, batching_enabled: bool = ...) -> DeadLetterSender:
        """A producer on ``topic``; a consumer opens one on its dead-letter topic."""
        ...

    def subscribe(self, topic: str, subscription_name: str, *, initial_position: InitialPosition = ...) -> Closeable:
        """A consumer on ``topic``; a consumer makes its dead-letter topic's initial subscription with one."""
        ...
