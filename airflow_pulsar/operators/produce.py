"""PulsarProduceOperator: publish what a user function yields to a Pulsar topic, once per message."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException

from airflow_pulsar import arguments
from airflow_pulsar.client import MessageId, OutgoingMessage, Result
from airflow_pulsar.client.topic_name import TopicName
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.operators import idempotence
from airflow_pulsar.templated_arguments import TemplatedArguments

# The send callback's form: the outcome and, when stored, the message id (with its partition).
DeliveryCallback = Callable[[Result, MessageId | None], Any]

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage


class _Receipts:
    """Send outcomes reported on the client's IO threads: counts, the last id, the first failure."""

    def __init__(self, delivery: DeliveryCallback | None = None) -> None:
        self._lock = threading.Lock()
        self._delivery = delivery
        self.sent = 0
        self.already_stored = 0
        self.failed = 0
        self.first_error: str | None = None
        self.delivery_error: str | None = None
        self.last_message_id: MessageId | None = None
        self._last_index = -1

    def callback(self, index: int) -> Callable[[Result, MessageId | None], None]:
        """The send callback of the message at ``index``."""

        def done(result: Result, message_id: MessageId | None) -> None:
            with self._lock:
                if result is not Result.Ok or message_id is None:
                    self.failed += 1
                    self.first_error = self.first_error or f"message {index}: {result.name}"
                elif message_id.ledger_id() == -1 and message_id.entry_id() == -1:
                    # The broker's answer to a send it had stored before: a deduplicated one.
                    self.already_stored += 1
                else:
                    self.sent += 1
                    # Receipts of different partitions arrive in any order; keep the last one queued.
                    if index > self._last_index:
                        self._last_index = index
                        self.last_message_id = message_id
            if self._delivery is None:
                return
            try:
                self._delivery(result, message_id)
            except Exception as exc:  # on the client's IO thread: keep it for the task, let the receipts go on
                with self._lock:
                    self.delivery_error = self.delivery_error or f"message {index}: {type(exc).__name__}: {exc}"

        return done

    def stored_before(self) -> None:
        """A message skipped because the broker reported it stored by an earlier try."""
        with self._lock:
            self.already_stored += 1

    def failure(self, index: int, exc: BaseException) -> None:
        """A send refused at once (before any receipt)."""
        with self._lock:
            self.failed += 1
            self.first_error = self.first_error or f"message {index}: {type(exc).__name__}: {exc}"


class PulsarProduceOperator(TemplatedArguments):
    """
    Publish the messages a user function produces to a Pulsar topic, each once, even across retries.

    The function is called with ``producer_function_args`` and ``producer_function_kwargs`` and
    returns (or yields) an iterable of messages, each one of:

    * ``value``,
    * ``(key, value)``, or
    * ``(key, value, properties)``,

    where ``value`` is ``bytes`` or ``str`` (sent as UTF-8), ``key`` is the partition key (a
    ``str``, or ``None`` for none) and ``properties`` a ``dict`` of ``str`` to ``str``.
    Messages are sent asynchronously through batching producers; when the pending queue is full
    the task waits for the broker's receipts. It waits for every receipt and fails if any send
    failed. It returns ``{"topic", "messages", "already_stored", "last_message_id",
    "producer_name"}`` to XCom: the messages of the function now on the topic, how many of them an
    earlier try had stored, and the id of the last message this try stored (as text).

    **Retries publish nothing twice** where the topic's namespace (or the topic) has deduplication
    on (``pulsar-admin namespaces set-deduplication <tenant/ns> --enable``). The producer is named
    after the task instance (DAG, task, run and map index), the same on every try, and each
    message's sequence id is its position in the function's output; a retry skips the positions
    the broker reports as stored and sends the rest. Sends have no timeout (as Pulsar's
    deduplication needs); bound the task with ``execution_timeout``. So the function must yield the same messages
    in the same order on every try of a task instance (read a snapshot, not a moving source), and
    a message goes to a partition chosen from its key or its position, never by timing (so the
    topic must keep its partition count between tries). Where deduplication is off the task logs
    a warning and a retry may publish again what a failed try stored. Pulsar forgets a producer
    name that was idle for ``brokerDeduplicationProducerInactivityTimeoutMinutes`` (6 hours by
    default), so a retry after longer publishes again.

    :param topic: The topic (partitioned or not). Templated.
    :param producer_function: A callable, or the dotted path of one (imported when the task runs).
    :param producer_function_args: Positional arguments for the function. Templated.
    :param producer_function_kwargs: Keyword arguments for the function. Templated.
    :param producer_settings: Keyword arguments of ``create_producer`` (``batching_enabled``,
        ``batching_max_messages``, ``compression_type``, ``message_routing_mode``, ...); enum
        values may be given by name, e.g. ``{"compression_type": "LZ4"}``. Batching is on
        unless turned off here. The operator sets ``producer_name``, ``initial_sequence_id``,
        ``block_if_queue_full`` and ``send_timeout_millis`` itself (and refuses
        ``skip_full_partitions`` and key-based batching); a ``message_router`` must choose the partition from the
        message alone (it is asked more than once for each message, and again on a retry).
    :param delivery_callback: Called with each send receipt as ``callback(result, message_id)``, the
        arguments of the client's ``send_async`` callback: a ``Result`` and, once stored, the
        message's ``MessageId`` (``None`` when the send failed; ledger and entry -1 when the broker
        had stored it before). A callable or a dotted path (imported when the task runs). It runs
        on the client's IO thread, so keep it short; if it raises, the task fails once every
        receipt is in. Messages an earlier try stored are skipped, so get no call.
    :param pulsar_conn_id: The Pulsar connection, ``pulsar_default`` by default. Its admin URL
        is used to check the deduplication policy. Templated.

    Example::

        PulsarProduceOperator(
            task_id="publish_orders",
            topic="orders",
            producer_function="my_project.orders.rows",  # yields (key, value) pairs
            producer_settings={"compression_type": "LZ4"},
        )
    """

    template_fields: Sequence[str] = ("topic", "producer_function_args", "producer_function_kwargs", "pulsar_conn_id")
    ui_color = "#e0ecff"

    def __init__(
        self,
        *,
        topic: str,
        producer_function: Callable[..., Iterable[Any]] | str,
        producer_function_args: Sequence[Any] | None = None,
        producer_function_kwargs: Mapping[str, Any] | None = None,
        producer_settings: Mapping[str, Any] | None = None,
        delivery_callback: DeliveryCallback | str | None = None,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.topic = self._argument("topic", topic, arguments.topic_name)
        self.producer_function = arguments.function_reference(producer_function, "producer_function")
        self.producer_function_args = self._argument(
            "producer_function_args", producer_function_args, arguments.function_args
        )
        self.producer_function_kwargs = self._argument(
            "producer_function_kwargs", producer_function_kwargs, arguments.function_kwargs
        )
        self.producer_settings = arguments.producer_settings(producer_settings)
        idempotence.check_producer_settings(self.producer_settings)
        self.delivery_callback = arguments.function_reference(delivery_callback, "delivery_callback", optional=True)
        self.pulsar_conn_id = self._argument("pulsar_conn_id", pulsar_conn_id, arguments.non_empty_str)

    def execute(self, context: Any) -> dict[str, Any]:
        """Send every message not stored by an earlier try, wait for the receipts, return the counts."""
        function = arguments.resolve_function(self.producer_function, "producer_function")
        messages = function(*self.producer_function_args, **self.producer_function_kwargs)
        if messages is None or isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
            raise TypeError(
                f"producer_function must return an iterable of messages, got {type(messages).__name__}"
            )
        ti = context["ti"]
        name = idempotence.producer_name(ti.dag_id, ti.task_id, ti.run_id, ti.map_index)
        delivery = self.delivery_callback
        receipts = _Receipts(arguments.resolve_function(delivery, "delivery_callback") if delivery else None)
        attempted = 0
        with PulsarHook(pulsar_conn_id=self.pulsar_conn_id) as hook:
            partitions = hook.get_client().partition_count(self.topic)
            settings = idempotence.producer_settings(self.producer_settings, name)
            router = settings["message_router"]
            producer = hook.create_producer(self.topic, **settings)
            self._warn_unless_deduplicated(hook)
            # What the broker reports stored under this producer name on each partition: an earlier try's messages.
            stored = idempotence.stored_by_partition(producer.last_sequence_ids(), self.topic, partitions)
            for index, item in enumerate(messages):
                key, value, properties = _message_parts(item, index)
                message = OutgoingMessage(value, properties, key, sequence_id=index)
                attempted += 1
                if index <= stored[idempotence.partition_of(router, message, partitions)]:
                    receipts.stored_before()
                    continue
                try:
                    producer.send_async(
                        value, receipts.callback(index), properties=properties, partition_key=key, sequence_id=index
                    )
                except Exception as exc:  # refused before reaching the client's queue
                    receipts.failure(index, exc)
                # Nothing may be stored after a message that failed (a closed producer, a message too
                # big): a retry would take the later sequence ids for proof that it was stored.
                if receipts.failed:
                    break
            producer.flush()
        stored_text = f"{receipts.already_stored} were already stored (by an earlier try, or before a reconnect)"
        if receipts.failed:
            raise AirflowException(
                f"{receipts.failed} of {attempted} messages to {self.topic} failed (first: {receipts.first_error}); "
                f"{receipts.sent} were sent, {stored_text}"
            )
        if receipts.delivery_error:
            raise AirflowException(
                f"delivery_callback failed on {receipts.delivery_error}; all {attempted} messages to {self.topic} were sent"
            )
        self.log.info("Sent %d messages to %s as producer %s; %s", receipts.sent, self.topic, name, stored_text)
        last = receipts.last_message_id
        self._run_summary = {
            "topic": self.topic,
            "messages": receipts.sent + receipts.already_stored,
            "already_stored": receipts.already_stored,
            "last_message_id": str(last) if last else None,
            "producer_name": name,
        }
        return self._run_summary

    def _warn_unless_deduplicated(self, hook: PulsarHook) -> None:
        """Log one warning when the broker would not deduplicate a retry's sends; never fail for it."""
        namespace = TopicName.parse(self.topic).namespace_name
        risk = "a retry of this task after a partial failure may publish some messages twice"
        try:
            enabled = idempotence.deduplication_in_force(hook.get_admin(), self.topic)
        except Exception as exc:  # the admin API is optional for producing: say so and go on
            self.log.warning(
                "Could not check whether deduplication is on for %s (%s); if it is off, %s", self.topic, exc, risk
            )
            return
        if enabled:
            return
        state = "off" if enabled is False else "not set on its namespace (the broker's default applies)"
        self.log.warning(
            "Deduplication is %s for %s: %s. Turn it on with: pulsar-admin namespaces set-deduplication %s --enable",
            state,
            self.topic,
            risk,
            namespace,
        )

    # ---- OpenLineage (called by the OpenLineage provider's listener when it is installed) ----

    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        """The topic this task writes, as an OpenLineage output dataset."""
        from airflow_pulsar import lineage

        (topic,) = lineage.topic_names(self.topic)
        return lineage.lineage(outputs=[lineage.topic_output(lineage.cluster_of(self.pulsar_conn_id), topic)])

    def get_openlineage_facets_on_complete(self, task_instance: object) -> OperatorLineage:
        """The topic, with the number of messages of the function now on it (the run's XCom ``messages``).

        ``execute`` keeps its summary on the operator: the listener may call this in a forked
        process, which cannot pull XComs.
        """
        from airflow_pulsar import lineage

        (topic,) = lineage.topic_names(self.topic)
        messages = getattr(self, "_run_summary", {}).get("messages")
        return lineage.lineage(outputs=[lineage.topic_output(lineage.cluster_of(self.pulsar_conn_id), topic, messages)])


def _message_parts(item: Any, index: int) -> tuple[str | None, bytes, dict[str, str] | None]:
    """(key, payload, properties) of one yielded message; a clear error names the bad one."""
    key: Any = None
    properties: Any = None
    if isinstance(item, tuple):
        if len(item) == 2:
            key, value = item
        elif len(item) == 3:
            key, value, properties = item
        else:
            raise TypeError(
                f"message {index}: a tuple must be (key, value) or (key, value, properties), got {len(item)} items"
            )
    else:
        value = item
    if isinstance(value, str):
        payload = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        payload = bytes(value)
    else:
        raise TypeError(f"message {index}: the value must be bytes or str, got {type(value).__name__}")
    if key is not None and not isinstance(key, str):
        raise TypeError(f"message {index}: the key must be a str or None, got {type(key).__name__}")
    if properties is not None and (
        not isinstance(properties, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items())
    ):
        raise TypeError(f"message {index}: properties must be a dict of str to str, got {properties!r}")
    return key, payload, dict(properties) if properties is not None else None
