"""PulsarBacklogSensor: wait until a subscription's backlog is ready, without consuming from it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout

from airflow_pulsar import arguments, subscriptions
from airflow_pulsar.client import InitialPosition
from airflow_pulsar.client.admin import DEFAULT_MAX_CONCURRENT_REQUESTS, AdminNotFoundError
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.templated_arguments import TemplatedArguments
from airflow_pulsar.triggers.backlog import TRANSIENT_ADMIN_ERRORS, PulsarBacklogTrigger, missing_subscription
from airflow_pulsar.triggers.backlog_condition import BacklogCondition, BacklogReading, counted_as
from airflow_pulsar.ui.history import record_reading


class PulsarBacklogSensor(TemplatedArguments, BaseSensorOperator):
    """
    Wait until a subscription's backlog holds enough messages (or its oldest message is old enough).

    The backlog is read from Pulsar's admin REST (summed across the partitions of a partitioned
    topic); the sensor never attaches a consumer to the subscription it watches. It is ready once
    it holds at least ``threshold`` messages and, if set, ``min_backlog_bytes`` bytes; or, if
    ``max_message_age`` is set, once the oldest unacknowledged message has waited that long (then
    any non-empty backlog is ready).

    Messages are counted one by one, a batch of n as n (Pulsar's own ``msgBacklog`` counts entries,
    a batch as one). The count is exact where the broker appends the broker entry index (Pulsar
    with ``brokerEntryMetadataInterceptors=org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor``,
    and the embedded broker), else an estimate from the average messages per entry. A batch
    acknowledged in part counts whole. Every entry holds at least one message, so where Pulsar's
    entry backlog already reaches ``threshold`` the messages are not counted: the figures then
    say ``lower_bound`` (``messages`` is the entries, and the backlog holds at least that many).

    With ``deferrable=True`` the sensor defers to :class:`PulsarBacklogTrigger`, which polls
    every ``poke_interval`` seconds inside the triggerer and holds no worker slot (a deferred task
    only resumes where an Airflow triggerer runs); with ``deferrable=False`` it pokes in a worker
    (``mode="poke"`` or ``"reschedule"``). The default is Airflow's ``[operators]
    default_deferrable`` (False unless configured), as for every provider's sensors.
    ``timeout``, ``soft_fail`` and ``mode`` behave as in every Airflow sensor.

    The subscription must exist (a missing one fails the task with a message naming
    ``create_subscription``), unless ``create_subscription=True``: the sensor then creates it at
    the earliest message, so everything already on the topic counts, before it first reads the
    backlog; an existing one is left where it is.

    Returns the figures to XCom: ``{"topic", "subscription", "messages", "entries", "exact",
    "lower_bound", "backlog_size", "oldest_message_age", "partitions": {partition: {"messages",
    "entries", "exact", "lower_bound", "backlog_size", "oldest_message_age"}}, "read_at",
    "read_time", "oldest_publish_time"}``: ``exact`` is False where ``messages`` is an estimate
    or a lower bound (``lower_bound`` True: the entries, not counted further); ``partitions``
    is empty for a non-partitioned topic; ages (seconds) and the oldest message's publish time are
    only read when ``max_message_age`` is set; ``read_at`` is epoch seconds, the ``*_time`` values
    ISO 8601 UTC text (``pendulum.parse`` reads them back).

    :param topic: The topic (partitioned or not). Templated.
    :param subscription: The subscription whose backlog is watched. Templated.
    :param threshold: Messages that make the backlog ready (>= 1; a batch of n counts n).
    :param min_backlog_bytes: Bytes the backlog must also hold.
    :param max_message_age: Seconds (or a timedelta) after which the oldest message makes the backlog ready.
    :param pulsar_conn_id: The Pulsar connection (its admin URL and token are used). Templated.
    :param deferrable: Defer to the triggerer, or poke in a worker; default ``[operators] default_deferrable``.
    :param create_subscription: Create the subscription, at the earliest message, if it does not exist.
    :param max_concurrent_requests: Admin calls in flight at most while the backlog is read: the
        partitions of a partitioned topic are counted side by side (default 16).

    Example::

        PulsarBacklogSensor(
            task_id="wait_for_orders",
            topic="orders",
            subscription="warehouse",
            threshold=10_000,
            max_message_age=timedelta(minutes=15),
            poke_interval=30,
            timeout=timedelta(hours=2),
        )
    """

    template_fields: Sequence[str] = ("topic", "subscription", "pulsar_conn_id")
    ui_color = "#fff3d6"

    def __init__(
        self,
        *,
        topic: str,
        subscription: str,
        threshold: int,
        min_backlog_bytes: int | None = None,
        max_message_age: float | timedelta | None = None,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        create_subscription: bool = False,
        max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.topic = self._argument("topic", topic, arguments.topic_name)
        self.subscription = self._argument("subscription", subscription, arguments.non_empty_str)
        self.threshold = arguments.positive_int(threshold, "threshold")
        self.min_backlog_bytes = arguments.positive_int(
            min_backlog_bytes, "min_backlog_bytes", optional=True, minimum=0
        )
        self.max_message_age = arguments.seconds(max_message_age, "max_message_age", optional=True)
        self.pulsar_conn_id = self._argument("pulsar_conn_id", pulsar_conn_id, arguments.non_empty_str)
        self.deferrable = arguments.flag(deferrable, "deferrable")
        self.create_subscription = arguments.flag(create_subscription, "create_subscription")
        self.max_concurrent_requests = arguments.positive_int(max_concurrent_requests, "max_concurrent_requests")

    def _trigger(self, deadline: float) -> PulsarBacklogTrigger:
        return PulsarBacklogTrigger(
            topic=self.topic,
            subscription=self.subscription,
            threshold=self.threshold,
            min_backlog_bytes=self.min_backlog_bytes,
            max_message_age=self.max_message_age,
            # A zero poke interval would spin; the triggerer polls at least every 0.1 s.
            poll_interval=max(self.poke_interval, 0.1),
            pulsar_conn_id=self.pulsar_conn_id,
            deadline=deadline,
            max_concurrent_requests=self.max_concurrent_requests,
        )

    def execute(self, context: Any) -> Any:
        """Read the backlog once and return at once when it is ready; otherwise defer to the
        trigger, or poke in this worker when not deferrable.

        Deferring a condition that already holds would cost a trip through the triggerer, and a
        trigger that fires within a second or two of the deferral races the scheduler.
        """
        if self.create_subscription:
            self._create_subscription()
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        self.defer(
            trigger=self._trigger(deadline=time.time() + self.timeout),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def _create_subscription(self) -> None:
        topic, subscription = self.topic, self.subscription
        with PulsarHook(pulsar_conn_id=self.pulsar_conn_id) as hook:
            created = subscriptions.create_subscription(hook.get_admin(), topic, subscription, InitialPosition.Earliest)
        if created:
            self.log.info("Created subscription %r on %s at the earliest message", subscription, topic)
        else:
            self.log.info("Subscription %r already exists on %s: left as it is", subscription, topic)

    def poke(self, context: Any) -> PokeReturnValue:
        """Read the backlog once; done when the condition holds (transient admin errors: not yet)."""
        condition = BacklogCondition(self.threshold, self.min_backlog_bytes, self.max_message_age)
        topic, subscription = self.topic, self.subscription
        hook = PulsarHook(pulsar_conn_id=self.pulsar_conn_id)
        # Read the connection here, outside the event loop below.
        self.log.debug("Reading the backlog from %s", hook.admin_url)

        async def read() -> BacklogReading:
            async with hook.get_async_admin(self.max_concurrent_requests) as admin:
                return await condition.read(admin, topic, subscription, settle_early=True)

        try:
            reading = asyncio.run(read())
        except TRANSIENT_ADMIN_ERRORS as exc:
            self.log.warning("Cannot read the backlog now, poking again: %s", exc)
            return PokeReturnValue(is_done=False)
        except AdminNotFoundError as exc:
            raise AirflowException(f"Cannot watch the backlog: {missing_subscription(exc, topic, subscription)}") from None
        record_reading(self.pulsar_conn_id, topic, subscription, reading)
        self.log.info("Backlog of %s / %s: %s", self.topic, self.subscription, reading.describe())
        return PokeReturnValue(is_done=condition.met(reading), xcom_value=reading.as_xcom())

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after the trigger fired: return the figures, or fail (or skip, with soft_fail)."""
        status = event.get("status")
        if status == "success":
            backlog = event["backlog"]
            counted = counted_as(backlog["exact"], backlog.get("lower_bound", False))
            self.log.info(
                "Backlog ready: %d messages (%s) in %d entries, %d bytes",
                backlog["messages"], counted, backlog["entries"], backlog["backlog_size"],
            )
            return backlog
        if status == "timeout":
            raise AirflowSensorTimeout(f"Sensor has timed out: {event.get('message')}")
        raise AirflowException(f"Cannot watch the backlog: {event.get('message', event)}")
