"""Messages acknowledged once the DAG run they started has succeeded (``acknowledge="on_success"``).

A message event watcher in this mode does not acknowledge the messages of an event when it is
stored: it holds them, unacknowledged, on its own consumer, and the event names them (topic and
message id of each, and the *settle topic*). The run's last tasks publish a settle notice to that
topic: ``acknowledge`` once the run succeeded, ``release`` when it failed. The watcher reads the
settle topic and acknowledges or negatively acknowledges the held messages through the consumer
that received them, which is the only consumer whose negative acknowledgement Pulsar honours; a
released message comes back after ``redelivery_delay`` in a later event. Messages nobody settles
(the run was killed) come back when the consumer's ack timeout expires.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from airflow_pulsar.client import Message
from airflow_pulsar.client.asyncio import Consumer as AsyncConsumer

log = logging.getLogger(__name__)

ON_FIRE, ON_SUCCESS = "on_fire", "on_success"
ACKNOWLEDGE_MODES = (ON_FIRE, ON_SUCCESS)
Outcome = Literal["acknowledge", "release"]
# The event payload's key naming where a run settles its messages.
SETTLE_TOPIC_KEY = "settle_topic"

MessageKey = tuple[str, str]  # (topic or partition name, str(message id))


def acknowledge_mode(value: Any) -> str:
    """``on_fire`` or ``on_success`` (ValueError otherwise)."""
    if value not in ACKNOWLEDGE_MODES:
        raise ValueError(f"acknowledge must be one of {', '.join(ACKNOWLEDGE_MODES)}, got {value!r}")
    return str(value)


def default_settle_topic(topics: Sequence[str], subscription: str) -> str:
    """``<first topic>-<subscription>-settle``, named as Pulsar names a dead-letter topic."""
    return f"{topics[0]}-{subscription}-settle"


def message_key(message: Message) -> MessageKey:
    """How a held message is named in events and settle notices."""
    return message.topic_name(), str(message.message_id())


@dataclass(frozen=True)
class SettleNotice:
    """What a run tells its watcher: acknowledge or release these messages."""

    outcome: Outcome
    messages: tuple[MessageKey, ...]
    run: str = ""

    def encode(self) -> bytes:
        """The notice as the JSON a settle topic carries."""
        return json.dumps(
            {
                "outcome": self.outcome,
                "run": self.run,
                "messages": [{"topic": topic, "message_id": message_id} for topic, message_id in self.messages],
            }
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> SettleNotice:
        """A notice from its JSON; ValueError if it is not one."""
        try:
            body = json.loads(data)
            outcome = body["outcome"]
            messages = tuple((item["topic"], item["message_id"]) for item in body["messages"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a settle notice: {data[:200]!r}") from exc
        if outcome not in ("acknowledge", "release"):
            raise ValueError(f"unknown settle outcome {outcome!r}")
        return cls(outcome, messages, str(body.get("run", "")))


def event_messages(payload: Mapping[str, Any]) -> Iterator[MessageKey]:
    """The messages an event of the message event trigger names (one, or those of its batch)."""
    items = payload["messages"] if "messages" in payload else [payload]
    for item in items:
        yield item["message"]["topic"], item["message"]["message_id"]


def notices_by_topic(payloads: Iterable[Mapping[str, Any]]) -> dict[str, list[MessageKey]]:
    """The held messages of a run's events, by the settle topic of their watcher; events of watchers
    that acknowledge on firing are left out."""
    found: dict[str, list[MessageKey]] = {}
    for payload in payloads:
        topic = payload.get(SETTLE_TOPIC_KEY)
        if topic:
            found.setdefault(topic, []).extend(event_messages(payload))
    return found


class HeldMessages:
    """The fired, unsettled messages of one consumer, settled by notices from the runs.

    A notice can overtake the hold it settles (the run finished before the triggerer got back
    to its consumer): what it names and is not held yet is remembered for ``remember`` seconds
    (the ack timeout, after which such a message would come back anyway) and settles it on hold.
    """

    def __init__(self, consumer: AsyncConsumer, remember: float) -> None:
        self._consumer = consumer
        self._remember = remember
        self._held: dict[MessageKey, Message] = {}
        self._early: dict[MessageKey, tuple[Outcome, float]] = {}  # key -> (outcome, when noticed)

    def __len__(self) -> int:
        return len(self._held)

    async def hold(self, message: Message) -> None:
        """Keep ``message`` unacknowledged until a notice names it (a redelivery replaces it)."""
        key = message_key(message)
        early = self._early.pop(key, None)
        if early is None:
            self._held[key] = message
        else:
            await self._apply(early[0], message)

    async def settle(self, notice: SettleNotice) -> int:
        """Acknowledge or negatively acknowledge the held messages a notice names; how many were held.

        A message not held here may be held soon, was settled already, came back after its ack
        timeout, or is held by another triggerer of a Shared subscription, whose watcher reads
        the same notice.
        """
        now = time.monotonic()
        self._early = {key: early for key, early in self._early.items() if now - early[1] < self._remember}
        settled = 0
        for key in notice.messages:
            message = self._held.pop(key, None)
            if message is None:
                self._early[key] = (notice.outcome, now)
                continue
            await self._apply(notice.outcome, message)
            settled += 1
        log.info("Run %s: %s %d of %d message(s) held here", notice.run, notice.outcome, settled, len(notice.messages))
        return settled

    async def _apply(self, outcome: Outcome, message: Message) -> None:
        if outcome == "acknowledge":
            await self._consumer.acknowledge(message)
        else:
            await self._consumer.negative_acknowledge(message)
