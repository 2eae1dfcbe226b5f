"""Consumers over several partitions: a partitioned topic, a list of topics, or a regex pattern.

Every partition gets its own PartitionConsumer, all feeding one receiver queue, so ``receive``
merges them as they arrive. Each partition's queue is ``min(receiver_queue_size,
max_total_receiver_queue_size_across_partitions / partitions)``. A pattern consumer looks for new
matching topics every ``pattern_auto_discovery_period`` seconds and subscribes to them; the
client's partition watch subscribes to the partitions a topic gains.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import TYPE_CHECKING

from ..exceptions import InvalidConfiguration, PulsarException
from ..protocol.message_id import MessageId
from ..topic_name import TopicName
from .consumer import Consumer
from .partition_consumer import PartitionConsumer
from .settings import ConsumerSettings

if TYPE_CHECKING:
    from ..services import ClientServices

log = logging.getLogger(__name__)


def partitions_of(client: ClientServices, topic: str) -> list[tuple[str, int]]:
    """(topic name, partition index) of each partition, or [(topic, -1)] when not partitioned."""
    return _targets(topic, client.partition_count(topic))


def _targets(topic: str, count: int) -> list[tuple[str, int]]:
    """(topic name, partition index) of each of ``count`` partitions, or [(topic, its own index)]
    for a topic that is not partitioned (``count`` 0)."""
    name = TopicName.parse(topic)
    if count == 0:
        return [(str(name), name.partition)]
    return [(str(name.partition_name(i)), i) for i in range(count)]


class MultiTopicsConsumer(Consumer):
    """A Consumer over the partitions of one or more topics, or of every topic matching a pattern."""

    def __init__(
        self,
        client: ClientServices,
        topics: list[str] | re.Pattern[str],
        settings: ConsumerSettings,
        start_message_id: MessageId | None = None,
    ):
        label = topics.pattern if isinstance(topics, re.Pattern) else ",".join(topics)
        super().__init__(client, label, settings)
        self._pattern = topics if isinstance(topics, re.Pattern) else None
        self._start_message_id = start_message_id
        self._stop = threading.Event()
        # Each topic subscribed to, with its partitions (0: not partitioned); pattern discovery and
        # the partition watch change it on their threads, one at a time.
        self._partition_counts: dict[str, int] = {}
        self._topics_lock = threading.Lock()
        names = self._matching_topics() if isinstance(topics, re.Pattern) else list(topics)
        try:
            self._subscribe_topics(names)
        except BaseException:
            for child in self._children.values():
                child.close()
            raise
        if self._pattern is not None:
            threading.Thread(target=self._discover, name=f"pulsar-pattern-{label}", daemon=True).start()
        self._start()
        client.partition_watch.watch(self)

    def _subscribe_topics(self, names: list[str]) -> None:
        counts = {topic: self._client.partition_count(topic) for topic in names}
        partitions = [target for topic, count in counts.items() for target in _targets(topic, count)]
        self._subscribe_partitions(partitions)
        self._partition_counts.update(counts)

    def _subscribe_partitions(self, partitions: list[tuple[str, int]]) -> None:
        settings = self._settings
        total = len(partitions) + len(self._children)
        if settings.receiver_queue_size == 0 and total > 1:
            raise InvalidConfiguration("receiver_queue_size=0 (zero queue) works on one non-partitioned topic only")
        per_partition = min(settings.receiver_queue_size, max(settings.max_total_receiver_queue_size_across_partitions // max(total, 1), 1))
        for topic, partition in partitions:
            if topic in self._children:
                continue
            self._add_child(
                PartitionConsumer(self._client, topic, partition, settings, self._queue, per_partition, self._start_message_id, topic)
            )

    # ---- pattern discovery ----

    def _matching_topics(self) -> list[str]:
        """The namespace's topics of the ``regex_subscription_mode`` kind (asked of the broker, and
        checked) that the pattern matches, domain left out on both sides, as the C++ client matches them."""
        assert self._pattern is not None
        namespace = _namespace_of(self._pattern.pattern)
        topics = self._client.topics_of_namespace(namespace, self._settings.regex_subscription_mode.wire)
        pattern = re.compile(_without_domain(self._pattern.pattern))
        # The broker lists the mode's domains; a broker that ignores the mode (or lists a domain
        # it was not asked for) does not widen the subscription.
        domains = self._settings.regex_subscription_mode.domains
        names = [TopicName.parse(topic) for topic in topics]
        bases = {str(name.base) for name in names if name.domain in domains}
        return sorted(topic for topic in bases if pattern.fullmatch(_without_domain(topic)))

    def _discover(self) -> None:
        while not self._stop.wait(self._settings.pattern_auto_discovery_period):
            try:
                with self._topics_lock:
                    new = [t for t in self._matching_topics() if t not in self._partition_counts]
                    if new:
                        log.info("pattern %s: subscribing to new topics %s", self._topic_label, new)
                        self._subscribe_topics(new)
            except PulsarException as exc:
                log.warning("pattern %s: topic discovery failed: %s", self._topic_label, exc)

    # ---- partitions added to a topic ----

    def partition_counts(self) -> dict[str, int]:
        """Each partitioned topic subscribed to, with its partitions, for the client's partition watch."""
        with self._topics_lock:
            return {} if self._closing else {topic: count for topic, count in self._partition_counts.items() if count}

    def add_partitions(self, topic: str, partitions: int) -> None:
        """Subscribe to the partitions ``topic`` gained (the broker gave them the subscription when
        it added them, so they hold every message since)."""
        with self._topics_lock:
            known = self._partition_counts[topic]
            name = TopicName.parse(topic)
            self._subscribe_partitions([(str(name.partition_name(i)), i) for i in range(known, partitions)])
            self._partition_counts[topic] = partitions
        self._wait_hook = None  # the zero-queue hook is for a consumer of one partition only

    def _finish_close(self) -> None:
        self._stop.set()
        self._client.partition_watch.unwatch(self)
        super()._finish_close()


def _without_domain(name: str) -> str:
    """``tenant/namespace/topic`` of a name or pattern with or without its ``persistent://`` part."""
    return name.split("://", 1)[1] if "://" in name else name


def _namespace_of(pattern: str) -> str:
    """``tenant/namespace`` of a topic pattern such as ``persistent://public/default/orders-.*``."""
    parts = _without_domain(pattern).split("/")
    if len(parts) < 3 or any(ch in "".join(parts[:2]) for ch in "*+?[](){}|\\^$"):
        raise ValueError(f"Argument topic: pattern {pattern!r} must name its tenant and namespace literally")
    return f"{parts[0]}/{parts[1]}"
