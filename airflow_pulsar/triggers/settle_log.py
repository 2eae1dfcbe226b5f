"""SettleLog: a run-acknowledging watcher's settle topic, read and written as its durable log.

The watcher publishes a ``fired`` record naming an event's messages before the event is stored,
and reads the settle topic through a durable subscription of its own (the watcher's
subscription name, Failover: one watcher reads at a time), so notices published while it is
down wait for it. On start, before anything is delivered to it, it replays the subscription's
backlog into a :class:`~.settle_ledger.SettleLedger` (up to an ``opened`` record it publishes
itself, which marks the backlog's end): a redelivered message fired and not settled yet is held
again without firing, one whose run succeeded is acknowledged, a released one is fired anew.
Settle-topic entries are acknowledged once nothing depends on them, so the replay stays short.

Held messages are settled through the consumer that received them, the only one whose negative
acknowledgement Pulsar honours. A message whose run never settles it (the run was killed) is
released ``ack_timeout`` seconds after its fired record, and fired anew when it comes back.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence

from airflow_pulsar.client import ConsumerType, InitialPosition, Message, MessageId, Result
from airflow_pulsar.client.asyncio import Client as AsyncClient
from airflow_pulsar.client.asyncio import Consumer as AsyncConsumer
from airflow_pulsar.client.asyncio import Producer as AsyncProducer
from airflow_pulsar.client.asyncio import PulsarException
from airflow_pulsar.triggers.run_settlement import MessageKey, Outcome, SettleNotice, message_key
from airflow_pulsar.triggers.settle_ledger import SettleLedger

log = logging.getLogger(__name__)

# How long the settling loop waits for a notice at most before it looks for expired messages again.
_LONGEST_WAIT = 60.0


class SettleLog:
    """
    The settle topic of one watcher: its fired records, the runs' notices, and the messages it holds.

    Open it with :meth:`open` before the watcher's consumer subscribes, then set ``consumer``
    (the watcher's consumer, which receives and settles the watched messages); :meth:`deliver`
    each received message, :meth:`record_fired` before an event is stored, :meth:`hold` what
    fired once the event is, and run :meth:`settle_forever` alongside.

    :param notices: The durable subscription to the settle topic.
    :param records: The producer of fired records.
    :param ledger: The state replayed from the settle topic.
    """

    def __init__(self, notices: AsyncConsumer, records: AsyncProducer, ledger: SettleLedger) -> None:
        self.consumer: AsyncConsumer | None = None
        self._notices = notices
        self._records = records
        self.ledger = ledger
        self._held: dict[MessageKey, Message] = {}

    @classmethod
    async def open(cls, client: AsyncClient, settle_topic: str, subscription: str, ack_timeout: float) -> SettleLog:
        """Subscribe to the settle topic and replay its backlog; waits while another watcher reads it."""
        records = await client.create_producer(settle_topic, batching_enabled=False)
        notices = await client.subscribe(
            settle_topic, subscription, consumer_type=ConsumerType.Failover, initial_position=InitialPosition.Earliest
        )
        settle_log = cls(notices, records, SettleLedger(ack_timeout, time.time()))
        await settle_log._replay(settle_topic)
        return settle_log

    async def deliver(self, message: Message) -> bool:
        """Whether a received message is to be fired; if not, it is held for its live run, or
        acknowledged because its run succeeded."""
        key = message_key(message)
        disposition = self.ledger.disposition(key, time.time())
        if disposition == "hold":
            self._held[key] = message
        elif disposition == "acknowledge":
            await self._apply("acknowledge", message)
        else:
            # Released, or unsettled past the ack timeout: its earlier fire no longer matters.
            await self._acknowledge_entries(self.ledger.forget(key))
        return disposition == "fire"

    async def record_fired(self, messages: Sequence[Message]) -> None:
        """Put ``messages`` in flight: publish their fired record (before their event is stored)."""
        keys = [message_key(message) for message in messages]
        entry = await self._records.send(SettleNotice("fired", tuple(keys)).encode())
        await self._acknowledge_entries(self.ledger.fired(entry, keys, time.time()))

    async def hold(self, message: Message) -> None:
        """Keep a fired message unacknowledged until its run settles it (at once if it did already)."""
        key = message_key(message)
        outcome = self.ledger.outcome(key)
        if outcome is None:
            self._held[key] = message
        else:
            await self._apply(outcome, message)

    async def settle_forever(self) -> None:
        """Apply the runs' notices as they arrive and release what expired, until cancelled."""
        try:
            while True:
                await self._release_expired()
                next_expiry = self.ledger.next_expiry()
                wait = _LONGEST_WAIT if next_expiry is None else min(max(next_expiry - time.time(), 0.0), _LONGEST_WAIT)
                try:
                    entry = await self._notices.receive(timeout_millis=max(int(wait * 1000), 1))
                except PulsarException as exc:
                    if exc.error() != Result.Timeout:
                        raise
                    continue
                await self._read(entry, replaying=False)
        except Exception:
            # Held messages still come back after the consumer's ack timeout; say why they waited that long.
            log.exception("Settling stopped on %s", self._notices.topic())

    async def close(self) -> None:
        """Close the settle topic's producer and subscription (held messages stay unacknowledged)."""
        try:
            await self._records.close()
        finally:
            await self._notices.close()

    async def _replay(self, settle_topic: str) -> None:
        """Read the backlog up to an ``opened`` record of this watcher's."""
        marker = f"watcher {uuid.uuid4()}"
        await self._records.send(SettleNotice("opened", (), marker).encode())
        while True:
            entry = await self._notices.receive()
            if await self._read(entry, replaying=True) == marker:
                break
        log.info("Replayed %s: %d message(s) in flight", settle_topic, self.ledger.in_flight())

    async def _read(self, entry: Message, replaying: bool) -> str | None:
        """Take one settle-topic record into the ledger; the ``run`` of an ``opened`` record."""
        try:
            record = SettleNotice.decode(entry.data())
        except ValueError:
            log.warning("Ignoring %s on %s: not a settle record", entry.message_id(), self._notices.topic())
            record = SettleNotice("opened", ())
        if record.outcome == "fired":
            # This watcher knows its own fired records from when it published them.
            if replaying:
                self.ledger.fired(entry.message_id(), record.messages, entry.publish_timestamp() / 1000)
            return None
        if record.outcome == "opened":
            await self._notices.acknowledge(entry)
            return record.run
        settled = self.ledger.noticed(entry.message_id(), record.outcome, record.messages)
        held = 0
        for key in settled:
            message = self._held.get(key)
            if message is not None:
                held += 1
                await self._apply(record.outcome, message)
        if not settled:
            await self._notices.acknowledge(entry)
        log.info("Run %s: %s %d message(s), %d held here", record.run, record.outcome, len(settled), held)
        return None

    async def _apply(self, outcome: Outcome, message: Message) -> None:
        """Settle a message on the watcher's consumer, then the entries that waited for it."""
        assert self.consumer is not None, "deliver and hold come after the consumer subscribed"
        key = message_key(message)
        self._held.pop(key, None)
        if outcome == "acknowledge":
            await self.consumer.acknowledge(message)
        else:
            await self.consumer.negative_acknowledge(message)
        await self._acknowledge_entries(self.ledger.forget(key))

    async def _release_expired(self) -> None:
        """Give back what no run settled within the ack timeout: it fires anew when delivered again."""
        for key in self.ledger.expired(time.time()):
            message = self._held.get(key)
            if message is not None:
                log.warning("No run settled %s within the ack timeout: firing it anew", key)
                await self._apply("release", message)
            else:
                await self._acknowledge_entries(self.ledger.forget(key))

    async def _acknowledge_entries(self, entries: Sequence[MessageId]) -> None:
        for entry in entries:
            await self._notices.acknowledge(entry)
