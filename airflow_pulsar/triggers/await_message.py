"""PulsarAwaitMessageTrigger: fire once a message matching a user function arrives."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_pulsar import arguments
from airflow_pulsar.client.asyncio import PulsarException
from airflow_pulsar.client.exceptions import Result
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.message_source import MessageSourceSettings
from airflow_pulsar.triggers.message_matching import MessageMatcher
from airflow_pulsar.triggers.resources import ClosesOnCleanup


class PulsarAwaitMessageTrigger(MessageSourceSettings, ClosesOnCleanup, BaseTrigger):
    """
    Subscribe and fire on the first message for which ``apply_function`` returns a truthy value.

    Messages are examined in arrival order; with ``acknowledge=True`` (the default) each
    examined message is acknowledged, and the broker has confirmed the acknowledgement of the
    matching one before the trigger fires. If the function raises, the message is negatively
    acknowledged and the trigger fires an error event. Events: ``{"status": "success",
    "message": {...}, "result": ...}`` (see ``message_payload``), ``{"status": "timeout"}`` once
    ``deadline`` passed, or ``{"status": "error", "message": ...}``.

    :param topics: Topic names.
    :param topics_pattern: Instead of ``topics``, a regular expression of full topic names in one namespace.
    :param subscription: The subscription to consume with.
    :param apply_function: Dotted path of ``function(message, *args, **kwargs)``; None: the first message.
    :param apply_function_args: Extra positional arguments for the function.
    :param apply_function_kwargs: Extra keyword arguments for the function.
    :param subscription_type: Subscription type name (``Shared`` by default).
    :param initial_position: Where a new subscription starts: ``Latest`` (default) or ``Earliest``.
    :param acknowledge: Acknowledge the messages examined.
    :param pulsar_conn_id: The Pulsar connection.
    :param deadline: Epoch seconds after which it fires a timeout event, or None.
    """

    def __init__(
        self,
        *,
        topics: Sequence[str] | None = None,
        subscription: str,
        apply_function: str | None = None,
        apply_function_args: Sequence[Any] | None = None,
        apply_function_kwargs: dict[str, Any] | None = None,
        subscription_type: str = "Shared",
        initial_position: str = "Latest",
        acknowledge: bool = True,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
        deadline: float | None = None,
        topics_pattern: str | None = None,
    ) -> None:
        super().__init__()
        self._set_message_source(
            topics=topics,
            topics_pattern=topics_pattern,
            subscription=subscription,
            apply_function=apply_function,
            apply_function_args=apply_function_args,
            apply_function_kwargs=apply_function_kwargs,
            subscription_type=subscription_type,
            initial_position=initial_position,
            pulsar_conn_id=pulsar_conn_id,
        )
        self.acknowledge = arguments.flag(acknowledge, "acknowledge")
        self.deadline = deadline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and plain keyword arguments, to rebuild this trigger in the triggerer."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "topics": list(self.topics) or None,
                "topics_pattern": self.topics_pattern,
                "subscription": self.subscription,
                "apply_function": self.apply_function,
                "apply_function_args": list(self.apply_function_args),
                "apply_function_kwargs": dict(self.apply_function_kwargs),
                "subscription_type": self.subscription_type,
                "initial_position": self.initial_position,
                "acknowledge": self.acknowledge,
                "pulsar_conn_id": self.pulsar_conn_id,
                "deadline": self.deadline,
            },
        )

    async def run(self) -> AsyncGenerator[TriggerEvent, None]:
        """Receive until a message matches (or the deadline passes, or the function fails)."""
        matcher = MessageMatcher(self.apply_function, self.apply_function_args, self.apply_function_kwargs)
        try:
            matcher.resolve()
        except (ImportError, TypeError) as exc:
            yield TriggerEvent({"status": "error", "message": str(exc)})
            return
        hook = PulsarHook(pulsar_conn_id=self.pulsar_conn_id)
        await hook.aget_config()
        client = hook.get_async_client()
        async with self.resources:
            self.resources.push_async_callback(client.close)
            topics: str | list[str] = self.topics[0] if len(self.topics) == 1 else list(self.topics)
            consumer = await client.subscribe(
                self.topics_pattern or topics,
                self.subscription,
                is_pattern_topic=self.topics_pattern is not None,
                consumer_type=arguments.consumer_type(self.subscription_type),
                initial_position=arguments.initial_position(self.initial_position),
                # The match is acknowledged before the event fires, so it cannot fire twice.
                ack_receipt_enabled=True,
                # Messages of a producer batch are acknowledged one by one.
                batch_index_ack_enabled=True,
            )
            while True:
                wait_ms = None if self.deadline is None else max(int((self.deadline - time.time()) * 1000), 0)
                try:
                    message = await consumer.receive(timeout_millis=wait_ms)
                except PulsarException as exc:
                    if exc.error() is not Result.Timeout:
                        raise
                    topics = self.topics_pattern or ", ".join(self.topics)
                    yield TriggerEvent({"status": "timeout", "message": f"no matching message on {topics} in time"})
                    return
                try:
                    payload = await asyncio.to_thread(matcher.event_payload, message)
                except Exception as exc:
                    await consumer.negative_acknowledge(message)
                    yield TriggerEvent(
                        {"status": "error", "message": f"apply_function failed on {message.message_id()}: {exc!r}"}
                    )
                    return
                if self.acknowledge:
                    await consumer.acknowledge(message)
                if payload is not None:
                    yield TriggerEvent({"status": "success", **payload})
                    return
