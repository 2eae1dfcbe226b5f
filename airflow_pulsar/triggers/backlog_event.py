"""PulsarBacklogEventTrigger: an asset event each time a subscription's backlog grows ready again, for ``AssetWatcher``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_pulsar import arguments
from airflow_pulsar.client.admin import AdminNotFoundError, PartitionMessageBacklog
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.triggers.backlog import TRANSIENT_ADMIN_ERRORS
from airflow_pulsar.triggers.backlog_condition import BacklogCondition, BacklogReading
from airflow_pulsar.triggers.backlog_positions import FiredPosition, read_beyond
from airflow_pulsar.triggers.resources import ClosesOnCleanup


class PulsarBacklogEventTrigger(ClosesOnCleanup, BaseEventTrigger):
    """
    Fire an asset event when a subscription's backlog holds ``threshold`` new messages, or its
    oldest new message is ``max_message_age`` seconds old; consumes nothing.

    Every ``poll_interval`` seconds it reads the backlog over admin REST, as the backlog sensor
    does (:class:`~airflow_pulsar.triggers.backlog_condition.BacklogCondition`: messages counted
    one by one, exactly where the broker appends the broker entry index). The first time, the
    whole backlog counts. When it fires it remembers each partition's newest entry (its message
    id and broker entry index), and from then on counts only the backlog's messages published
    after those positions (see the module ``airflow_pulsar.triggers.backlog_positions``): messages it
    fired for never fire it again, even while the run it started still works through them.

    The positions are kept in Airflow's asset state store (key ``pulsar_backlog_positions``) of
    the watched asset when the triggerer provides one (Airflow 3.3, one asset per watcher
    trigger), so a restarted triggerer goes on from them; they are written before the event is
    yielded, so a crash in between loses that one event rather than firing twice for the same
    messages (the messages stay in the subscription for the next run). Without the store they are
    kept in memory and a restart counts the whole backlog again.

    The event payload is ``{"topic", "subscription", "backlog": {...the sensor's figures...},
    "new_messages": n, "new_by_partition": {partition: n}, "positions": {partition: {"message_id",
    "index"}}, "previous_positions": {...}, "poll_started": <epoch seconds the firing poll began>,
    "previous_poll_started": <the poll before it, which did not fire>}``
    (partition names are the topic's own for a
    non-partitioned topic). A missing topic or subscription, or a failing admin service, is
    logged and polled again: a watcher has no task to fail.

    :param topic: The topic (partitioned or not).
    :param subscription: The subscription whose backlog is watched (it must exist).
    :param threshold: New messages that fire (>= 1; a batch of n counts n).
    :param max_message_age: Seconds after which the oldest new message fires, or None.
    :param poll_interval: Seconds between two reads of the backlog.
    :param pulsar_conn_id: The Pulsar connection (its admin URL and token are used).
    """

    STATE_KEY = "pulsar_backlog_positions"

    def __init__(
        self,
        *,
        topic: str,
        subscription: str,
        threshold: int,
        max_message_age: float | None = None,
        poll_interval: float = 5.0,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
    ) -> None:
        super().__init__()
        self.topic = arguments.topic_name(topic)
        self.subscription = arguments.non_empty_str(subscription, "subscription")
        self.threshold = arguments.positive_int(threshold, "threshold")
        self.max_message_age = arguments.seconds(max_message_age, "max_message_age", optional=True)
        self.poll_interval = arguments.seconds(poll_interval, "poll_interval")
        self.pulsar_conn_id = arguments.non_empty_str(pulsar_conn_id, "pulsar_conn_id")
        self._fired: dict[str, FiredPosition] = {}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and plain keyword arguments; the fired positions are state, not arguments
        (the triggerer tells watchers apart by their arguments)."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "topic": self.topic,
                "subscription": self.subscription,
                "threshold": self.threshold,
                "max_message_age": self.max_message_age,
                "poll_interval": self.poll_interval,
                "pulsar_conn_id": self.pulsar_conn_id,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll forever, firing whenever the new part of the backlog is ready."""
        # Only the figures are read through the sensor's condition; the age is judged past the positions.
        counting = BacklogCondition(self.threshold)
        hook = PulsarHook(pulsar_conn_id=self.pulsar_conn_id)
        await hook.aget_config()
        self._fired = await self._load_positions()
        async with self.resources:
            admin = await self.resources.enter_async_context(hook.get_async_admin())
            poll_started: float | None = None
            while True:
                previous_poll_started, poll_started = poll_started, time.time()
                try:
                    reading = await counting.read(admin, self.topic, self.subscription)
                    parts = list(reading.backlog.partitions) or [_whole(reading)]
                    newest, beyond, ages = await read_beyond(
                        admin, self.subscription, parts, self._fired, self.max_message_age is not None
                    )
                except (*TRANSIENT_ADMIN_ERRORS, AdminNotFoundError) as exc:
                    self.log.warning("Cannot read the backlog of %s / %s now, polling again: %s", self.topic, self.subscription, exc)
                else:
                    if previous_poll_started is None:  # says when the watch begins, for whoever waits on it
                        new_messages = sum(beyond.values())
                        self.log.info("Watching the backlog of %s / %s: %d new messages", self.topic, self.subscription, new_messages)
                    if self._ready(sum(beyond.values()), ages):
                        positions = {part: entry for part, entry in newest.items() if entry is not None}
                        payload = {
                            **self._payload(reading, beyond, positions),
                            "poll_started": poll_started,
                            "previous_poll_started": previous_poll_started,
                        }
                        await self._save_positions(positions)
                        self._fired = {**self._fired, **positions}
                        yield TriggerEvent(payload)
                await asyncio.sleep(self.poll_interval)

    def _ready(self, new_messages: int, ages: Mapping[str, float]) -> bool:
        old_enough = self.max_message_age is not None and any(age >= self.max_message_age for age in ages.values())
        return new_messages >= self.threshold or old_enough

    def _payload(
        self, reading: BacklogReading, beyond: Mapping[str, int], positions: Mapping[str, FiredPosition]
    ) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "subscription": self.subscription,
            "backlog": reading.as_xcom(),
            "new_messages": sum(beyond.values()),
            "new_by_partition": dict(beyond),
            "positions": {part: entry.as_json() for part, entry in positions.items()},
            "previous_positions": {part: entry.as_json() for part, entry in self._fired.items()},
        }

    async def _load_positions(self) -> dict[str, FiredPosition]:
        if self.asset_state_store is None:
            return {}
        try:
            stored = await self.asset_state_store.aget(self.STATE_KEY)
        except Exception:  # e.g. several assets watched by one trigger: no single store
            self.log.warning("No asset state store to read positions from; counting the whole backlog", exc_info=True)
            return {}
        if not isinstance(stored, dict):
            return {}
        self.log.info("Going on from the positions fired at before: %s", stored)
        return {part: FiredPosition.from_json(entry) for part, entry in stored.items() if isinstance(entry, dict)}

    async def _save_positions(self, positions: Mapping[str, FiredPosition]) -> None:
        if self.asset_state_store is None:
            return
        merged = {**self._fired, **positions}
        try:
            await self.asset_state_store.aset(self.STATE_KEY, {part: entry.as_json() for part, entry in merged.items()})
        except Exception:
            self.log.warning("Could not store the fired positions; a restart counts the whole backlog", exc_info=True)


def _whole(reading: BacklogReading) -> PartitionMessageBacklog:
    """A non-partitioned topic's backlog as its one partition."""
    backlog = reading.backlog
    return PartitionMessageBacklog(backlog.topic, backlog.messages, backlog.entries, backlog.backlog_size, backlog.exact)
