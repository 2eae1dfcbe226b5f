"""PulsarAwaitMessageSensor: defer until a message matching a user function arrives."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout

from airflow_pulsar import arguments
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.message_source import TEMPLATE_FIELDS, MessageSourceSettings
from airflow_pulsar.templated_arguments import TemplatedArguments
from airflow_pulsar.triggers.await_message import PulsarAwaitMessageTrigger

# How long execute() reads the messages already there before it defers.
CHECK_SECONDS = 1.0


async def _first_event(trigger: PulsarAwaitMessageTrigger) -> dict[str, Any]:
    events = trigger.run()
    try:
        return (await anext(events)).payload
    finally:
        await events.aclose()


class PulsarAwaitMessageSensor(TemplatedArguments, MessageSourceSettings, BaseSensorOperator):
    """
    Wait, deferred, for the first message on a subscription that a user function accepts.

    It first reads the messages already there for a second, and completes at once if one
    matches. Otherwise it defers to :class:`PulsarAwaitMessageTrigger`, which consumes in the triggerer
    and calls ``apply_function(message, *apply_function_args, **apply_function_kwargs)`` on each
    message (an ``airflow_pulsar.client.Message``); the first truthy return value completes the
    sensor. Examined messages are acknowledged (``acknowledge=False`` leaves them in the
    subscription). It returns ``{"message": {"topic", "message_id", "key", "properties",
    "publish_timestamp", "event_timestamp", "redelivery_count", "value"}, "result": <the value
    returned>}`` to XCom, and also under ``xcom_push_key`` when one is given. ``timeout`` and
    ``soft_fail`` behave as in every Airflow sensor.

    :param topics: A topic, a list of topics, or a ``re.Pattern`` of topic names (as ``topics_pattern``). Templated.
    :param topics_pattern: Instead of ``topics``, a regular expression of full topic names in one
        namespace, e.g. ``"persistent://public/default/orders-.*"``. Templated.
    :param subscription: The subscription to consume with. Templated.
    :param apply_function: Dotted path of the function (it runs in the triggerer, so it must be
        importable there: a function in the DAGs folder is refused at parse time); None accepts
        the first message.
    :param apply_function_args: Extra positional arguments for the function. Templated.
    :param apply_function_kwargs: Extra keyword arguments for the function. Templated.
    :param subscription_type: ``Shared`` (default), ``Exclusive``, ``Failover`` or ``KeyShared``.
    :param initial_position: Where a new subscription starts: ``Latest`` (default) or ``Earliest``.
    :param acknowledge: Acknowledge the messages examined (default True).
    :param xcom_push_key: Also push the result to XCom under this key (as Kafka's sensor does).
    :param pulsar_conn_id: The Pulsar connection, ``pulsar_default`` by default. Templated.

    Example::

        PulsarAwaitMessageSensor(
            task_id="wait_for_order_42",
            topics="orders",
            subscription="order-watch",
            apply_function="my_project.orders.is_order",
            apply_function_args=[42],
            timeout=timedelta(hours=1),
        )
    """

    template_fields: Sequence[str] = TEMPLATE_FIELDS
    ui_color = "#fff3d6"

    def __init__(
        self,
        *,
        topics: str | Sequence[str] | re.Pattern[str] | None = None,
        subscription: str,
        apply_function: str | None = None,
        apply_function_args: Sequence[Any] | None = None,
        apply_function_kwargs: dict[str, Any] | None = None,
        subscription_type: Any = "Shared",
        initial_position: Any = "Latest",
        acknowledge: bool = True,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
        topics_pattern: str | None = None,
        xcom_push_key: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
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
        self.xcom_push_key = None if xcom_push_key is None else arguments.non_empty_str(xcom_push_key, "xcom_push_key")
        arguments.triggerer_function(self.apply_function, "apply_function", must_be_found=True)

    def execute(self, context: Any) -> Any:
        """Look at the messages already there and return at once when one matches; otherwise
        defer to the trigger (this sensor only waits deferred).

        Deferring a condition that already holds would cost a trip through the triggerer, and a
        trigger that fires within a second or two of the deferral races the scheduler.
        """
        event = asyncio.run(_first_event(self._trigger(deadline=time.time() + CHECK_SECONDS)))
        if event.get("status") != "timeout":
            return self.execute_complete(context, event)
        self.defer(
            trigger=self._trigger(deadline=time.time() + self.timeout),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def _trigger(self, deadline: float) -> PulsarAwaitMessageTrigger:
        return PulsarAwaitMessageTrigger(
            topics=self.topics or None,
            topics_pattern=self.topics_pattern,
            subscription=self.subscription,
            apply_function=self.apply_function,
            apply_function_args=self.apply_function_args,
            apply_function_kwargs=self.apply_function_kwargs,
            subscription_type=self.subscription_type,
            initial_position=self.initial_position,
            acknowledge=self.acknowledge,
            pulsar_conn_id=self.pulsar_conn_id,
            deadline=deadline,
        )

    def poke(self, context: Any) -> bool:
        """Not used: the sensor always defers."""
        raise AirflowException(f"{type(self).__name__} only runs deferred")

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after the trigger fired: return the message and the function's result."""
        status = event.get("status")
        if status == "success":
            self.log.info("Matched message %s on %s", event["message"]["message_id"], event["message"]["topic"])
            matched = {"message": event["message"], "result": event["result"]}
            if self.xcom_push_key:
                context["ti"].xcom_push(key=self.xcom_push_key, value=matched)
            return matched
        if status == "timeout":
            raise AirflowSensorTimeout(f"Sensor has timed out: {event.get('message')}")
        raise AirflowException(f"Awaiting a message failed: {event.get('message', event)}")
