"""The exclusive hold an ingest run keeps on its subscription from planning to the last ack.

One Exclusive consumer per topic partition, with a receiver queue of 0: it never asks for a
message, so nothing is delivered to it, but while it is connected no other consumer can attach
to the subscription, so two runs cannot plan or acknowledge the same messages. Through these
consumers the run reads each partition's mark-delete position and newest entry, and finally
acknowledges cumulatively at the batch's end, waiting for the broker's receipt.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from airflow_pulsar.client import Client, Consumer, ConsumerType, InitialPosition, PulsarException, Result
from airflow_pulsar.client.topic_name import TopicName

from ..job.plan import Position

log = logging.getLogger(__name__)


class SubscriptionBusy(RuntimeError):
    """Another consumer (another ingest run, or some other application) holds the subscription."""


@dataclass(frozen=True)
class PartitionState:
    """Where a partition stands for the subscription: acknowledged up to ``mark_delete``, and
    holding entries up to ``last``. Empty when ``last <= mark_delete``. ``last_message``, when set,
    is the newest entry a reader can be given, before ``last`` (transaction markers and aborted
    messages follow it)."""

    topic: str
    source_topic: str
    partition: int
    mark_delete: Position
    last: Position
    last_message: Position | None = None

    @property
    def empty(self) -> bool:
        return self.last <= self.mark_delete


class SubscriptionHold:
    """Exclusive, permit-less consumers on every partition of ``topics`` for ``subscription``."""

    def __init__(
        self,
        client: Client,
        topics: list[str],
        subscription: str,
        initial_position: InitialPosition = InitialPosition.Earliest,
    ):
        self.subscription = subscription
        self._consumers: dict[str, tuple[str, int, Consumer]] = {}
        try:
            for source in topics:
                for topic in client.get_topic_partitions(source):
                    partition = TopicName.parse(topic).partition
                    consumer = self._subscribe(client, topic, initial_position)
                    self._consumers[topic] = (source, partition, consumer)
        except BaseException:
            self.close()
            raise
        log.info("holding subscription %r on %d partition(s) of %s", subscription, len(self._consumers), ", ".join(topics))

    def _subscribe(self, client: Client, topic: str, initial_position: InitialPosition) -> Consumer:
        try:
            return client.subscribe(
                topic,
                self.subscription,
                consumer_type=ConsumerType.Exclusive,
                receiver_queue_size=0,
                initial_position=initial_position,
                ack_receipt_enabled=True,
                consumer_name=f"ingest-hold-{self.subscription}",
            )
        except PulsarException as exc:
            if exc.result == Result.ConsumerBusy:
                raise SubscriptionBusy(
                    f"subscription {self.subscription!r} on {topic} is held by another consumer "
                    f"(another ingest run?): {exc}"
                ) from exc
            raise

    @property
    def topics(self) -> list[str]:
        """The partition topics held, in order."""
        return list(self._consumers)

    def states(self) -> list[PartitionState]:
        """Each partition's mark-delete position and newest entry, asked of the broker now."""
        states = []
        for topic, (source, partition, consumer) in self._consumers.items():
            last, mark_delete = consumer.get_last_message_ids()[topic]
            if mark_delete is None:
                raise RuntimeError(f"the broker did not report the mark-delete position of {self.subscription!r} on {topic}")
            states.append(PartitionState(topic, source, partition, Position.of(mark_delete), Position.of(last)))
        return states

    def acknowledge_through(self, topic: str, position: Position) -> None:
        """Acknowledge every entry of ``topic`` up to ``position`` (inclusive); returns once the
        broker has confirmed. Repeating it, or acknowledging below the mark-delete, changes nothing."""
        _, partition, consumer = self._consumers[topic]
        consumer.acknowledge_cumulative(position.message_id(partition))

    def close(self) -> None:
        """Let the subscription go (pending acks are flushed first)."""
        consumers, self._consumers = self._consumers, {}
        for _, _, consumer in consumers.values():
            try:
                consumer.close()
            except PulsarException as exc:
                log.warning("closing the hold on %s: %s", consumer.topic(), exc)

    def __enter__(self) -> SubscriptionHold:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
