"""PulsarProduceOperator: publish what a user function yields to a Pulsar topic."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_pulsar.client import MessageId, Result
from airflow_pulsar.hooks import arguments
from airflow_pulsar.hooks.pulsar import PulsarHook


class _Receipts:
    """Send outcomes reported on the client's IO thread: the count, the last id, the failures."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent = 0
        self.failed = 0
        self.first_error: str | None = None
        self.last_message_id: MessageId | None = None
        self._last_index = -1

    def callback(self, index: int) -> Callable[[Result, MessageId | None], None]:
        def done(result: Result, message_id: MessageId | None) -> None:
            with self._lock:
                if result is Result.Ok:
                    self.sent += 1
                    # Receipts of different partitions arrive in any order; keep the last one queued.
                    if index > self._last_index:
                        self._last_index, self.last_message_id = index, message_id
                else:
                    self.failed += 1
                    self.first_error = self.first_error or f"message {index}: {result.name}"

        return done

    def failure(self, index: int, exc: BaseException) -> None:
        """A send refused at once (before any receipt)."""
        with self._lock:
            self.failed += 1
            self.first_error = self.first_error or f"message {index}: {type(exc).__name__}: {exc}"


class PulsarProduceOperator(BaseOperator):
    """
    Publish the messages a user function produces to a Pulsar topic.

    The function is called with ``producer_function_args`` and ``producer_function_kwargs`` and
    returns (or yields) an iterable of messages, each one of:

    * ``value``,
    * ``(key, value)``, or
    * ``(key, value, properties)``,

    where ``value`` is ``bytes`` or ``str`` (sent as UTF-8), ``key`` is the partition key (a
    ``str``, or ``None`` for none) and ``properties`` a ``dict`` of ``str`` to ``str``.
    Messages are sent asynchronously through a batching producer; the task waits for every
    broker receipt and fails if any send failed. It returns ``{"topic", "messages",
    "last_message_id"}`` (the id of the last message yielded, as text) to XCom.

    :param topic: The topic (partitioned or not). Templated.
    :param producer_function: A callable, or the dotted path of one (imported when the task runs).
    :param producer_function_args: Positional arguments for the function. Templated.
    :param producer_function_kwargs: Keyword arguments for the function. Templated.
    :param producer_settings: Keyword arguments of ``create_producer`` (``batching_enabled``,
        ``batching_max_messages``, ``compression_type``, ``message_routing_mode``, ...); enum
        values may be given by name, e.g. ``{"compression_type": "LZ4"}``. Batching is on
        unless turned off here.
    :param pulsar_conn_id: The Pulsar connection, ``pulsar_default`` by default.

    Example::

        PulsarProduceOperator(
            task_id="publish_orders",
            topic="orders",
            producer_function="my_project.orders.rows",  # yields (key, value) pairs
            producer_settings={"compression_type": "LZ4"},
        )
    """

    template_fields: Sequence[str] = ("topic", "producer_function_args", "producer_function_kwargs")
    ui_color = "#e0ecff"

    def __init__(
        self,
        *,
        topic: str,
        producer_function: Callable[..., Iterable[Any]] | str,
        producer_function_args: Sequence[Any] | None = None,
        producer_function_kwargs: Mapping[str, Any] | None = None,
        producer_settings: Mapping[str, Any] | None = None,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.topic = arguments.topic_name(topic)
        self.producer_function = arguments.function_reference(producer_function, "producer_function")
        self.producer_function_args, self.producer_function_kwargs = arguments.function_arguments(
            producer_function_args, producer_function_kwargs, "producer_function"
        )
        self.producer_settings = arguments.producer_settings(producer_settings)
        self.pulsar_conn_id = arguments.non_empty_str(pulsar_conn_id, "pulsar_conn_id")

    def execute(self, context: Any) -> dict[str, Any]:
        """Send every message, wait for the receipts, return the count and the last message id."""
        function = arguments.resolve_function(self.producer_function, "producer_function")
        messages = function(*self.producer_function_args, **self.producer_function_kwargs)
        if messages is None or isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
            raise TypeError(
                f"producer_function must return an iterable of messages, got {type(messages).__name__}"
            )
        receipts = _Receipts()
        attempted = 0
        with PulsarHook(pulsar_conn_id=self.pulsar_conn_id) as hook:
            producer = hook.create_producer(self.topic, **self.producer_settings)
            for index, item in enumerate(messages):
                key, value, properties = _message_parts(item, index)
                attempted += 1
                try:
                    producer.send_async(value, receipts.callback(index), properties=properties, partition_key=key)
                except Exception as exc:  # refused at once: queue full without blocking, closed, too big
                    receipts.failure(index, exc)
                    break
            producer.flush()
        if receipts.failed:
            raise AirflowException(
                f"{receipts.failed} of {attempted} messages to {self.topic} failed (first: {receipts.first_error}); "
                f"{receipts.sent} were sent"
            )
        self.log.info("Sent %d messages to %s", receipts.sent, self.topic)
        last = receipts.last_message_id
        return {"topic": self.topic, "messages": receipts.sent, "last_message_id": str(last) if last else None}


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
