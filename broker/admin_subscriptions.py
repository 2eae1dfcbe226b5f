"""The admin REST paths of a topic's subscriptions, and of its messages read without consuming
them (peek, get by id, examine), with Pulsar's statuses, reasons and headers."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from airflow_pulsar.client.topic_name import TopicName

from .admin_authorization import OnTopic, requires
from .admin_resource import TOPIC_PATH, AdminResource, error, query_flag
from .authorization import TopicOperation
from .entry_response import entry_response
from .storage import StoredEntry
from .subscription import Subscription
from .topic import Topic

_SUBSCRIPTION = TOPIC_PATH + "/subscription/{subscription}"
# Pulsar's MessageId.latest: ledger and entry at Long.MAX_VALUE.
_LATEST = 2**63 - 1
# Pulsar's message id bodies (ResetCursorData) also read these words.
_POSITION_WORDS = {"earliest": {"ledgerId": -1, "entryId": -1}, "latest": {"ledgerId": _LATEST, "entryId": _LATEST}}


class Subscriptions(AdminResource):
    """A topic's subscriptions: list, create, delete, skip, reset; and its messages: peek, by id, examine."""

    def routes(self) -> list[web.RouteDef]:
        """The subscription and message paths of a topic."""
        return [
            web.get(TOPIC_PATH + "/subscriptions", self.subscriptions),
            web.put(_SUBSCRIPTION, self.create_subscription),
            web.delete(_SUBSCRIPTION, self.delete_subscription),
            web.post(_SUBSCRIPTION + "/skip_all", self.skip_all),
            web.post(_SUBSCRIPTION + r"/resetcursor/{timestamp:-?\d+}", self.reset_cursor_to_time),
            web.post(_SUBSCRIPTION + "/resetcursor", self.reset_cursor_to_position),
            web.get(_SUBSCRIPTION + "/position/{position}", self.peek),
            web.get(TOPIC_PATH + r"/ledger/{ledger:-?\d+}/entry/{entry:-?\d+}", self.message_by_id),
            web.get(TOPIC_PATH + "/examinemessage", self.examine_message),
        ]

    # ---- subscriptions ----

    @requires(OnTopic(TopicOperation.GET_SUBSCRIPTIONS))
    async def subscriptions(self, request: web.Request) -> web.Response:
        """The subscription names of a topic, across its partitions."""
        names: set[str] = set()
        for topic in await self.topics_of(self.topic_name(request)):
            names.update(topic.subscriptions)
        return web.json_response(sorted(names))

    @requires(OnTopic(TopicOperation.SUBSCRIBE))
    async def create_subscription(self, request: web.Request) -> web.Response:
        """Create a durable subscription at a message id (or ``earliest``/``latest``); as with
        Pulsar, a topic that does not exist yet is created with it."""
        sub_name = request.match_info["subscription"]
        body = await request.text()
        start = _message_id_body(body.strip() or '"latest"')  # no body: Pulsar's default
        if start is None:
            return error(400, f"the body must be a message id {{ledgerId, entryId}} or \"earliest\"/\"latest\", got {body[:50]!r}")
        name = self.topic_name(request)
        if not self.exists(name):
            await self.service.get_topic(name)
        created = False
        for topic in await self.topics_of(name):
            if sub_name in topic.subscriptions:
                continue
            subscription = topic.subscription(sub_name, 0, True, _entry_at(start, topic.ledger.last_entry_id))
            saved = subscription.persist()
            if saved is not None:
                await saved
            created = True
        if not created:
            return error(409, "Subscription already exists for topic")
        return web.Response(status=204)

    @requires(OnTopic(TopicOperation.UNSUBSCRIBE))
    async def delete_subscription(self, request: web.Request) -> web.Response:
        """Delete a subscription on every partition that has it (``?force=true``: with its consumers)."""
        sub_name = request.match_info["subscription"]
        force = query_flag(request, "force")
        name = self.topic_name(request)
        topics = await self.topics_of(name)
        found = [t for t in topics if sub_name in t.subscriptions]
        if not found:
            partitioned = len(topics) > 1 or topics[0].name != name
            return error(404, "Subscription not found" if partitioned else _no_subscription(sub_name, name))
        busy = [t for t in found if t.subscriptions[sub_name].consumers]
        if busy and not force:
            return error(412, "Subscription has active connected consumers")
        for topic in found:
            subscription = topic.subscriptions[sub_name]
            for consumer in list(subscription.consumers):
                consumer.sink.close_consumer(consumer.consumer_id)
            saved = topic.remove_subscription(sub_name)
            if saved is not None:
                await saved
        return web.Response(status=204)

    @requires(OnTopic(TopicOperation.RESET_CURSOR))
    async def reset_cursor_to_time(self, request: web.Request) -> web.Response:
        """Move the subscription, on every partition, to the first entry published at or after the
        timestamp (ms); past the last entry when there is none. Consumers are disconnected first."""
        sub_name = request.match_info["subscription"]
        timestamp = int(request.match_info["timestamp"])
        name = self.topic_name(request)
        found = [t.subscriptions[sub_name] for t in await self.topics_of(name) if sub_name in t.subscriptions]
        if not found:
            return error(404, _no_subscription(sub_name, name))
        for subscription in found:
            await _reset(subscription, subscription.ledger.entry_at_or_after(timestamp))
        return web.Response(status=204)

    @requires(OnTopic(TopicOperation.RESET_CURSOR))
    async def reset_cursor_to_position(self, request: web.Request) -> web.Response:
        """Move the subscription of a non-partitioned topic or one partition to a message id: its
        entry is the next delivered. Consumers are disconnected first."""
        name = self.topic_name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return error(405, "Reset-cursor at position is not allowed for partitioned-topic")
        body = await request.text()
        position = _message_id_body(body)
        if position is None:
            return error(400, f"the body must be a message id {{ledgerId, entryId}} or \"earliest\"/\"latest\", got {body[:50]!r}")
        sub_name = request.match_info["subscription"]
        subscription = (await self.existing(name)).subscriptions.get(sub_name)
        if subscription is None:
            return error(404, _no_subscription(sub_name, name))
        await _reset(subscription, _entry_at(position, subscription.ledger.last_entry_id))
        return web.Response(status=204)

    @requires(OnTopic(TopicOperation.SKIP))
    async def skip_all(self, request: web.Request) -> web.Response:
        """Acknowledge everything the subscription has not consumed yet (clear its backlog)."""
        sub_name = request.match_info["subscription"]
        name = self.topic_name(request)
        topics = await self.topics_of(name)
        found: list[Subscription] = [t.subscriptions[sub_name] for t in topics if sub_name in t.subscriptions]
        if not found:
            return error(404, _no_subscription(sub_name, name))
        for subscription in found:
            subscription.cursor.ack_cumulative(subscription.ledger.last_entry_id)
            saved = subscription.persist()
            if saved is not None:
                await saved
        return web.Response(status=204)

    # ---- messages ----

    @requires(OnTopic(TopicOperation.PEEK_MESSAGES))
    async def peek(self, request: web.Request) -> web.Response:
        """Pulsar's peek-messages: the n-th unacknowledged entry (from 1) of a subscription, not consumed.

        The body is the (decompressed) payload; the id, publish time and batch size are headers,
        as Pulsar sends them. Partitioned topics are peeked one partition at a time.
        """
        name = self.topic_name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return error(405, f"Topic {name} is partitioned; peek messages on one of its partitions")
        try:
            position = int(request.match_info["position"])
        except ValueError:
            position = 0
        if position < 1:
            return error(412, f"the position must be a positive int, got {request.match_info['position']!r}")
        topic = await self.existing(name)
        sub_name = request.match_info["subscription"]
        subscription = topic.subscriptions.get(sub_name)
        if subscription is None:
            return error(404, f"Subscription {sub_name} not found")
        cursor, ledger = subscription.cursor, subscription.ledger
        entry_id = cursor.mark_delete
        while position > 0:
            entry_id += 1
            if entry_id > ledger.last_entry_id:
                return error(404, "Message not found")
            if entry_id not in cursor.acked:
                position -= 1
        return self._entry_response(topic, ledger.read(entry_id, 1)[0])

    def _entry_response(self, topic: Topic, entry: StoredEntry) -> web.Response:
        index = topic.ledger.entry_index(entry.entry_id) if self.service.config.entry_index else None
        return entry_response(topic.ledger.ledger_id, entry, index, topic.transactions)

    @requires(OnTopic(TopicOperation.PEEK_MESSAGES))
    async def message_by_id(self, request: web.Request) -> web.Response:
        """Pulsar's get-message-by-id: one entry by its ledger and entry id, with the peek headers."""
        name = self.topic_name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return error(405, "GetMessageById is not allowed on partitioned-topic")
        topic = await self.existing(name)
        ledger = topic.ledger
        ledger_id, entry_id = int(request.match_info["ledger"]), int(request.match_info["entry"])
        found = ledger.read(entry_id, 1) if ledger_id == ledger.ledger_id and entry_id >= 0 else []
        if not found or found[0].entry_id != entry_id:  # a read past a hole returns the next entry
            return error(404, "Message id not found")
        return self._entry_response(topic, found[0])

    @requires(OnTopic(TopicOperation.PEEK_MESSAGES))
    async def examine_message(self, request: web.Request) -> web.Response:
        """Pulsar's examine-message: the n-th entry (``messagePosition``, from 1) counted from the
        newest (``initialPosition=latest``, the default) or the oldest (``earliest``) of the topic.

        As in Pulsar, a position below 1 means 1 and one past the oldest entry, counted from
        ``earliest``, gives the newest. Counted from ``latest`` past the oldest, Pulsar fails with
        500; this answers 412.
        """
        name = self.topic_name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return error(
                405,
                "Examine messages on a partitioned topic is not allowed, please try examine message on specific topic partition",
            )
        text = request.query.get("messagePosition", "1")
        try:
            position = max(int(text), 1)
        except ValueError:
            return error(412, f"messagePosition must be an integer, got {text!r}")
        topic = await self.existing(name)
        last = topic.ledger.last_entry_id
        if last < 0:
            return error(412, "Could not examine messages due to the total message is zero")
        if request.query.get("initialPosition", "latest") == "earliest":  # Pulsar compares case-sensitively
            entry_id = min(position - 1, last)
        else:
            entry_id = last - (position - 1)
            if entry_id < 0:
                return error(412, f"messagePosition {position} is beyond the {last + 1} entries of topic {name}")
        return self._entry_response(topic, topic.ledger.read(entry_id, 1)[0])


def _message_id_body(body: str) -> dict[str, Any] | None:
    """A message id body (Pulsar's ResetCursorData: ``{ledgerId, entryId, ...}``, or the words
    ``"earliest"``/``"latest"``) as a dict; None when it is neither."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if isinstance(value, str):
        value = _POSITION_WORDS.get(value)
    return value if isinstance(value, dict) and "entryId" in value else None


def _entry_at(message_id: dict[str, Any], last_entry_id: int) -> int:
    """The entry a message id body names: latest is past the last entry, earliest (or any
    negative entry) the first one."""
    if message_id.get("ledgerId") == _LATEST:
        return last_entry_id + 1
    return max(int(message_id.get("entryId", -1)), 0)


async def _reset(subscription: Subscription, entry_id: int) -> None:
    """Reset the subscription's cursor and store it."""
    subscription.reset(entry_id)
    saved = subscription.persist()
    if saved is not None:
        await saved


def _no_subscription(subscription: str, topic: TopicName) -> str:
    """Pulsar's reason for a subscription a topic does not have."""
    return f"Subscription {subscription} not found for topic {topic}"
