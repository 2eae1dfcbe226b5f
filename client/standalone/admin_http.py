"""The broker's admin REST API: a subset of Pulsar's ``/admin/v2`` paths and JSON field names.

Errors answer 4xx with ``{"reason": ...}`` as Pulsar does, so clients written against a real
cluster (the backlog sensor among them) read ours the same way.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from ..protocol.compression import decompress
from ..protocol.frames import split_entry
from ..topic_name import InvalidTopicNameError, TopicName
from .authentication import TokenAuthenticator
from .service import BrokerService, TopicNotFoundError
from .subscription import Subscription
from .topic import Topic

_TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
_SUMMED = (
    "msgRateIn",
    "msgThroughputIn",
    "msgRateOut",
    "msgThroughputOut",
    "msgInCounter",
    "bytesInCounter",
    "msgOutCounter",
    "bytesOutCounter",
    "storageSize",
    "backlogSize",
    "entriesAddedCounter",
)
_SUB_SUMMED = (
    "msgBacklog",
    "msgBacklogNoDelayed",
    "backlogSize",
    "unackedMessages",
    "msgRateOut",
    "msgThroughputOut",
    "msgRateRedeliver",
    "msgOutCounter",
    "bytesOutCounter",
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except InvalidTopicNameError as exc:
        return _error(412, str(exc))
    except TopicNotFoundError as exc:
        return _error(404, str(exc))
    except LookupError as exc:
        return _error(404, str(exc.args[0]) if exc.args else "not found")
    except ValueError as exc:
        return _error(409, str(exc))


class AdminApi:
    """aiohttp application serving the admin paths for one BrokerService."""

    def __init__(self, service: BrokerService, authenticator: TokenAuthenticator | None = None):
        self.service = service
        guards = [authenticator.http_middleware()] if authenticator is not None else []
        self.app = web.Application(middlewares=[*guards, _errors])
        self.app.add_routes(
            [
                web.get("/admin/v2/clusters", self.clusters),
                web.get("/admin/v2/tenants", self.tenants),
                web.get("/admin/v2/namespaces/{tenant}", self.namespaces),
                web.get("/admin/v2/persistent/{tenant}/{namespace}", self.list_topics),
                web.get("/admin/v2/persistent/{tenant}/{namespace}/partitioned", self.list_partitioned),
                web.put(_TOPIC, self.create_topic),
                web.delete(_TOPIC, self.delete_topic),
                web.put(_TOPIC + "/partitions", self.create_partitions),
                web.post(_TOPIC + "/partitions", self.create_partitions),
                web.get(_TOPIC + "/partitions", self.get_partitions),
                web.delete(_TOPIC + "/partitions", self.delete_partitioned),
                web.get(_TOPIC + "/stats", self.stats),
                web.get(_TOPIC + "/partitioned-stats", self.partitioned_stats),
                web.get(_TOPIC + "/internalStats", self.internal_stats),
                web.get(_TOPIC + "/subscriptions", self.subscriptions),
                web.put(_TOPIC + "/subscription/{subscription}", self.create_subscription),
                web.delete(_TOPIC + "/subscription/{subscription}", self.delete_subscription),
                web.post(_TOPIC + "/subscription/{subscription}/skip_all", self.skip_all),
                web.get(_TOPIC + "/subscription/{subscription}/position/{position}", self.peek),
            ]
        )

    # ---- helpers ----

    @staticmethod
    def _name(request: web.Request) -> TopicName:
        info = request.match_info
        return TopicName.parse(f"persistent://{info['tenant']}/{info['namespace']}/{info['topic']}")

    def _partitions(self, name: TopicName) -> list[TopicName]:
        """The partitions of a partitioned topic, or the topic itself."""
        count = self.service.partitions_of(name) if name.partition < 0 else 0
        return [name.partition_name(i) for i in range(count)] if count else [name]

    async def _existing(self, name: TopicName) -> Topic:
        if str(name) not in self.service.topics:
            raise TopicNotFoundError(f"Topic {name} not found")
        return await self.service.get_topic(name, create=False)

    async def _topics_of(self, name: TopicName) -> list[Topic]:
        parts = self._partitions(name)
        if parts == [name] and str(name) not in self.service.topics:
            raise TopicNotFoundError(f"Topic {name} not found")
        return [await self.service.get_topic(part) for part in parts]

    # ---- cluster and namespaces ----

    async def clusters(self, request: web.Request) -> web.Response:
        return web.json_response(["standalone"])

    async def tenants(self, request: web.Request) -> web.Response:
        names = {TopicName.parse(n).tenant for n in self.service.topics} | {"public"}
        return web.json_response(sorted(names))

    async def namespaces(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        found = {TopicName.parse(n).namespace_name for n in self.service.topics}
        if tenant == "public":
            found.add("public/default")
        return web.json_response(sorted(ns for ns in found if ns.startswith(tenant + "/")))

    async def list_topics(self, request: web.Request) -> web.Response:
        info = request.match_info
        return web.json_response(self.service.list_topics(info["tenant"], info["namespace"]))

    async def list_partitioned(self, request: web.Request) -> web.Response:
        info = request.match_info
        return web.json_response(self.service.list_partitioned_topics(info["tenant"], info["namespace"]))

    # ---- topics ----

    async def create_topic(self, request: web.Request) -> web.Response:
        name = self._name(request)
        if str(name) in self.service.topics or self.service.partitions_of(name):
            return _error(409, f"Topic {name} already exists")
        await self.service.get_topic(name)
        return web.Response(status=204)

    async def delete_topic(self, request: web.Request) -> web.Response:
        name = self._name(request)
        if self.service.partitions_of(name):
            return _error(409, f"Topic {name} is partitioned; delete it through /partitions")
        await self.service.delete_topic(name)
        return web.Response(status=204)

    async def create_partitions(self, request: web.Request) -> web.Response:
        name = self._name(request)
        try:
            partitions = int(json.loads(await request.text()))
        except (ValueError, TypeError):
            return _error(400, "the request body must be the number of partitions, e.g. 4")
        if partitions <= 0:
            return _error(400, f"the number of partitions must be positive, got {partitions}")
        if request.method == "PUT" and self.service.partitions_of(name):
            return _error(409, f"Partitioned topic {name} already exists")
        await self.service.create_partitioned_topic(name, partitions)
        return web.Response(status=204)

    async def get_partitions(self, request: web.Request) -> web.Response:
        name = self._name(request)
        return web.json_response({"partitions": self.service.partitions_of(name)})

    async def delete_partitioned(self, request: web.Request) -> web.Response:
        name = self._name(request)
        if not self.service.partitions_of(name):
            return _error(404, f"Partitioned topic {name} not found")
        await self.service.delete_topic(name)
        return web.Response(status=204)

    # ---- stats ----

    async def stats(self, request: web.Request) -> web.Response:
        name = self._name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return _error(404, f"Topic {name} is partitioned; use /partitioned-stats")
        topic = await self._existing(name)
        return web.json_response(topic.stats())

    async def partitioned_stats(self, request: web.Request) -> web.Response:
        name = self._name(request)
        count = self.service.partitions_of(name)
        if not count:
            return _error(404, f"Partitioned topic {name} not found")
        per_partition = request.query.get("perPartition", "true").lower() != "false"
        parts = {str(part): (await self.service.get_topic(part)).stats() for part in self._partitions(name)}
        return web.json_response(aggregate_stats(parts, count, per_partition))

    async def internal_stats(self, request: web.Request) -> web.Response:
        """Pulsar's internal stats (a subset): the ledger layout and each cursor's positions.

        As in Pulsar, the open ledger is listed with 0 entries; its count is ``currentLedgerEntries``.
        """
        name = self._name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return _error(404, f"Topic {name} is partitioned; ask for the internal stats of one partition")
        topic = await self._existing(name)
        ledger = topic.ledger
        ledger_id = ledger.ledger_id
        cursors = {
            sub_name: {
                "markDeletePosition": f"{ledger_id}:{sub.cursor.mark_delete}",
                "readPosition": f"{ledger_id}:{sub.read_position}",
                "individuallyDeletedMessages": _deleted_ranges(ledger_id, sub.cursor.acked),
                "state": "Open",
            }
            for sub_name, sub in topic.subscriptions.items()
        }
        return web.json_response(
            {
                "entriesAddedCounter": ledger.last_entry_id + 1,
                "numberOfEntries": ledger.last_entry_id + 1,
                "totalSize": ledger.total_bytes,
                "currentLedgerEntries": ledger.last_entry_id + 1,
                "currentLedgerSize": ledger.total_bytes,
                "lastConfirmedEntry": f"{ledger_id}:{ledger.last_entry_id}",
                "state": "LedgerOpened",
                "ledgers": [{"ledgerId": ledger_id, "entries": 0, "size": 0, "offloaded": False}],
                "cursors": cursors,
            }
        )

    # ---- subscriptions ----

    async def subscriptions(self, request: web.Request) -> web.Response:
        names: set[str] = set()
        for topic in await self._topics_of(self._name(request)):
            names.update(topic.subscriptions)
        return web.json_response(sorted(names))

    async def create_subscription(self, request: web.Request) -> web.Response:
        sub_name = request.match_info["subscription"]
        body = await request.text()
        start = json.loads(body) if body.strip() else None
        created = False
        for topic in await self._topics_of(self._name(request)):
            if sub_name in topic.subscriptions:
                continue
            if start in (None, "latest") or (isinstance(start, dict) and start.get("ledgerId", -1) == 2**63 - 1):
                entry = None
            elif start == "earliest" or (isinstance(start, dict) and start.get("entryId", -1) < 0):
                entry = 0
            elif isinstance(start, dict) and "entryId" in start:
                entry = int(start["entryId"])
            else:
                return _error(400, "the body must be a message id {ledgerId, entryId} or \"earliest\"/\"latest\"")
            subscription = topic.subscription(sub_name, 0, True, entry)
            saved = subscription.persist()
            if saved is not None:
                await saved
            created = True
        if not created:
            return _error(409, f"Subscription {sub_name} already exists")
        return web.Response(status=204)

    async def delete_subscription(self, request: web.Request) -> web.Response:
        sub_name = request.match_info["subscription"]
        force = request.query.get("force", "false").lower() == "true"
        topics = await self._topics_of(self._name(request))
        found = [t for t in topics if sub_name in t.subscriptions]
        if not found:
            return _error(404, f"Subscription {sub_name} not found")
        busy = [t for t in found if t.subscriptions[sub_name].consumers]
        if busy and not force:
            return _error(412, f"Subscription {sub_name} has active consumers")
        for topic in found:
            subscription = topic.subscriptions[sub_name]
            for consumer in list(subscription.consumers):
                consumer.sink.close_consumer(consumer.consumer_id)
            saved = topic.remove_subscription(sub_name)
            if saved is not None:
                await saved
        return web.Response(status=204)

    async def skip_all(self, request: web.Request) -> web.Response:
        sub_name = request.match_info["subscription"]
        topics = await self._topics_of(self._name(request))
        found: list[Subscription] = [t.subscriptions[sub_name] for t in topics if sub_name in t.subscriptions]
        if not found:
            return _error(404, f"Subscription {sub_name} not found")
        for subscription in found:
            subscription.cursor.ack_cumulative(subscription.ledger.last_entry_id)
            saved = subscription.persist()
            if saved is not None:
                await saved
        return web.Response(status=204)

    async def peek(self, request: web.Request) -> web.Response:
        """Pulsar's peek-messages: the n-th unacknowledged entry (from 1) of a subscription, not consumed.

        The body is the (decompressed) payload; the id, publish time and batch size are headers,
        as Pulsar sends them. Partitioned topics are peeked one partition at a time.
        """
        name = self._name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return _error(405, f"Topic {name} is partitioned; peek messages on one of its partitions")
        try:
            position = int(request.match_info["position"])
        except ValueError:
            position = 0
        if position < 1:
            return _error(412, f"the position must be a positive int, got {request.match_info['position']!r}")
        topic = await self._existing(name)
        sub_name = request.match_info["subscription"]
        subscription = topic.subscriptions.get(sub_name)
        if subscription is None:
            return _error(404, f"Subscription {sub_name} not found")
        cursor, ledger = subscription.cursor, subscription.ledger
        entry_id = cursor.mark_delete
        while position > 0:
            entry_id += 1
            if entry_id > ledger.last_entry_id:
                return _error(404, "Message not found")
            if entry_id not in cursor.acked:
                position -= 1
        entry = ledger.read(entry_id, 1)[0]
        metadata, payload = split_entry(entry.data)
        headers = {
            "X-Pulsar-Message-ID": f"{ledger.ledger_id}:{entry_id}",
            "X-Pulsar-publish-time": datetime.fromtimestamp(metadata.publish_time / 1000, timezone.utc)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
        }
        if metadata.HasField("num_messages_in_batch"):
            headers["X-Pulsar-num-batch-message"] = str(metadata.num_messages_in_batch)
        body = bytes(decompress(metadata.compression, payload, metadata.uncompressed_size))
        return web.Response(body=body, headers=headers, content_type="application/octet-stream")


def _deleted_ranges(ledger_id: int, acked: set[int]) -> str:
    """Entries acknowledged above the mark-delete, as Pulsar prints them: ``[(L:4..L:6], (L:8..L:9]]``."""
    spans: list[list[int]] = []
    for entry in sorted(acked):
        if spans and entry == spans[-1][1] + 1:
            spans[-1][1] = entry
        else:
            spans.append([entry, entry])
    return "[" + ", ".join(f"({ledger_id}:{first - 1}..{ledger_id}:{last}]" for first, last in spans) + "]"


def aggregate_stats(parts: dict[str, dict[str, Any]], partitions: int, per_partition: bool) -> dict[str, Any]:
    """Pulsar's partitioned-stats document: sums across partitions, and each partition's own."""
    total: dict[str, Any] = {key: sum(p[key] for p in parts.values()) for key in _SUMMED}
    total["averageMsgSize"] = total["bytesInCounter"] / total["msgInCounter"] if total["msgInCounter"] else 0.0
    total["publishers"] = [pub for p in parts.values() for pub in p["publishers"]]
    subscriptions: dict[str, dict[str, Any]] = {}
    for stats in parts.values():
        for sub_name, sub in stats["subscriptions"].items():
            merged = subscriptions.setdefault(
                sub_name,
                {key: 0 for key in _SUB_SUMMED} | {"type": sub["type"], "isDurable": sub["isDurable"], "consumers": []},
            )
            for key in _SUB_SUMMED:
                merged[key] += sub[key]
            merged["consumers"].extend(sub["consumers"])
    total["subscriptions"] = subscriptions
    total["replication"] = {}
    total["metadata"] = {"partitions": partitions}
    total["partitions"] = parts if per_partition else {}
    return total
