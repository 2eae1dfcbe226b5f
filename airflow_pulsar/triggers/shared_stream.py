"""PulsarSharedStreamProducer: the broker side of a shared stream of Pulsar messages (Airflow 3.3 ack mode).

The triggerer runs one producer for every group of message event triggers that share a stream
(same connection, topics, subscription and settings): one consumer for the group, each message
broadcast to every trigger in it, in batches of up to ``batch_size`` messages (one by default).
A message is acknowledged only once every trigger has moved
past it and the asset events it gave rise to are stored in Airflow's database, so a triggerer
crash before that leaves it unacknowledged and Pulsar delivers it again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Hashable, Sequence

from airflow.triggers.shared_stream import AdvanceItem, SharedStreamProducer

from airflow_pulsar import arguments, message_source
from airflow_pulsar.client.asyncio import Client as AsyncClient
from airflow_pulsar.client.asyncio import Consumer as AsyncConsumer
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.triggers import run_settlement
from airflow_pulsar.triggers.message_batch import BatchLimits, MessageBatch, receive_batch
from airflow_pulsar.triggers.settle_log import SettleLog

log = logging.getLogger(__name__)


class PulsarSharedStreamProducer(SharedStreamProducer):
    """
    Consume a subscription for a shared stream and settle each message once the triggerer is done with it.

    The stream's raw events are :class:`~airflow_pulsar.triggers.message_batch.MessageBatch`
    objects: up to ``batch_size`` messages, the batch
    closed ``batch_timeout`` seconds after its first message. ``advance`` acknowledges the
    messages of a batch every trigger accepted (each either fired the events it made from it, now
    stored, or let it pass), except those a trigger's function failed on (``MessageBatch.reject``);
    those, and every message of a batch with any other outcome, a trigger's reject
    (``reject_shared_stream_event``, a terminal refusal), a failure (ack timeout, overflow) or a
    broadcast with no trigger listening, it negatively acknowledges, so Pulsar redelivers them
    after ``redelivery_delay`` seconds and counts the redelivery. With ``acknowledge="on_success"``
    it acknowledges what no event names, and holds what the events name until the run they
    started publishes a settle notice on ``settle_topic``, which is also its durable log of what
    it fired (see :mod:`.settle_log`): across a restart a message stays in at most one successful
    run, and ``ack_timeout`` brings back those no notice settles. With ``max_redeliver_count``,
    a message negatively acknowledged once more after that many redeliveries is published to
    the dead-letter topic (properties ``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID`` name its origin)
    and acknowledged here: the client's dead-letter policy, as Pulsar's clients implement it.
    Acknowledgements wait for the broker's receipt, so ``advance`` returns only once they are
    recorded. Advances are ordered per partition.

    :param topics: Topic names.
    :param subscription: The subscription the group consumes with.
    :param subscription_type: Subscription type name; Shared lets several triggerers share the work.
    :param initial_position: Where a new subscription starts: ``Latest`` or ``Earliest``.
    :param redelivery_delay: Seconds before a negatively acknowledged message comes back.
    :param pulsar_conn_id: The Pulsar connection.
    :param dead_letter_topic: Where rejected messages go, None for ``<topic>-<subscription>-DLQ``.
    :param max_redeliver_count: Redeliveries before a rejected message goes to the dead-letter
        topic; None: no dead-letter policy, rejected messages come back forever.
    :param batch_size: Messages per raw event (>= 1).
    :param batch_timeout: Seconds a batch waits for more messages after its first.
    :param acknowledge: ``on_fire`` (acknowledge once the events are stored) or ``on_success``
        (hold until the run settles them).
    :param settle_topic: Where runs publish their settle notices (``on_success`` only).
    :param ack_timeout: Seconds after its event fired that a held message nobody settled fires
        anew (``on_success`` only).
    """

    def __init__(
        self,
        *,
        topics: Sequence[str],
        subscription: str,
        subscription_type: str,
        initial_position: str,
        redelivery_delay: float,
        pulsar_conn_id: str,
        dead_letter_topic: str | None = None,
        max_redeliver_count: int | None = None,
        batch_size: int = 1,
        batch_timeout: float = 5.0,
        acknowledge: str = run_settlement.ON_FIRE,
        settle_topic: str | None = None,
        ack_timeout: float | None = None,
    ) -> None:
        self.topics = list(topics)
        self.subscription = subscription
        self.subscription_type = arguments.consumer_type(subscription_type)
        self.initial_position = arguments.initial_position(initial_position)
        self.redelivery_delay = redelivery_delay
        self.pulsar_conn_id = pulsar_conn_id
        self.dead_letter_policy = message_source.dead_letter_policy(dead_letter_topic, max_redeliver_count)
        self.limits = BatchLimits(batch_size, batch_timeout)
        self.settle_topic = settle_topic if acknowledge == run_settlement.ON_SUCCESS else None
        self.ack_timeout = ack_timeout
        self._settle_log: SettleLog | None = None
        self._client: AsyncClient | None = None
        self._consumer: AsyncConsumer | None = None
        self._settling: asyncio.Task[None] | None = None

    async def open_stream(self) -> AsyncIterator[tuple[MessageBatch, MessageBatch]]:
        """Subscribe (here, not before: the group owns the connection) and yield each batch twice:
        as the raw event the triggers filter, and as what ``advance`` settles."""
        hook = PulsarHook(pulsar_conn_id=self.pulsar_conn_id)
        await hook.aget_config()
        self._client = hook.get_async_client()
        if self.settle_topic is not None and self.ack_timeout is not None:
            # Replayed before the consumer subscribes: a redelivered message that a live run holds
            # must not fire again.
            self._settle_log = await SettleLog.open(self._client, self.settle_topic, self.subscription, self.ack_timeout)
        self._consumer = await self._client.subscribe(
            self.topics[0] if len(self.topics) == 1 else self.topics,
            self.subscription,
            consumer_type=self.subscription_type,
            initial_position=self.initial_position,
            negative_ack_redelivery_delay_ms=int(self.redelivery_delay * 1000),
            dead_letter_policy=self.dead_letter_policy,
            ack_receipt_enabled=True,
            # Messages of a producer batch are settled one by one.
            batch_index_ack_enabled=True,
            unacked_messages_timeout_ms=int(self.ack_timeout * 1000) if self.ack_timeout else None,
        )
        settle_log = self._settle_log
        if settle_log is not None:
            settle_log.consumer = self._consumer
            self._settling = asyncio.create_task(settle_log.settle_forever())
        while True:
            batch = await receive_batch(self._consumer, self.limits)
            if settle_log is not None:
                fresh = [message for message in batch.messages if await settle_log.deliver(message)]
                if not fresh:
                    continue
                batch = MessageBatch(tuple(fresh), recorder=settle_log.record_fired)
            yield batch, batch

    def get_advance_lane(self, broker_payload: MessageBatch) -> Hashable:
        """One lane per partition of a batch's first message: a slow partition holds up fewer
        others (each message is acknowledged on its own, so lanes need no order between them)."""
        return broker_payload.messages[0].topic_name()

    async def advance(self, batch: Sequence[AdvanceItem]) -> None:
        """Acknowledge what every trigger accepted; negatively acknowledge the rest."""
        if self._consumer is None:
            # Raising terminates the group; nothing was acknowledged, so Pulsar redelivers.
            raise RuntimeError(f"no consumer on {self.subscription} to settle {len(batch)} message(s)")
        for item in batch:
            messages: MessageBatch = item.broker_payload
            for index, message in enumerate(messages.messages):
                if self._settle_log is not None and index in messages.fired:
                    # In flight whatever the outcome (its event may be stored): its run, or the
                    # ack timeout, settles it.
                    await self._settle_log.hold(message)
                elif item.outcome.is_clean and index not in messages.rejected:
                    await self._consumer.acknowledge(message)
                else:
                    await self._consumer.negative_acknowledge(message)

    async def aclose(self) -> None:
        """Stop settling, close the settle log, the consumer (flushing acknowledgements) and the client.

        Held messages stay unacknowledged: Pulsar delivers them again to the subscription's next consumer.
        """
        consumer, client, settling, settle_log = self._consumer, self._client, self._settling, self._settle_log
        self._consumer = self._client = self._settling = self._settle_log = None
        if settling is not None:
            settling.cancel()
            await asyncio.gather(settling, return_exceptions=True)
        try:
            if settle_log is not None:
                await settle_log.close()
            if consumer is not None:
                await consumer.close()
        finally:
            if client is not None:
                await client.close()
