"""Choosing a partition for each message: routing modes, key hashing, custom routers.

A message with a partition key always goes to ``hash(key) % n`` (the key supersedes the mode, as
in the Java and C++ clients). Unkeyed messages follow the routing mode:

* RoundRobinDistribution: with batching, the partition changes every
  ``batching_max_publish_delay_ms * batching_partition_switch_frequency_by_publish_delay`` ms, so
  consecutive messages fill one batch; without batching, every message goes to the next partition.
* UseSinglePartition: one partition, picked at random when the producer starts.
* CustomPartition: the user's ``message_router(message, num_partitions)``, such as a
  :class:`DeterministicRouter`, which routes by the message alone (its key, else its sequence id).

Optionally (``skip_full_partitions``) an unkeyed message skips partitions whose pending queue is
full, so one slow partition does not hold up the whole topic.
"""

from __future__ import annotations

import enum
import itertools
import random
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..arguments import check, is_int, to_enum
from ..exceptions import InvalidConfiguration
from ..hashing import java_string_hash, murmur3_32
from .message import OutgoingMessage

__all__ = [
    "CustomRouter",
    "DeterministicRouter",
    "HashingScheme",
    "KeyHashRouter",
    "MessageRouter",
    "PartitionsRoutingMode",
    "RoundRobinRouter",
    "SinglePartitionRouter",
    "hash_function",
]


class PartitionsRoutingMode(enum.IntEnum):
    """Routing of unkeyed messages; names and values of the official client's enum."""

    UseSinglePartition = 0
    RoundRobinDistribution = 1
    CustomPartition = 2


class HashingScheme(enum.IntEnum):
    """Hash of a partition key; values of the C++ client's enum."""

    JavaStringHash = 0
    Murmur3_32Hash = 1


def hash_function(scheme: HashingScheme) -> Callable[[str], int]:
    """The non-negative 31-bit key hash of a scheme."""
    return java_string_hash if scheme == HashingScheme.JavaStringHash else murmur3_32


class MessageRouter(Protocol):
    """Picks the partition index of one message."""

    def choose_partition(self, message: OutgoingMessage, num_partitions: int) -> int: ...


IsFull = Callable[[int], bool]


class KeyHashRouter:
    """Common part of the built-in modes: keyed messages by hash, optional skipping of full partitions."""

    def __init__(self, scheme: HashingScheme, is_full: IsFull | None = None):
        self._hash = hash_function(scheme)
        self._is_full = is_full

    def choose_partition(self, message: OutgoingMessage, num_partitions: int) -> int:
        """hash(key) % n for keyed messages, the mode's choice otherwise."""
        key = message.key
        if key is not None:
            return self._hash(key) % num_partitions
        return self.choose_unkeyed(num_partitions)

    def choose_unkeyed(self, num_partitions: int) -> int:
        """The partition of a message without a key (no message object needed)."""
        chosen = self._unkeyed(num_partitions)
        if self._is_full is not None and self._is_full(chosen):
            for step in range(1, num_partitions):
                candidate = (chosen + step) % num_partitions
                if not self._is_full(candidate):
                    return candidate
        return chosen

    def _unkeyed(self, num_partitions: int) -> int:
        raise NotImplementedError


class RoundRobinRouter(KeyHashRouter):
    """Round robin: per time slice when batching, per message otherwise."""

    def __init__(
        self,
        scheme: HashingScheme,
        batching: bool,
        switch_interval_ms: int,
        is_full: IsFull | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__(scheme, is_full)
        self._batching = batching
        self._switch_ms = max(1, switch_interval_ms)
        self._clock = clock
        # Random start so many producers do not all begin on partition 0.
        self._start = random.randrange(1 << 16)
        self._counter = itertools.count(self._start)

    def _unkeyed(self, num_partitions: int) -> int:
        if self._batching:
            return (int(self._clock() * 1000) // self._switch_ms + self._start) % num_partitions
        return next(self._counter) % num_partitions


class SinglePartitionRouter(KeyHashRouter):
    """All unkeyed messages on one partition chosen at random."""

    def __init__(self, scheme: HashingScheme, num_partitions: int, is_full: IsFull | None = None):
        super().__init__(scheme, is_full)
        self._partition = random.randrange(num_partitions)

    def _unkeyed(self, num_partitions: int) -> int:
        return self._partition


class CustomRouter:
    """The user's ``message_router(message, num_partitions) -> int``, with its answer checked."""

    def __init__(self, router: Callable[[Any, int], int]):
        self._router = router

    def choose_partition(self, message: OutgoingMessage, num_partitions: int) -> int:
        """Ask the user's router."""
        partition = int(self._router(message, num_partitions))
        if not 0 <= partition < num_partitions:
            raise InvalidConfiguration(f"message_router returned {partition}, not in 0..{num_partitions - 1}")
        return partition


class DeterministicRouter:
    """A ``message_router`` that picks each message's partition from the message alone, never from
    the time, the load or what was sent before: the same message goes to the same partition, in
    this producer or any later one, as long as the topic keeps its partition count. A retried task
    whose producer sends its messages again (under the same sequence ids) so reaches, on each
    partition, the messages an earlier try stored there.

    A keyed message goes to ``hash(key) % n`` (``hashing_scheme``), as every Pulsar producer sends
    it. An unkeyed one goes by its sequence id, which must be given to ``send``: round robin, a
    run of ``messages_per_partition`` consecutive ids to each partition (so that consecutive
    messages still share batches); or, given ``default_key``, all to the partition of that key.
    """

    __slots__ = ("_hash", "_run", "_default_key")

    def __init__(
        self,
        hashing_scheme: HashingScheme = HashingScheme.JavaStringHash,
        messages_per_partition: int = 1,
        default_key: str | None = None,
    ):
        check(is_int(messages_per_partition) and messages_per_partition > 0, "messages_per_partition", "an int > 0", messages_per_partition)
        check(default_key is None or isinstance(default_key, str), "default_key", "a str or None", default_key)
        self._hash = hash_function(to_enum(HashingScheme, hashing_scheme, "hashing_scheme"))
        self._run = messages_per_partition
        self._default_key = default_key

    def __call__(self, message: OutgoingMessage, num_partitions: int) -> int:
        """The partition index of ``message`` among ``num_partitions``.

        Raises:
            ValueError: the message has neither a key nor a sequence id (and there is no default key).
        """
        key = message.key if message.key is not None else self._default_key
        if key is not None:
            return self._hash(key) % num_partitions
        sequence_id = message.sequence_id
        if sequence_id is None:
            raise ValueError("DeterministicRouter routes a message without a partition_key by its sequence_id: give send() one")
        return sequence_id // self._run % num_partitions
