"""PulsarTransformOperator: consume, transform and produce exactly once, a batch per transaction."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from airflow.sdk.exceptions import AirflowException

from airflow_pulsar import arguments
from airflow_pulsar.client import (
    Client,
    Consumer,
    ConsumerType,
    Message,
    MessageId,
    Producer,
    Result,
    Transaction,
    TransactionState,
    exceptions,
)  # fmt: skip
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.operators.consume import receive_batch
from airflow_pulsar.operators.produce import _message_parts as message_parts
from airflow_pulsar.templated_arguments import TemplatedArguments

# Only one consumer at a time reads a partition of these, so a batch is acknowledged cumulatively.
_CUMULATIVE_TYPES = (ConsumerType.Exclusive, ConsumerType.Failover)


class _Outputs:
    """The sends of one transaction: their receipts arrive on the client's IO threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.last_message_id: MessageId | None = None

    def send(self, producer: Producer, returned: Any, transaction: Transaction) -> None:
        """Send each message of ``returned`` (one message, a list of them, or None) in ``transaction``;
        a failed send makes the commit fail, so the receipt only records the last id."""
        items = [] if returned is None else [returned] if _is_one_message(returned) else list(returned)
        for item in items:
            key, value, properties = message_parts(item, self.count)
            producer.send_async(value, self._receipt, properties=properties, partition_key=key, transaction=transaction)
            self.count += 1

    def _receipt(self, result: Result, message_id: MessageId | None) -> None:
        if result is Result.Ok and message_id is not None:
            with self._lock:
                self.last_message_id = message_id


def _is_one_message(returned: Any) -> bool:
    """A value or a ``(key, value[, properties])`` tuple, rather than an iterable of messages."""
    return isinstance(returned, (str, bytes, bytearray, memoryview, tuple)) or not isinstance(returned, Iterable)


class PulsarTransformOperator(TemplatedArguments):
    """
    Consume messages, transform them with a user function and publish the results, exactly once.

    The operator receives a batch from ``input_topics`` on ``subscription`` (up to
    ``max_batch_size`` messages: it waits up to ``poll_timeout`` seconds for the first one, then
    takes what has already arrived) and, in one Pulsar transaction, publishes to ``output_topic``
    what the function returned and acknowledges the batch's messages, then commits. It goes on
    batch after batch until no message arrives within ``poll_timeout`` or after ``max_batches``.
    A failed batch (the function raised, a send failed) is aborted: nothing of it is published and
    its messages are delivered again, and the task fails. A task killed mid-batch leaves its
    transaction open; the coordinators abort it after ``transaction_timeout`` seconds, and until
    then its acknowledged messages go to no consumer and consumers of ``output_topic`` receive
    nothing published after it (Pulsar delivers a topic in order). So a retry finds every message
    of the dead batch again at most ``transaction_timeout`` seconds after it started, which is why
    ``poll_timeout`` must be at least ``transaction_timeout``: the retry waits that long before it
    decides the input is drained.

    ``apply_function`` is called with each message (an ``airflow_pulsar.client.Message``), its
    results are sent and the message acknowledged before the next call; ``apply_function_batch``
    instead is called once with the batch (a list). The function returns what to publish: None
    (nothing), one message, or a list (any iterable) of messages, each one as the produce operator
    takes them: ``value``, ``(key, value)`` or ``(key, value, properties)``, the value ``bytes`` or
    ``str`` (sent as UTF-8). On a ``Shared`` or ``KeyShared`` subscription each message is
    acknowledged on its own, on ``Exclusive`` and ``Failover`` cumulatively (the batch's last message
    in each partition). The broker must run transaction coordinators (Pulsar:
    ``transactionCoordinatorEnabled=true``; the embedded broker: ``--transaction-coordinators N``).

    Returns to XCom ``{"input_topics", "subscription", "output_topic", "batches", "consumed",
    "produced", "last_consumed_message_ids", "last_produced_message_id"}``: the counts of the
    committed batches, and the last message ids (as text) consumed in each partition and produced.

    :param input_topics: A topic or a list of topics to consume. Templated.
    :param subscription: The subscription name. Templated.
    :param output_topic: The topic the results go to. Templated.
    :param apply_function: Called with each message; a callable or a dotted path.
    :param apply_function_batch: Called with each batch (a list of messages) instead.
    :param apply_function_args: Extra positional arguments for the function. Templated.
    :param apply_function_kwargs: Extra keyword arguments for the function. Templated.
    :param subscription_type: ``Shared`` (default), ``Exclusive``, ``Failover`` or ``KeyShared``.
    :param initial_position: Where a new subscription starts: ``Earliest`` (default) or ``Latest``.
    :param max_batch_size: The most messages in one batch, one transaction (default 100).
    :param max_batches: Stop after this many batches; None (default): when the input is drained.
    :param poll_timeout: Seconds to wait for the first message of a batch; None (default): ``transaction_timeout``.
    :param transaction_timeout: Seconds after which the coordinator aborts a batch's transaction
        still open (default 60); longer than a batch takes to process.
    :param pulsar_conn_id: The Pulsar connection, ``pulsar_default`` by default. Templated.

    Example::

        PulsarTransformOperator(
            task_id="enrich_orders",
            input_topics="orders",
            subscription="enricher",
            output_topic="orders-enriched",
            apply_function="my_project.orders.enrich",
        )
    """

    template_fields: Sequence[str] = (
        "input_topics", "subscription", "output_topic", "apply_function_args", "apply_function_kwargs", "pulsar_conn_id",
    )  # fmt: skip
    ui_color = "#f0e0ff"

    def __init__(
        self,
        *,
        input_topics: str | Sequence[str],
        subscription: str,
        output_topic: str,
        apply_function: Callable[..., Any] | str | None = None,
        apply_function_batch: Callable[..., Any] | str | None = None,
        apply_function_args: Sequence[Any] | None = None,
        apply_function_kwargs: Mapping[str, Any] | None = None,
        subscription_type: ConsumerType | str = ConsumerType.Shared,
        initial_position: Any = "Earliest",
        max_batch_size: int = 100,
        max_batches: int | None = None,
        poll_timeout: float | None = None,
        transaction_timeout: float = 60.0,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.input_topics = self._argument("input_topics", input_topics, arguments.topic_list)
        self.subscription = self._argument("subscription", subscription, arguments.non_empty_str)
        self.output_topic = self._argument("output_topic", output_topic, arguments.topic_name)
        self.apply_function, self.apply_function_batch = arguments.apply_functions(apply_function, apply_function_batch)
        self.apply_function_args = self._argument("apply_function_args", apply_function_args, arguments.function_args)
        self.apply_function_kwargs = self._argument(
            "apply_function_kwargs", apply_function_kwargs, arguments.function_kwargs
        )
        self.subscription_type = arguments.consumer_type(subscription_type)
        self.initial_position = arguments.initial_position(initial_position)
        self.max_batch_size = arguments.positive_int(max_batch_size, "max_batch_size")
        self.max_batches = arguments.positive_int(max_batches, "max_batches", optional=True)
        self.transaction_timeout = arguments.seconds(transaction_timeout, "transaction_timeout")
        wait = arguments.seconds(poll_timeout, "poll_timeout", optional=True)
        self.poll_timeout: float = self.transaction_timeout if wait is None else wait
        if self.poll_timeout < self.transaction_timeout:
            raise ValueError(
                f"poll_timeout ({self.poll_timeout:g} s) must be at least transaction_timeout "
                f"({self.transaction_timeout:g} s): after a crash, the messages of the open transaction "
                "come back only when the coordinator aborts it, and the retry must wait for them"
            )
        self.pulsar_conn_id = self._argument("pulsar_conn_id", pulsar_conn_id, arguments.non_empty_str)

    def execute(self, context: Any) -> dict[str, Any]:
        """Transform batch after batch, each in a transaction of its own; return the counts."""
        if self.apply_function is not None:
            function = arguments.resolve_function(self.apply_function, "apply_function")
        else:
            function = arguments.resolve_function(self.apply_function_batch, "apply_function_batch")
        apply = partial(function, *self.apply_function_args, **self.apply_function_kwargs)
        batches = consumed = produced = 0
        last_consumed: dict[str, str] = {}
        last_produced: MessageId | None = None
        with PulsarHook(pulsar_conn_id=self.pulsar_conn_id, enable_transaction=True) as hook:
            client = hook.get_client()
            self._check_coordinators(client)
            consumer = hook.subscribe(
                self.input_topics,
                self.subscription,
                consumer_type=self.subscription_type,
                initial_position=self.initial_position,
                # A batch's acknowledgements of messages sharing one producer batch are its own.
                batch_index_ack_enabled=True,
            )
            producer = hook.create_producer(self.output_topic)
            while self.max_batches is None or batches < self.max_batches:
                batch = receive_batch(consumer, self.max_batch_size, self.poll_timeout)
                if not batch:
                    self.log.info("No message within %g s; stopping", self.poll_timeout)
                    break
                outputs = self._commit_batch(client, consumer, producer, batch, apply)
                batches += 1
                consumed += len(batch)
                produced += outputs.count
                last_consumed.update((message.topic_name(), str(message.message_id())) for message in batch)
                last_produced = outputs.last_message_id or last_produced
        self.log.info(
            "Transformed %d messages of %s into %d on %s, in %d transactions",
            consumed, ", ".join(self.input_topics), produced, self.output_topic, batches,
        )  # fmt: skip
        return {
            "input_topics": list(self.input_topics),
            "subscription": self.subscription,
            "output_topic": self.output_topic,
            "batches": batches,
            "consumed": consumed,
            "produced": produced,
            "last_consumed_message_ids": last_consumed,
            "last_produced_message_id": str(last_produced) if last_produced else None,
        }

    def _check_coordinators(self, client: Client) -> None:
        """Fail before consuming anything when the cluster runs no transaction coordinator."""
        try:
            client.new_transaction(transaction_timeout_ms=int(self.transaction_timeout * 1000)).abort()
        except exceptions.TransactionCoordinatorNotFoundError as exc:
            raise AirflowException(
                f"The Pulsar cluster of connection {self.pulsar_conn_id!r} runs no transaction coordinator, which "
                "PulsarTransformOperator needs: set transactionCoordinatorEnabled=true on Apache Pulsar's brokers "
                "(and initialize the coordinators' metadata), or start the embedded broker with "
                "--transaction-coordinators N"
            ) from exc

    def _commit_batch(
        self, client: Client, consumer: Consumer, producer: Producer, batch: list[Message], apply: Callable[..., Any]
    ) -> _Outputs:
        """Publish the function's results and acknowledge ``batch`` in one transaction, and commit it."""
        transaction = client.new_transaction(transaction_timeout_ms=int(self.transaction_timeout * 1000))
        outputs = _Outputs()
        cumulative = self.subscription_type in _CUMULATIVE_TYPES
        try:
            if self.apply_function is not None:
                for message in batch:
                    outputs.send(producer, apply(message), transaction)
                    if not cumulative:
                        consumer.acknowledge(message, transaction=transaction)
            else:
                outputs.send(producer, apply(batch), transaction)
                if not cumulative:
                    for message in batch:
                        consumer.acknowledge(message, transaction=transaction)
            if cumulative:
                for message in {message.topic_name(): message for message in batch}.values():
                    consumer.acknowledge_cumulative(message, transaction=transaction)
            transaction.commit()  # waits for the sends and acknowledgements; aborts if one failed
        except BaseException:
            if transaction.state is TransactionState.OPEN:
                self.log.error("The batch failed; aborting its transaction (its %d messages come back)", len(batch))
                try:
                    transaction.abort()
                except exceptions.PulsarException as exc:  # the coordinator aborts it at its timeout anyway
                    self.log.warning("Aborting the transaction failed: %s", exc)
            raise
        return outputs
