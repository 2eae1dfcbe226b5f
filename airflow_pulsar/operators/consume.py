"""PulsarConsumeOperator: read messages from a subscription, hand them to a user function, acknowledge."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_pulsar import arguments
from airflow_pulsar.client import Consumer, ConsumerType, Message, exceptions
from airflow_pulsar.client.consumer.settings import ConsumerSettings
from airflow_pulsar.hooks.pulsar import PulsarHook

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

ACK_MODES = ("individual", "cumulative", "never")
# Cumulative acks cover a position in a partition, which only one consumer at a time reads.
_CUMULATIVE_TYPES = (ConsumerType.Exclusive, ConsumerType.Failover)
# How long a failing task waits for its negative acks to reach the broker before it closes.
_NACK_SETTLE_SECONDS = 2.0


class PulsarConsumeOperator(BaseOperator):
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
    * ``"never"``: nothing is acknowledged; the messages stay in the subscription's backlog.

    When the function raises, the messages not yet acknowledged in that batch are negatively
    acknowledged (the broker redelivers them and counts the redelivery, which a dead-letter
    policy acts on) and the task fails. Returns a summary to XCom: ``{"topics", "subscription",
    "ack", "messages", "batches", "acknowledged"}``.

    :param topics: A topic or a list of topics. Templated.
    :param subscription: The subscription name. Templated.
    :param apply_function: Called with each message; a callable or a dotted path.
    :param apply_function_batch: Called with each batch (a list of messages) instead.
    :param apply_function_args: Extra positional arguments for the function. Templated.
    :param apply_function_kwargs: Extra keyword arguments for the function. Templated.
    :param subscription_type: ``Shared`` (default), ``Exclusive``, ``Failover`` or ``KeyShared``.
    :param initial_position: Where a new subscription starts: ``Earliest`` (default) or ``Latest``.
    :param ack: ``individual`` (default), ``cumulative`` or ``never``.
    :param max_messages: Stop after this many messages; None: until ``poll_timeout`` passes without one.
    :param max_batch_size: The most messages in one batch (default 1000).
    :param poll_timeout: Seconds to wait for the first message of a batch (default 60).
    :param consumer_settings: Further ``subscribe`` keyword arguments (``receiver_queue_size``,
        ``dead_letter_policy``, ``negative_ack_redelivery_delay_ms``, ...).
    :param pulsar_conn_id: The Pulsar connection, ``pulsar_default`` by default.

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

    template_fields: Sequence[str] = ("topics", "subscription", "apply_function_args", "apply_function_kwargs")
    ui_color = "#ffefe0"

    def __init__(
        self,
        *,
        topics: str | Sequence[str],
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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.topics = arguments.topic_list(topics)
        self.subscription = arguments.non_empty_str(subscription, "subscription")
        if (apply_function is None) == (apply_function_batch is None):
            raise ValueError("give exactly one of apply_function or apply_function_batch")
        self.apply_function = arguments.function_reference(apply_function, "apply_function", optional=True)
        self.apply_function_batch = arguments.function_reference(
            apply_function_batch, "apply_function_batch", optional=True
        )
        self.apply_function_args, self.apply_function_kwargs = arguments.function_arguments(
            apply_function_args, apply_function_kwargs, "apply_function"
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
        self.pulsar_conn_id = arguments.non_empty_str(pulsar_conn_id, "pulsar_conn_id")

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
            ConsumerSettings(
                self.subscription,
                consumer_type=self.subscription_type,
                initial_position=self.initial_position,
                **settings,
            )
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
        messages = batches = acknowledged = 0
        with PulsarHook(pulsar_conn_id=self.pulsar_conn_id) as hook:
            consumer = hook.subscribe(
                self.topics[0] if len(self.topics) == 1 else list(self.topics),
                self.subscription,
                consumer_type=self.subscription_type,
                initial_position=self.initial_position,
                **self.consumer_settings,
            )
            while self.max_messages is None or messages < self.max_messages:
                limit = self.max_batch_size
                if self.max_messages is not None:
                    limit = min(limit, self.max_messages - messages)
                batch = self._receive_batch(consumer, limit)
                if not batch:
                    self.log.info("No message within %s s; stopping", self.poll_timeout)
                    break
                acknowledged += self._process(consumer, batch, apply)
                messages += len(batch)
                batches += 1
        self.log.info(
            "Consumed %d messages in %d batches from %s; acknowledged %d (%s)",
            messages, batches, ", ".join(self.topics), acknowledged, self.ack,
        )
        return {
            "topics": list(self.topics),
            "subscription": self.subscription,
            "ack": self.ack,
            "messages": messages,
            "batches": batches,
            "acknowledged": acknowledged,
        }

    def _receive_batch(self, consumer: Consumer, limit: int) -> list[Message]:
        try:
            batch = [consumer.receive(timeout_millis=int(self.poll_timeout * 1000))]
        except exceptions.Timeout:
            return []
        while len(batch) < limit:
            try:
                batch.append(consumer.receive(timeout_millis=0))
            except exceptions.Timeout:
                break
        return batch

    def _process(self, consumer: Consumer, batch: list[Message], apply: Callable[..., Any]) -> int:
        """Apply the function to one batch and acknowledge as ``ack`` says; returns how many were acked."""
        acked = 0
        if self.apply_function is not None:
            for index, message in enumerate(batch):
                try:
                    apply(message)
                except Exception:
                    self._reject(consumer, batch[index:])
                    raise
                if self.ack == "individual":
                    consumer.acknowledge(message)
                    acked += 1
        else:
            try:
                apply(batch)
            except Exception:
                self._reject(consumer, batch)
                raise
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
