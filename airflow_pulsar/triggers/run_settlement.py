"""Messages acknowledged once the DAG run they started has succeeded (``acknowledge="on_success"``).

A message event watcher in this mode does not acknowledge the messages of an event when it is
stored: it holds them, unacknowledged, on its own consumer, and the event names them (topic and
message id of each, and the *settle topic*). The run's last tasks publish a settle notice to that
topic: ``acknowledge`` once the run succeeded, ``release`` when it failed. The watcher reads the
settle topic and acknowledges or negatively acknowledges the held messages (see
:mod:`.settle_log`, which also keeps the watcher's own records there); a released message comes
back after ``redelivery_delay`` in a later event. This module holds what the runs and the watcher
share: the modes, the settle topic's name, and its records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from airflow_pulsar.client import Message

ON_FIRE, ON_SUCCESS = "on_fire", "on_success"
ACKNOWLEDGE_MODES = (ON_FIRE, ON_SUCCESS)
# What a run says about its messages.
Outcome = Literal["acknowledge", "release"]
# What a settle-topic record says: a run's outcome, or the watcher's own ``fired`` (these
# messages are in flight) and ``opened`` (a watcher started reading here).
RecordKind = Literal["acknowledge", "release", "fired", "opened"]
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
    """A settle-topic record: a run telling its watcher to acknowledge or release these messages, or
    the watcher's own record that it fired them (or started reading, ``run`` then naming it)."""

    outcome: RecordKind
    messages: tuple[MessageKey, ...]
    run: str = ""

    def encode(self) -> bytes:
        """The record as the JSON a settle topic carries."""
        return json.dumps(
            {
                "outcome": self.outcome,
                "run": self.run,
                "messages": [{"topic": topic, "message_id": message_id} for topic, message_id in self.messages],
            }
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> SettleNotice:
        """A record from its JSON; ValueError if it is not one."""
        try:
            body = json.loads(data)
            outcome = body["outcome"]
            messages = tuple((item["topic"], item["message_id"]) for item in body["messages"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a settle notice: {data[:200]!r}") from exc
        if outcome not in get_args(RecordKind):
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
