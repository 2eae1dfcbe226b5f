"""PulsarConsumeOperator: read messages from a subscription, hand them to a user function, acknowledge."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_pulsar import arguments
from airflow_pulsar.client import Consumer, ConsumerType, Message, SubscribeOptions, exceptions
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.message_source import TEMPLATE_FIELDS, dead_letter_arguments, dead_letter_policy
from airflow_pulsar.templated_arguments import TemplatedArguments

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk.types import Logger

ACK_MODES = ("individual", "cumulative", "end_of_operator", "never")
# Cumulative acks cover a position in a partition, which only one consumer at a time reads.
_CUMULATIVE_TYPES = (ConsumerType.Exclusive, ConsumerType.Failover)
# How long a failing task waits for its negative acks to reach the broker before it closes.
_NACK_SETTLE_SECONDS = 2.0


class PulsarConsumeOperator(TemplatedArguments):
    """
    Consume messages from Pulsar topics and process them with a user function.

    The operator subscribes, receives batches (up to ``max_batch_size`` messages: it waits up to
    ``poll_timeout`` seconds for the first one, then takes what has already arrived) and hands
    each message (a ``airflow_pulsar.client.Message``: ``data()``, ``properties()``,
    ``partition_key()``, ``message_id()``, ...) to ``apply_function``, or the whole batch (a
    list) to ``apply_function_batch``. It stops after ``max_messages`` messages, or when no
    message arrives within ``poll_timeout``.

    Acknowledgement (``ack``):

    * ``"individual"``: each message once its function call succeeded (for a batch function,
      every message of the batch once the call succeeded);
    * ``"cumulative"``: at the end of each batch, up to the batch's last message in each
      partition; needs an ``Exclusive`` or ``Failover`` subscription (checked when the DAG is parsed);
    * ``"end_of_operator"``: every message, once every batch succeeded, so a task that fails
      leaves all it received to be delivered again (each received message stays unacknowledged
      until then: on a ``Shared`` subscription Pulsar stops delivering to a consumer holding
      ``maxUnackedMessagesPerConsumer``, 50,000 by default, so bound ``max_messages`` below it);
    * ``"never"``: nothing is acknowledged; the messages stay in the subscription's backlog.

    When the function raises, the messages not yet acknowledged in that batch (with
    ``"end_of_operator"``, every message received) are negatively acknowledged (the broker
    redelivers them) and the task fails. With a dead-letter policy (``max_redeliver_count``) the
    task goes on instead: the failed message (for a batch function, the batch) is negatively
    acknowledged and comes back within the run, and once it has failed again after
    ``max_redeliver_count`` redeliveries the client publishes it to the dead-letter topic
    (properties ``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID`` name its origin) and acknowledges it
    here. The retries happen within one run because Pulsar forgets its redelivery counts when a
    subscription's last consumer leaves. Each delivery counts towards ``max_messages``. Returns a
    summary to XCom: ``{"topics", "topics_pattern", "subscription", "ack", "messages", "batches",
    "acknowledged", "dead_lettered"}``.

    :param topics: A topic, a list of topics, or a ``re.Pattern`` of topic names (as ``topics_pattern``). Templated.
    :param topics_pattern: Instead of ``topics``, a regular expression of full topic names in one
        namespace, e.g. ``"persistent://public/default/orders-.*"``: the matching topics, and those
        created later (checked every ``pattern_auto_discovery_period`` seconds of
        ``consumer_settings``, 60 by default). Templated.
    :param subscription: The subscription name. Templated.
    :param apply_function: Called with each message; a callable or a dotted path.
    :param apply_function_batch: Called with each batch (a list of messages) instead.
    :param apply_function_args: Extra positional arguments for the function. Templated.
    :param apply_function_kwargs: Extra keyword arguments for the function. Templated.
    :param subscription_type: ``Shared`` (default), ``Exclusive``, ``Failover`` or ``KeyShared``.
    :param initial_position: Where a new subscription starts: ``Earliest`` (default) or ``Latest``.
    :param ack: ``individual`` (default), ``cumulative``, ``end_of_operator`` or ``never``.
    :param max_messages: Stop after this many messages; None: until ``poll_timeout`` passes without one.
    :param max_batch_size: The most messages in one batch (default 1000).
    :param poll_timeout: Seconds to wait for the first message of a batch (default 60).
    :param consumer_settings: Further ``subscribe`` keyword arguments (``receiver_queue_size``,
        ``negative_ack_redelivery_delay_ms``, ...).
    :param pulsar_conn_id: The Pulsar connection, ``pulsar_default`` by default. Templated.
    :param dead_letter_topic: The dead-letter topic; None (default): ``<topic>-<subscription>-DLQ``.
        Needs ``max_redeliver_count``.
    :param max_redeliver_count: Redeliveries after which a failing message goes to the dead-letter
        topic (>= 1); None (default): no dead-letter policy, a failing function fails the task.
        Needs a ``Shared`` or ``KeyShared`` subscription, the types on which Pulsar counts redeliveries.

    Example::

        PulsarConsumeOperator(
            task_id="load_orders",
            topics=["orders"],
            subscription="warehouse",
            apply_function_batch="my_project.orders.load",
            max_messages=10_000,
            poll_timeout=5,
        )
    """

    template_fields: Sequence[str] = TEMPLATE_FIELDS
    ui_color = "#ffefe0"

    def __init__(
        self,
        *,
        topics: str | Sequence[str] | re.Pattern[str] | None = None,
        subscription: str,
        apply_function: Callable[..., Any] | str | None = None,
        apply_function_batch: Callable[..., Any] | str | None = None,
        apply_function_args: Sequence[Any] | None = None,
        apply_function_kwargs: Mapping[str, Any] | None = None,
        subscription_type: ConsumerType | str = ConsumerType.Shared,
        initial_position: Any = "Earliest",
        ack: str = "individual",
        max_messages: int | None = None,
        max_batch_size: int = 1000,
        poll_timeout: float = 60.0,
        consumer_settings: Mapping[str, Any] | None = None,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
        dead_letter_topic: str | None = None,
        max_redeliver_count: int | None = None,
        topics_pattern: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        topics, topics_pattern = arguments.topic_source(topics, topics_pattern)
        self.topics = [] if topics is None else self._argument("topics", topics, arguments.topic_list)
        self.topics_pattern = (
            None if topics_pattern is None else self._argument("topics_pattern", topics_pattern, arguments.topics_pattern)
        )
        self.subscription = self._argument("subscription", subscription, arguments.non_empty_str)
        self.apply_function, self.apply_function_batch = arguments.apply_functions(apply_function, apply_function_batch)
        self.apply_function_args = self._argument("apply_function_args", apply_function_args, arguments.function_args)
        self.apply_function_kwargs = self._argument(
            "apply_function_kwargs", apply_function_kwargs, arguments.function_kwargs
        )
        self.subscription_type = arguments.consumer_type(subscription_type)
        self.initial_position = arguments.initial_position(initial_position)
        if ack not in ACK_MODES:
            raise ValueError(f"ack must be one of {', '.join(ACK_MODES)}, got {ack!r}")
        if ack == "cumulative" and self.subscription_type not in _CUMULATIVE_TYPES:
            raise ValueError(
                f"ack='cumulative' needs an Exclusive or Failover subscription, got {self.subscription_type.name}: "
                "on a Shared or KeyShared subscription several consumers read one partition, so use ack='individual'"
            )
        self.ack = ack
        self.max_messages = arguments.positive_int(max_messages, "max_messages", optional=True)
        self.max_batch_size = arguments.positive_int(max_batch_size, "max_batch_size")
        self.poll_timeout = arguments.seconds(poll_timeout, "poll_timeout", allow_zero=True)
        self.consumer_settings = self._checked_consumer_settings(consumer_settings)
        self.pulsar_conn_id = self._argument("pulsar_conn_id", pulsar_conn_id, arguments.non_empty_str)
        self.dead_letter_topic, self.max_redeliver_count = dead_letter_arguments(
            dead_letter_topic, max_redeliver_count, self.subscription_type
        )
        if "dead_letter_policy" in self.consumer_settings:
            raise ValueError("consumer_settings must not set 'dead_letter_policy': use max_redeliver_count and dead_letter_topic")
        if ack == "end_of_operator" and self.max_redeliver_count is not None:
            # The policy retries a rejected message within the run, while end_of_operator would
            # acknowledge every message received, rejected ones included, at the end.
            raise ValueError("ack='end_of_operator' cannot be combined with max_redeliver_count: use ack='individual'")

    def _checked_consumer_settings(self, settings: Mapping[str, Any] | None) -> dict[str, Any]:
        settings = dict(settings or {})
        for own in ("subscription_name", "consumer_type", "initial_position", "message_listener"):
            if own in settings:
                raise ValueError(f"consumer_settings must not set {own!r}: it is the operator's own argument")
        # A failing function's negative acks should reach the broker before the task ends.
        settings.setdefault("negative_ack_redelivery_delay_ms", 0)
        # Messages of a producer batch are acknowledged one by one, so a failed task redoes only its own.
        settings.setdefault("batch_index_ack_enabled", True)
        try:
            options = SubscribeOptions.from_settings(
                consumer_type=self.subscription_type, initial_position=self.initial_position, **settings
            )
            # The name is checked on its own (maybe once rendered); these are checked with any.
            options.check("subscription")
        except Exception as exc:  # ValueError, or TypeError for an unknown name
            raise ValueError(f"consumer_settings: {exc}") from None
        return settings

    def execute(self, context: Any) -> dict[str, Any]:
        """Receive and process batches until ``max_messages`` or a quiet ``poll_timeout``; return a summary."""
        if self.apply_function is not None:
            function = arguments.resolve_function(self.apply_function, "apply_function")
        else:
            function = arguments.resolve_function(self.apply_function_batch, "apply_function_batch")
        apply = partial(function, *self.apply_function_args, **self.apply_function_kwargs)
        messages = batches = acknowledged = dead_lettered = 0
        policy = dead_letter_policy(self.dead_letter_topic, self.max_redeliver_count)
        held: list[Message] = []  # ack="end_of_operator": processed, acknowledged once every batch succeeded
        with PulsarHook(pulsar_conn_id=self.pulsar_conn_id) as hook:
            consumer = hook.subscribe(
                arguments.subscribed_topics(self.topics, self.topics_pattern),
                self.subscription,
                consumer_type=self.subscription_type,
                initial_position=self.initial_position,
                dead_letter_policy=policy,
                **self.consumer_settings,
            )
            route = None if policy is None else _DeadLetterRoute(consumer, policy.max_redeliver_count, self.log)
            while self.max_messages is None or messages < self.max_messages:
                limit = self.max_batch_size
                if self.max_messages is not None:
                    limit = min(limit, self.max_messages - messages)
                batch = receive_batch(consumer, limit, self.poll_timeout)
                if not batch:
                    self.log.info("No message within %s s; stopping", self.poll_timeout)
                    break
                try:
                    acknowledged += self._process(consumer, batch, apply, route)
                except Exception:
                    if held:
                        self._reject(consumer, held)
                    raise
                if self.ack == "end_of_operator":
                    held.extend(batch)
                messages += len(batch)
                batches += 1
            for message in held:
                consumer.acknowledge(message)
            acknowledged += len(held)
            if route is not None:
                delay = self.consumer_settings.get("negative_ack_redelivery_delay_ms", 0) / 1000
                dead_lettered = route.settle(delay + _NACK_SETTLE_SECONDS)
        self.log.info(
            "Consumed %d messages in %d batches from %s; acknowledged %d (%s)",
            messages, batches, self.topics_pattern or ", ".join(self.topics), acknowledged, self.ack,
        )
        return {
            "topics": list(self.topics),
            "topics_pattern": self.topics_pattern,
            "subscription": self.subscription,
            "ack": self.ack,
            "messages": messages,
            "batches": batches,
            "acknowledged": acknowledged,
            "dead_lettered": dead_lettered,
        }

    def _process(
        self, consumer: Consumer, batch: list[Message], apply: Callable[..., Any], route: _DeadLetterRoute | None
    ) -> int:
        """Apply the function to one batch and acknowledge as ``ack`` says; returns how many were acked."""
        acked = 0
        if self.apply_function is not None:
            for index, message in enumerate(batch):
                try:
                    apply(message)
                except Exception:
                    if route is None:
                        self._reject(consumer, batch[index:])
                        raise
                    route.reject([message])
                    continue
                if self.ack == "individual":
                    consumer.acknowledge(message)
                    acked += 1
        else:
            try:
                apply(batch)
            except Exception:
                if route is None:
                    self._reject(consumer, batch)
                    raise
                route.reject(batch)
                return 0
            if self.ack == "individual":
                for message in batch:
                    consumer.acknowledge(message)
                acked = len(batch)
        if self.ack == "cumulative":
            last_by_partition = {message.topic_name(): message for message in batch}
            for message in last_by_partition.values():
                consumer.acknowledge_cumulative(message)
            acked = len(batch)
        return acked

    def _reject(self, consumer: Consumer, messages: list[Message]) -> None:
        """Negatively acknowledge ``messages`` and give the negative acks time to reach the broker."""
        self.log.error("The function failed; negatively acknowledging %d message(s)", len(messages))
        for message in messages:
            consumer.negative_acknowledge(message)
        deadline = time.monotonic() + _NACK_SETTLE_SECONDS
        while consumer.stats().pending_nacks and time.monotonic() < deadline:
            time.sleep(0.05)

    # ---- OpenLineage (called by the OpenLineage provider's listener when it is installed) ----

    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        """The topics this task reads, as OpenLineage input datasets."""
        from airflow_pulsar import lineage

        namespace = lineage.cluster_of(self.pulsar_conn_id)
        return lineage.lineage(inputs=lineage.topic_inputs(namespace, lineage.topic_names(self.topics)))


def receive_batch(consumer: Consumer, limit: int, poll_timeout: float) -> list[Message]:
    """Up to ``limit`` messages: waits up to ``poll_timeout`` seconds for the first, then takes
    those already arrived; empty when none came in time."""
    try:
        batch = [consumer.receive(timeout_millis=int(poll_timeout * 1000))]
    except exceptions.Timeout:
        return []
    while len(batch) < limit:
        try:
            batch.append(consumer.receive(timeout_millis=0))
        except exceptions.Timeout:
            break
    return batch


class _DeadLetterRoute:
    """A run's failed messages under a dead-letter policy: redelivered until their last chance, then moved."""

    def __init__(self, consumer: Consumer, max_redeliver_count: int, log: Logger) -> None:
        self._consumer = consumer
        self._max_redeliver_count = max_redeliver_count
        self._last_chances = 0
        self.log = log

    def reject(self, messages: list[Message]) -> None:
        """Negatively acknowledge failed messages; the client moves those on their last delivery."""
        self.log.warning("The function failed; negatively acknowledging %d message(s)", len(messages))
        for message in messages:
            self._consumer.negative_acknowledge(message)
            if message.redelivery_count() >= self._max_redeliver_count:
                self._last_chances += 1

    def settle(self, timeout: float) -> int:
        """Wait (up to ``timeout`` seconds) until the messages failed on their last delivery are in
        the dead-letter topic and acknowledged, before the consumer closes; returns how many moved."""
        deadline = time.monotonic() + timeout
        while (moved := self._consumer.stats().dead_lettered) < self._last_chances and time.monotonic() < deadline:
            time.sleep(0.05)
        if moved < self._last_chances:
            self.log.warning(
                "%d of %d message(s) not yet in the dead-letter topic; they stay in the subscription",
                self._last_chances - moved, self._last_chances,
            )
        return moved
