"""PulsarBacklogTrigger: poll a subscription's backlog over admin REST until it is ready."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_pulsar import arguments
from airflow_pulsar.client.admin import (
    DEFAULT_MAX_CONCURRENT_REQUESTS,
    AdminConnectionError,
    AdminNotFoundError,
    AdminServerError,
)
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.triggers.backlog_condition import BacklogCondition, BacklogReading
from airflow_pulsar.triggers.resources import ClosesOnCleanup
from airflow_pulsar.ui.history import arecord_reading

# Worth another poll: the admin service is unreachable, slow, or failing for now.
TRANSIENT_ADMIN_ERRORS = (AdminConnectionError, AdminServerError)


def missing_subscription(exc: AdminNotFoundError, topic: str, subscription: str) -> str:
    """Why the backlog cannot be watched when the subscription (or its topic) is not there, and
    the sensor option that creates it."""
    reason = exc.reason
    if not reason.startswith("subscription "):
        reason = f"subscription {subscription!r} not found on topic {topic} ({reason})"
    return f"{reason}; pass create_subscription=True to create it"


class PulsarBacklogTrigger(ClosesOnCleanup, BaseTrigger):
    """
    Fire once a subscription's backlog is ready; runs in the triggerer and never consumes.

    Every ``poll_interval`` seconds it reads the subscription's backlog (summed across the
    partitions of a partitioned topic) with an async HTTP client, and fires when the backlog
    holds at least ``threshold`` messages (and ``min_backlog_bytes`` bytes, if set), or when its
    oldest message has waited ``max_message_age`` seconds (if set). Messages are counted one by
    one, also inside batches: exactly where the broker appends the broker entry index, else
    estimated (the event says which); where the entries already reach ``threshold`` they are not
    counted, and the event says ``lower_bound`` (every entry holds at least one message). Unreachable or failing admin
    service: it logs and polls again. The event payload is ``{"status": "success", "backlog":
    {...}}``, ``{"status": "timeout", ...}`` once ``deadline`` passed, or ``{"status": "error",
    "message": ...}`` (e.g. no such topic or subscription: the message then names the sensor's
    ``create_subscription`` option).

    :param topic: The topic (partitioned or not).
    :param subscription: The subscription whose backlog is watched.
    :param threshold: Messages in the backlog that make it ready (>= 1; a batch of n counts n).
    :param min_backlog_bytes: Bytes the backlog must also hold, or None.
    :param max_message_age: Seconds after which the oldest message makes the backlog ready, or None.
    :param poll_interval: Seconds between two reads of the stats.
    :param pulsar_conn_id: The Pulsar connection (its admin URL and token are used).
    :param deadline: Epoch seconds after which it fires a timeout event, or None.
    :param max_concurrent_requests: Admin calls in flight at most while the backlog is read (the
        partitions of a partitioned topic are counted side by side).
    """

    def __init__(
        self,
        *,
        topic: str,
        subscription: str,
        threshold: int,
        min_backlog_bytes: int | None = None,
        max_message_age: float | None = None,
        poll_interval: float = 5.0,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
        deadline: float | None = None,
        max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
    ) -> None:
        super().__init__()
        self.topic = arguments.topic_name(topic)
        self.subscription = arguments.non_empty_str(subscription, "subscription")
        self.threshold = arguments.positive_int(threshold, "threshold")
        self.min_backlog_bytes = arguments.positive_int(
            min_backlog_bytes, "min_backlog_bytes", optional=True, minimum=0
        )
        self.max_message_age = arguments.seconds(max_message_age, "max_message_age", optional=True)
        self.poll_interval = arguments.seconds(poll_interval, "poll_interval")
        self.pulsar_conn_id = arguments.non_empty_str(pulsar_conn_id, "pulsar_conn_id")
        self.deadline = deadline
        self.max_concurrent_requests = arguments.positive_int(max_concurrent_requests, "max_concurrent_requests")

    @property
    def condition(self) -> BacklogCondition:
        """The condition this trigger waits for."""
        return BacklogCondition(self.threshold, self.min_backlog_bytes, self.max_message_age)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and plain keyword arguments, to rebuild this trigger in the triggerer."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "topic": self.topic,
                "subscription": self.subscription,
                "threshold": self.threshold,
                "min_backlog_bytes": self.min_backlog_bytes,
                "max_message_age": self.max_message_age,
                "poll_interval": self.poll_interval,
                "pulsar_conn_id": self.pulsar_conn_id,
                "deadline": self.deadline,
                "max_concurrent_requests": self.max_concurrent_requests,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll until the backlog is ready (or the deadline passes, or the stats cannot be had)."""
        condition = self.condition
        hook = PulsarHook(pulsar_conn_id=self.pulsar_conn_id)
        await hook.aget_config()
        self.log.info(
            "Waiting for %s on %s / %s (every %g s)",
            condition.describe(), self.topic, self.subscription, self.poll_interval,
        )
        async with self.resources:
            admin = await self.resources.enter_async_context(hook.get_async_admin(self.max_concurrent_requests))
            while True:
                reading: BacklogReading | None = None
                try:
                    reading = await condition.read(admin, self.topic, self.subscription, settle_early=True)
                    await arecord_reading(self.pulsar_conn_id, self.topic, self.subscription, reading)
                except TRANSIENT_ADMIN_ERRORS as exc:
                    self.log.warning("Cannot read the backlog now, polling again: %s", exc)
                except AdminNotFoundError as exc:
                    yield TriggerEvent({"status": "error", "message": missing_subscription(exc, self.topic, self.subscription)})
                    return
                except Exception as exc:
                    yield TriggerEvent({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
                    return
                if reading is not None and condition.met(reading):
                    yield TriggerEvent({"status": "success", "backlog": reading.as_xcom()})
                    return
                now = time.time()
                if self.deadline is not None and now >= self.deadline:
                    yield TriggerEvent(
                        {
                            "status": "timeout",
                            "message": f"the backlog of {self.topic} / {self.subscription} did not reach "
                            f"{condition.describe()} in time",
                            "backlog": reading.as_xcom() if reading is not None else None,
                        }
                    )
                    return
                if reading is not None:
                    self.log.debug("Backlog %s: waiting", reading.describe())
                pause = self.poll_interval if self.deadline is None else min(self.poll_interval, self.deadline - now)
                await asyncio.sleep(pause)
