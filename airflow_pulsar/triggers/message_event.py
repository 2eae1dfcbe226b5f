"""PulsarMessageEventTrigger: an event per matching message, or per bounded batch of them, for
event-driven scheduling (``AssetWatcher``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable, Sequence
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent
from airflow.triggers.shared_stream import AdvanceItem, AdvanceOutcome

from airflow_pulsar import arguments
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.message_source import MessageSourceSettings, dead_letter_arguments
from airflow_pulsar.triggers import run_settlement
from airflow_pulsar.triggers.message_batch import DEFAULT_MAX_EVENT_BYTES, BatchLimits, MessageBatch, split_by_bytes
from airflow_pulsar.triggers.message_matching import MessageMatcher
from airflow_pulsar.triggers.resources import ClosesOnCleanup
from airflow_pulsar.triggers.shared_stream import PulsarSharedStreamProducer

# Keyword arguments that define the shared stream (and so its consumer); the others are per trigger.
_STREAM_ARGUMENTS = (
    "topics",
    "subscription",
    "subscription_type",
    "initial_position",
    "redelivery_delay",
    "pulsar_conn_id",
    "dead_letter_topic",
    "max_redeliver_count",
    "batch_size",
    "batch_timeout",
    "acknowledge",
    "settle_topic",
    "ack_timeout",
)


class PulsarMessageEventTrigger(MessageSourceSettings, ClosesOnCleanup, BaseEventTrigger):
    """
    Fire an event for every message on a subscription that ``apply_function`` accepts.

    Made for ``Asset(..., watchers=[AssetWatcher(name, trigger=...)])``, directly or through
    ``MessageQueueTrigger(scheme="pulsar", ...)``: each event becomes an asset event whose extra
    holds ``{"payload": {"message": {...}, "result": ...}}`` and schedules the DAGs on the asset.

    With ``batch_size`` N > 1, messages are taken in batches of up to N (a batch closes
    ``batch_timeout`` seconds after its first message), and the messages of a batch that
    ``apply_function`` accepts make one event, ``{"payload": {"messages": [{"message": {...},
    "result": ...}, ...]}}``, in the order received: a flood of M messages makes about M / N
    events instead of M. An event holds at most ``batch_max_bytes`` bytes of JSON; a batch that
    would hold more is split into several events (a single larger message still makes one).

    In the triggerer (Airflow 3.3), triggers with equal connection, topics, subscription and
    settings share one consumer (:class:`PulsarSharedStreamProducer`): each message goes to every
    trigger of the group, and is acknowledged only once all of them have passed it and the asset
    events it caused are stored. A message whose ``apply_function`` raises is rejected and
    negatively acknowledged (Pulsar redelivers it after ``redelivery_delay`` seconds). With
    ``max_redeliver_count``, a message rejected again after that many redeliveries goes to the
    dead-letter topic instead (its properties ``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID`` say where
    it came from) and is acknowledged on its own topic, so one bad message does not come back
    forever; without it, it does. Redeliveries for other reasons (events not confirmed in time)
    count too. The function
    runs in the triggerer, which does not import from the DAGs folder: a function defined there is
    refused when the DAG is parsed.
    ``run()``, used outside the triggerer's shared streams, consumes alone with the same rules,
    acknowledging a message once its event has been taken (holding it, with ``on_success``).

    :param topics: A topic or a list of topics.
    :param subscription: The subscription to consume with.
    :param apply_function: Dotted path of ``function(message, *args, **kwargs)``; a truthy return
        fires (and is the event's ``result``). None: every message fires.
    :param apply_function_args: Extra positional arguments for the function.
    :param apply_function_kwargs: Extra keyword arguments for the function.
    :param subscription_type: ``Shared`` (default: several triggerers share the work),
        ``Exclusive``, ``Failover`` or ``KeyShared``.
    :param initial_position: Where a new subscription starts: ``Latest`` (default) or ``Earliest``.
    :param redelivery_delay: Seconds before a rejected message is delivered again (default 60).
    :param pulsar_conn_id: The Pulsar connection.
    :param dead_letter_topic: The dead-letter topic; None (default): ``<topic>-<subscription>-DLQ``,
        per topic. Needs ``max_redeliver_count``.
    :param max_redeliver_count: Redeliveries after which a rejected message goes to the
        dead-letter topic (>= 1); None (default): no dead-letter policy. Needs a ``Shared`` or
        ``KeyShared`` subscription, the types on which Pulsar counts redeliveries.
    :param batch_size: Messages per batch (default 1: an event per message, as above).
    :param batch_timeout: Seconds a batch waits for more messages after its first (default 5).
    :param batch_max_bytes: Bytes of JSON an event of a batch may hold (default 1 MiB, >= 1024).
    :param acknowledge: ``on_fire`` (default): acknowledge a message once its event is stored.
        ``on_success``: acknowledge it once the DAG run it started has succeeded, as the run's
        :class:`~airflow_pulsar.operators.run_messages.PulsarAcknowledgeRunMessagesOperator`
        says; a failed run's
        :class:`~airflow_pulsar.operators.run_messages.PulsarReleaseRunMessagesOperator` has
        them delivered again in a later event. Events then carry ``settle_topic``.
    :param settle_topic: Where runs settle their messages (``on_success``); None (default):
        ``<first topic>-<subscription>-settle``.
    :param ack_timeout: Seconds after its event fired that a message no run settled fires anew,
        across triggerer restarts too (required with ``on_success``, >= 10): longer than the DAG's
        ``dagrun_timeout``.

    Example::

        orders = Asset(
            "pulsar://orders",
            watchers=[
                AssetWatcher(
                    name="orders_watcher",
                    trigger=PulsarMessageEventTrigger(topics="orders", subscription="airflow-orders"),
                )
            ],
        )
    """

    def __init__(
        self,
        *,
        topics: str | Sequence[str],
        subscription: str,
        apply_function: str | None = None,
        apply_function_args: Sequence[Any] | None = None,
        apply_function_kwargs: dict[str, Any] | None = None,
        subscription_type: Any = "Shared",
        initial_position: Any = "Latest",
        redelivery_delay: float = 60.0,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
        dead_letter_topic: str | None = None,
        max_redeliver_count: int | None = None,
        batch_size: int = 1,
        batch_timeout: float = 5.0,
        batch_max_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        acknowledge: str = run_settlement.ON_FIRE,
        settle_topic: str | None = None,
        ack_timeout: float | None = None,
    ) -> None:
        super().__init__()
        self._set_message_source(
            topics=topics,
            subscription=subscription,
            apply_function=apply_function,
            apply_function_args=apply_function_args,
            apply_function_kwargs=apply_function_kwargs,
            subscription_type=subscription_type,
            initial_position=initial_position,
            pulsar_conn_id=pulsar_conn_id,
        )
        self.redelivery_delay = arguments.seconds(redelivery_delay, "redelivery_delay", allow_zero=True)
        self.dead_letter_topic, self.max_redeliver_count = dead_letter_arguments(
            dead_letter_topic, max_redeliver_count, self.subscription_type
        )
        self.batch_limits = BatchLimits.checked(batch_size, batch_timeout, batch_max_bytes)
        self.acknowledge = run_settlement.acknowledge_mode(acknowledge)
        self.settle_topic, self.ack_timeout = None, None
        if self.acknowledge == run_settlement.ON_SUCCESS:
            self.settle_topic = arguments.topic_name(
                settle_topic or run_settlement.default_settle_topic(self.topics, self.subscription), "settle_topic"
            )
            self.ack_timeout = arguments.seconds(ack_timeout, "ack_timeout")
            if self.ack_timeout < 10:
                raise ValueError(f"ack_timeout must be at least 10 seconds (Pulsar's minimum), got {ack_timeout!r}")
        elif settle_topic is not None or ack_timeout is not None:
            raise ValueError('settle_topic and ack_timeout need acknowledge="on_success"')
        arguments.triggerer_function(self.apply_function, "apply_function", must_be_found=False)
        self._matcher = MessageMatcher(self.apply_function, self.apply_function_args, self.apply_function_kwargs)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and plain keyword arguments, to rebuild this trigger in the triggerer."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "topics": list(self.topics),
                "subscription": self.subscription,
                "apply_function": self.apply_function,
                "apply_function_args": list(self.apply_function_args),
                "apply_function_kwargs": dict(self.apply_function_kwargs),
                "subscription_type": self.subscription_type,
                "initial_position": self.initial_position,
                "redelivery_delay": self.redelivery_delay,
                "pulsar_conn_id": self.pulsar_conn_id,
                "dead_letter_topic": self.dead_letter_topic,
                "max_redeliver_count": self.max_redeliver_count,
                "batch_size": self.batch_limits.size,
                "batch_timeout": self.batch_limits.timeout,
                "batch_max_bytes": self.batch_limits.max_event_bytes,
                "acknowledge": self.acknowledge,
                "settle_topic": self.settle_topic,
                "ack_timeout": self.ack_timeout,
            },
        )

    # ---- shared stream (the triggerer's path) ----

    def shared_stream_key(self) -> Hashable | None:
        """Triggers on the same connection, topics, subscription and settings share one consumer.

        None (consume alone, through :meth:`run`) when ``apply_function`` cannot be imported here,
        so that ``run`` reports it and no shared consumer receives messages for this trigger.
        """
        try:
            self._matcher.resolve()
        except (ImportError, TypeError):
            return None
        return (
            "pulsar",
            self.pulsar_conn_id,
            tuple(sorted(self.topics)),
            self.subscription,
            self.subscription_type,
            self.initial_position,
            self.redelivery_delay,
            self.dead_letter_topic,
            self.max_redeliver_count,
            self.batch_limits.size,
            self.batch_limits.timeout,
            self.acknowledge,
            self.settle_topic,
            self.ack_timeout,
        )

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> PulsarSharedStreamProducer:
        """The group's consumer side; it connects only when the triggerer opens the stream."""
        return PulsarSharedStreamProducer(**{name: kwargs[name] for name in _STREAM_ARGUMENTS})

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        """Fire for the messages ``apply_function`` accepts; reject those it fails on."""
        async for batch in shared_stream:
            for payload in await self._event_payloads(batch):
                yield TriggerEvent(payload)

    # ---- standalone ----

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Consume alone: fire for accepted messages, acknowledge each once passed, reject failures.

        If ``apply_function`` cannot be imported in this process, it says so once and consumes
        nothing: failing would make the triggerer start the trigger again and again, and
        rejecting each message would have Pulsar redeliver it forever. The messages wait in the
        subscription until the triggerer is restarted where the function imports.
        """
        try:
            self._matcher.resolve()
        except (ImportError, TypeError) as exc:
            self.log.error("Not consuming %s / %s: %s", ", ".join(self.topics), self.subscription, exc)
            await asyncio.Event().wait()
        producer = self.create_shared_stream_producer(self.serialize()[1])
        async with self.resources:
            self.resources.push_async_callback(producer.aclose)
            async for batch, settled in producer.open_stream():
                for payload in await self._event_payloads(batch):
                    yield TriggerEvent(payload)
                await producer.advance([AdvanceItem(settled, AdvanceOutcome(acked=1, failed=0))])

    async def _event_payloads(self, batch: MessageBatch) -> list[dict[str, Any]]:
        """The payloads of the events a batch makes; messages the function fails on are marked rejected."""
        accepted, fired = [], []
        for index, message in enumerate(batch.messages):
            try:
                # The user function may block; keep the triggerer's event loop free.
                payload = await asyncio.to_thread(self._matcher.event_payload, message)
            except Exception:
                self.log.exception("apply_function failed on %s; rejecting it", message.message_id())
                batch.reject(index)
                continue
            if payload is not None:
                accepted.append(payload)
                fired.append(index)
        # Before the events exist: a watcher that acknowledges on success records them in flight.
        await batch.fire(fired)
        if self.batch_limits.size > 1:
            accepted = [{"messages": group} for group in split_by_bytes(accepted, self.batch_limits.max_event_bytes)]
        if self.settle_topic is not None:
            accepted = [{**payload, run_settlement.SETTLE_TOPIC_KEY: self.settle_topic} for payload in accepted]
        return accepted
