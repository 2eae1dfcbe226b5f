"""Producers on a topic: the producer as the broker sees it, and Pulsar's access modes
(Shared, Exclusive, ExclusiveWithFencing, WaitForExclusive) with the topic epoch, for persistent
and non-persistent topics alike."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_pulsar.client.protocol.PulsarApi_pb2 import ProducerAccessMode
from airflow_pulsar.client.topic_name import TopicName

from .client_limits import ClientLimits
from .rates import RateMeter
from .subscription_rules import SubscriptionError

ACCESS_MODE_NAMES: dict[int, str] = {v: k for k, v in ProducerAccessMode.items()}


class ProducerSink(Protocol):
    """What a producer needs from its connection."""

    def close_producer(self, producer_id: int) -> None: ...

    def drop_producer(self, producer_id: int) -> None: ...

    @property
    def remote_address(self) -> str: ...


@dataclass(eq=False)
class ServerProducer:
    """A producer attached to a topic."""

    sink: ProducerSink
    producer_id: int
    name: str
    access_mode: int = ProducerAccessMode.Shared
    # The version of the schema it declared (Pulsar's 8 bytes), empty without one.
    schema_version: bytes = b""
    connected_since: float = field(default_factory=time.time)
    msg_in: int = 0
    bytes_in: int = 0
    in_rate: RateMeter = field(default_factory=RateMeter)

    def stats(self) -> dict[str, Any]:
        """The producer's entry in Pulsar's ``publishers`` list."""
        msg_rate, byte_rate = self.in_rate.rates()
        return {
            "producerId": self.producer_id,
            "producerName": self.name,
            "accessMode": ACCESS_MODE_NAMES.get(self.access_mode, "Shared"),
            "msgRateIn": msg_rate,
            "msgThroughputIn": byte_rate,
            "address": self.sink.remote_address,
            "connectedSince": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.connected_since)),
        }


class ProducerAccess:
    """The producers attached to one topic (or partition), admitted by their access mode."""

    def __init__(self, name: TopicName, limits: ClientLimits):
        self.name = name
        self.limits = limits
        self.producers: list[ServerProducer] = []
        # Producer access (Pulsar's rules): the exclusive producer, if any; the topic epoch, which
        # each exclusive producer raises (None until the first); WaitForExclusive producers queued.
        self._exclusive: ServerProducer | None = None
        self.topic_epoch: int | None = None
        self._exclusive_waiters: list[asyncio.Future[None]] = []

    async def add_producer(self, producer: ServerProducer, epoch: int | None = None, queued: Callable[[], None] | None = None) -> None:
        """Attach a producer, enforcing its access mode as Pulsar does (WaitForExclusive may wait,
        and ``queued`` is called once when it starts to).

        ``epoch`` is the topic epoch a reconnecting exclusive producer had: one older than the
        topic's means another exclusive producer came in between, and it stays fenced.
        """
        self.check_producer_room()
        mode = producer.access_mode
        holder = self._exclusive.name if self._exclusive is not None else None
        if mode == ProducerAccessMode.Shared:
            if self._exclusive is not None or self._exclusive_waiters:
                raise SubscriptionError("ProducerBusy", f"Topic has an existing exclusive producer: {holder}")
            self.producers.append(producer)
            return
        if mode == ProducerAccessMode.Exclusive:
            if self._exclusive is not None or self._exclusive_waiters:
                raise SubscriptionError("ProducerFenced", f"Topic has an existing exclusive producer: {holder}")
            if self.producers:
                raise SubscriptionError("ProducerFenced", "Topic has existing shared producers")
            self._check_epoch(epoch)
        elif mode == ProducerAccessMode.ExclusiveWithFencing:
            if self._exclusive is not None or self.producers:
                self._fence_everyone()
            self._check_epoch(epoch)
        elif self._exclusive is None and not self.producers:  # WaitForExclusive, the topic free
            self._check_epoch(epoch)
        else:
            # WaitForExclusive, queued until the topic is free. As in Pulsar, a queued producer is
            # promoted with the epoch it brings, unchecked: a fenced one waits and gets back in.
            if queued is not None:
                queued()
            while self._exclusive is not None or self.producers:
                waiter = asyncio.get_running_loop().create_future()
                self._exclusive_waiters.append(waiter)
                await waiter  # raises when fenced out meanwhile
        self._exclusive = producer
        self.topic_epoch = epoch if epoch is not None else (-1 if self.topic_epoch is None else self.topic_epoch) + 1
        self.producers.append(producer)

    def check_producer_room(self) -> None:
        """Refuse another producer when the topic has Pulsar's maxProducersPerTopic already."""
        limit = self.limits.max_producers_per_topic
        if limit and len(self.producers) >= limit:
            raise SubscriptionError("ProducerBusy", f"Topic '{self.name}' reached max producers limit")  # Pulsar's words

    def _check_epoch(self, epoch: int | None) -> None:
        if epoch is not None and self.topic_epoch is not None and epoch < self.topic_epoch:
            raise SubscriptionError(
                "ProducerFenced",
                f"Topic epoch has already moved. Current epoch: {self.topic_epoch}, Producer epoch: {epoch}",
            )

    def _fence_everyone(self) -> None:
        """ExclusiveWithFencing: fail the queued exclusive producers and drop every producer.

        As Pulsar does, the dropped producers' clients are not told: one told would reconnect at
        once and, were it ExclusiveWithFencing too, fence the newcomer back. A fenced producer
        learns it at its next SEND, which fails and makes it reconnect into the epoch check.
        """
        waiters, self._exclusive_waiters = self._exclusive_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(SubscriptionError("ProducerFenced", "Fenced out"))
        for other in list(self.producers):
            self.remove_producer(other)
            other.sink.drop_producer(other.producer_id)

    def remove_producer(self, producer: ServerProducer) -> None:
        """Detach a producer; once none is left, the first queued exclusive producer gets in."""
        if producer in self.producers:
            self.producers.remove(producer)
        if producer is self._exclusive:
            self._exclusive = None
        if not self.producers:
            while self._exclusive_waiters:
                waiter = self._exclusive_waiters.pop(0)
                if not waiter.done():
                    waiter.set_result(None)
                    break

    def last_sequence_id(self, producer_name: str) -> int:
        """The highest sequence id kept for a producer name: none (-1) unless deduplicating."""
        return -1

    def close_producers(self) -> None:
        """Close every producer (the topic is going away); their clients are told."""
        for producer in list(self.producers):
            self.remove_producer(producer)
            producer.sink.close_producer(producer.producer_id)
