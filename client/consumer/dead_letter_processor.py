"""Dead-letter handling, entirely client-side as in the official clients.

A message that arrives with ``redelivery_count >= max_redeliver_count`` is remembered. When it is
due for redelivery again (nack or ack timeout), it is published to the dead-letter topic with
``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID`` properties and acknowledged instead. One that arrives
with a higher count (``redeliver_unacknowledged_messages`` rewinds everything, past that check)
goes there on arrival, never reaching the application, as in the official clients. The broker
only counts redeliveries (Shared and Key_Shared subscriptions).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..exceptions import PulsarException
from .dead_letter import ConsumerDeadLetterPolicy
from .message import Message

if TYPE_CHECKING:
    from ..services import DeadLetterSender

log = logging.getLogger(__name__)

REAL_TOPIC = "REAL_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"


class DeadLetterProcessor:
    """Remembers messages at their last redelivery and diverts them when they come due again.

    ``open_producer(topic)`` gives a producer (``send(data, **keywords)``, ``close()``);
    ``subscribe_initial(topic, name)`` creates the initial subscription; ``ack(message)``
    acknowledges an original once it is safely in the dead-letter topic.
    """

    def __init__(
        self,
        policy: ConsumerDeadLetterPolicy,
        topic: str,
        subscription: str,
        open_producer: Callable[[str], DeadLetterSender],
        subscribe_initial: Callable[[str, str], None],
        ack: Callable[[Message], None],
    ):
        self.policy = policy
        self.topic = policy.dead_letter_topic or f"{topic}-{subscription}-DLQ"
        self._open_producer = open_producer
        self._subscribe_initial = subscribe_initial
        self._ack = ack
        self._lock = threading.Lock()
        self._sending = threading.Lock()  # one divert at a time: they share the producer
        self._last_chance: dict[tuple[int, int], list[Message]] = {}
        self._producer: DeadLetterSender | None = None
        self.diverted = 0

    def remember(self, ledger: int, entry: int, messages: list[Message], redelivery_count: int) -> None:
        """Note an entry's messages when this is their last permitted delivery."""
        if redelivery_count >= self.policy.max_redeliver_count and messages:
            with self._lock:
                self._last_chance[(ledger, entry)] = messages

    def admit(self, messages: list[Message]) -> list[Message]:
        """The messages of one delivered entry that the application may still see: none once the
        entry came back past the limit (then they are diverted, on a thread of their own)."""
        if not messages:
            return messages
        message_id = messages[0].message_id()
        ledger, entry = message_id.ledger_id(), message_id.entry_id()
        redelivery_count = messages[0].redelivery_count()
        if not self.past_limit(redelivery_count):
            self.remember(ledger, entry, messages, redelivery_count)
            return messages
        self.forget(ledger, entry)
        # Publishing blocks; the receiving thread must not.
        threading.Thread(target=self.divert, args=(messages,), daemon=True).start()
        return []

    def past_limit(self, redelivery_count: int) -> bool:
        """Whether a message came back more often than the policy allows, so it goes to the
        dead-letter topic instead of to the application."""
        return redelivery_count > self.policy.max_redeliver_count

    def forget(self, ledger: int, entry: int) -> None:
        """The entry was acknowledged after all."""
        with self._lock:
            self._last_chance.pop((ledger, entry), None)

    def split(self, keys: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[Message]]:
        """Split entries due for redelivery into (those to redeliver, messages to dead-letter)."""
        redeliver: list[tuple[int, int]] = []
        doomed: list[Message] = []
        with self._lock:
            for key in keys:
                messages = self._last_chance.pop(key, None)
                if messages is None:
                    redeliver.append(key)
                else:
                    doomed.extend(messages)
        return redeliver, doomed

    def divert(self, messages: list[Message]) -> None:
        """Publish to the dead-letter topic and acknowledge the originals (blocking)."""
        with self._sending:
            self._divert(messages)

    def _divert(self, messages: list[Message]) -> None:
        try:
            producer = self._producer_for_topic()
            for message in messages:
                properties = message.properties()
                properties[REAL_TOPIC] = message.topic_name()
                properties[ORIGIN_MESSAGE_ID] = str(message.message_id())
                keywords: dict[str, Any] = {"properties": properties}
                if message.partition_key():
                    keywords["partition_key"] = message.partition_key()
                if message.event_timestamp():
                    keywords["event_timestamp"] = message.event_timestamp()
                producer.send(message.data(), **keywords)
                self._ack(message)
                self.diverted += 1
        except PulsarException as exc:
            # Not acknowledged, so the broker redelivers it after a reconnect; try again then.
            log.error("could not move %d message(s) to %s: %s", len(messages), self.topic, exc)

    def _producer_for_topic(self) -> DeadLetterSender:
        if self._producer is None:
            if self.policy.initial_subscription_name:
                self._subscribe_initial(self.topic, self.policy.initial_subscription_name)
            self._producer = self._open_producer(self.topic)
        return self._producer

    def close(self) -> None:
        """Close the dead-letter producer, if one was opened."""
        if self._producer is not None:
            try:
                self._producer.close()
            except PulsarException as exc:
                log.warning("closing the dead-letter producer failed: %s", exc)
            self._producer = None
