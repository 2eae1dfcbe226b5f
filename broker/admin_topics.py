"""The admin REST paths of topics: HTTP lookup, lifecycle and partitions, the deduplication
policy, and stats, with Pulsar's statuses, reasons and JSON field names."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from airflow_pulsar.client.topic_name import PARTITION_SUFFIX, InvalidTopicNameError, TopicName

from .admin_authorization import LOOKUP, OnNamespace, OnTopic, TopicPolicy, requires
from .admin_resource import BAD_TOPIC, TOPIC_PATH, AdminResource, error, policy_response, query_flag
from .authorization import NamespaceOperation, TopicOperation
from .policies import DEDUPLICATION
from .topic import Topic

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
)
# Pulsar's TopicStatsImpl.add assigns these rather than adding them up: a partitioned topic shows
# its last partition's transaction counts.
_FROM_LAST_PARTITION = ("ongoingTxnCount", "abortedTxnCount", "committedTxnCount")
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


class TopicLookup(AdminResource):
    """Pulsar's HTTP lookup (``/lookup/v2/topic/...``)."""

    def routes(self) -> list[web.RouteDef]:
        """The lookup path."""
        return [web.get("/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}", self.lookup)]

    @requires(LOOKUP)
    async def lookup(self, request: web.Request) -> web.Response:
        """Pulsar's HTTP lookup: the broker serving a topic (this one), in Pulsar's LookupData fields."""
        info = request.match_info
        if info["domain"] not in ("persistent", "non-persistent"):
            return error(412, BAD_TOPIC)
        try:
            name = TopicName.parse(
                f"{info['domain']}://{info['tenant']}/{info['namespace']}/{info['topic']}", strict=False
            )
        except InvalidTopicNameError:
            return error(412, BAD_TOPIC)
        self.service.check_namespace(name)
        service_url, web_url = self.service.service_url, self.service.web_service_url
        if self.service.config.tls:  # both ports serve TLS only: the Tls fields carry the URLs
            return web.json_response(
                {"brokerUrlTls": service_url, "httpUrlTls": web_url, "nativeUrl": service_url, "brokerUrlSsl": service_url}
            )
        return web.json_response({"brokerUrl": service_url, "httpUrl": web_url, "nativeUrl": service_url, "brokerUrlSsl": ""})


class PersistentTopics(AdminResource):
    """Topics and partitioned topics: create, delete, partition, their policy and their stats."""

    def routes(self) -> list[web.RouteDef]:
        """The topic paths, subscriptions and messages aside."""
        return [
            web.put(TOPIC_PATH, self.create_topic),
            web.delete(TOPIC_PATH, self.delete_topic),
            web.put(TOPIC_PATH + "/partitions", self.create_partitions),
            web.post(TOPIC_PATH + "/partitions", self.create_partitions),
            web.get(TOPIC_PATH + "/partitions", self.get_partitions),
            web.delete(TOPIC_PATH + "/partitions", self.delete_partitioned),
            web.get(TOPIC_PATH + "/deduplicationEnabled", self.get_deduplication),
            web.post(TOPIC_PATH + "/deduplicationEnabled", self.set_deduplication),
            web.delete(TOPIC_PATH + "/deduplicationEnabled", self.set_deduplication),
            web.get(TOPIC_PATH + "/stats", self.stats),
            web.get(TOPIC_PATH + "/partitioned-stats", self.partitioned_stats),
            web.get(TOPIC_PATH + "/internalStats", self.internal_stats),
            web.get(TOPIC_PATH + "/partitioned-internalStats", self.partitioned_internal_stats),
        ]

    # ---- lifecycle ----

    @requires(OnNamespace(NamespaceOperation.CREATE_TOPIC))
    async def create_topic(self, request: web.Request) -> web.Response:
        """Create a non-partitioned topic, or one missing partition of a partitioned one."""
        name = self.topic_name(request, namespace_first=True)
        if self.exists(name):
            return error(409, "This topic already exists")
        count = self.service.partitions_of(name.base) if name.partition >= 0 else 0
        if name.partition >= count > 0:  # Pulsar's reason, "smaller" and all
            return error(
                412,
                f'Can\'t create topic {name.local_name} with "-partition-" followed by a number smaller than '
                f"number of partition of partitioned topic {name.base.local_name}",
            )
        await self.service.get_topic(name)
        return web.Response(status=204)

    @requires(OnNamespace(NamespaceOperation.DELETE_TOPIC))
    async def delete_topic(self, request: web.Request) -> web.Response:
        """Delete a non-partitioned topic or one partition (``?force=true``: with its clients)."""
        name = self.topic_name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return error(
                409,
                f"{name} is a partitioned topic, instead of calling delete topic, please call delete-partitioned-topic.",
            )
        await self.service.delete_topic(name, force=query_flag(request, "force"))
        return web.Response(status=204)

    @requires(TopicPolicy("PARTITION", write=True))
    async def create_partitions(self, request: web.Request) -> web.Response:
        """PUT creates a partitioned topic, POST adds partitions to one; the body is the count."""
        creating = request.method == "PUT"
        name = self.topic_name(request, namespace_first=creating)
        if creating and PARTITION_SUFFIX in name.local_name:
            return error(412, "Partitioned Topic Name should not contain '-partition-'")
        text = await request.text()
        if not text.strip():
            return error(400, "The request entity cannot be empty.")
        try:
            # As Pulsar's JSON reader: a number, or a string holding one; a fraction is cut.
            partitions = int(float(json.loads(text)))
        except (ValueError, TypeError, OverflowError):
            return error(400, f"the request body must be the number of partitions, got {text[:50]!r}")
        if partitions <= 0:
            return error(406, "Number of partitions should be more than 0")
        current = self.service.partitions_of(name)
        if creating and (current or str(name) in self.service.topics):
            return error(409, "This topic already exists")
        if not creating:
            if not current:
                return error(409, f"Topic {name} is not the partitioned topic.")
            if partitions < current:
                return error(422, f"Desired partitions {partitions} can't be less than the current partitions {current}.")
        await self.service.create_partitioned_topic(name, partitions)
        return web.Response(status=204)

    @requires(OnTopic(TopicOperation.LOOKUP))
    async def get_partitions(self, request: web.Request) -> web.Response:
        """A topic's partitioned metadata: 0 partitions when it is not partitioned. A topic that does
        not exist is not found, unless ``checkAllowAutoCreation=true`` asks, as a client's HTTP
        lookup does, for the metadata it would be created with (this broker creates topics on use)."""
        name = self.topic_name(request)
        if not self.exists(name) and request.query.get("checkAllowAutoCreation") != "true":
            return error(404, f"Topic {name} not found")
        return web.json_response({"partitions": self.service.partitions_of(name), "deleted": False})

    @requires(OnNamespace(NamespaceOperation.DELETE_TOPIC))
    async def delete_partitioned(self, request: web.Request) -> web.Response:
        """Delete a partitioned topic and its partitions (``?force=true``: with their clients)."""
        name = self.topic_name(request)
        if not self.service.partitions_of(name) or name.partition >= 0:
            if str(name) in self.service.topics:
                return error(
                    409,
                    f"{name} is a non-partitioned topic. Instead of calling delete-partitioned-topic please call delete.",
                )
            return error(404, f"Topic {name} not found.")
        await self.service.delete_topic(name, force=query_flag(request, "force"))
        return web.Response(status=204)

    # ---- deduplication policy ----

    @requires(TopicPolicy("DEDUPLICATION", write=False))
    async def get_deduplication(self, request: web.Request) -> web.Response:
        """The topic's own policy, or with ``applied=true`` the one in force."""
        name = self.policy_topic(request)
        if isinstance(name, web.Response):
            return name
        if request.query.get("applied", "false").lower() == "true":
            return web.json_response(self.service.policies.deduplication(name))
        return policy_response(self.service.policies.topic_policy(name, DEDUPLICATION))

    @requires(TopicPolicy("DEDUPLICATION", write=True))
    async def set_deduplication(self, request: web.Request) -> web.Response:
        """POST sets the topic's policy (body ``true`` or ``false``), DELETE removes it."""
        name = self.policy_topic(request)
        if isinstance(name, web.Response):
            return name
        policies = self.service.policies
        return await self.update_flag_policy(
            request, lambda value: policies.set_topic_policy(name, DEDUPLICATION, value)
        )

    # ---- stats ----

    @requires(OnTopic(TopicOperation.GET_STATS))
    async def stats(self, request: web.Request) -> web.Response:
        """Pulsar's topic stats of one topic or partition."""
        name = self.topic_name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return error(404, f"Topic {name} not found")  # Pulsar's answer: the partitions are the topics
        topic = await self.existing(name)
        return web.json_response(topic.stats())

    @requires(OnTopic(TopicOperation.GET_STATS))
    async def partitioned_stats(self, request: web.Request) -> web.Response:
        """Pulsar's partitioned-stats: the sums, and each partition's stats unless ``perPartition=false``."""
        name = self.topic_name(request)
        count = self.service.partitions_of(name)
        if not count:
            return error(404, f"Partitioned Topic {name} not found")
        per_partition = request.query.get("perPartition", "true").lower() != "false"
        parts = {str(part): (await self.service.get_topic(part)).stats() for part in self.partitions(name)}
        return web.json_response(aggregate_stats(parts, count, per_partition))

    @requires(OnTopic(TopicOperation.GET_STATS))
    async def internal_stats(self, request: web.Request) -> web.Response:
        """Pulsar's internal stats of one topic or partition (see :func:`internal_stats_document`)."""
        name = self.topic_name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return error(404, f"Topic {name} not found")  # Pulsar's answer: ask one partition
        return web.json_response(internal_stats_document(await self.existing(name)))

    @requires(OnTopic(TopicOperation.GET_STATS))
    async def partitioned_internal_stats(self, request: web.Request) -> web.Response:
        """Pulsar's partitioned-internalStats: every partition's internal stats in one answer
        (``{"metadata": {"partitions": N, ...}, "partitions": {name: internal stats}}``)."""
        name = self.topic_name(request)
        count = self.service.partitions_of(name)
        if not count or name.partition >= 0:
            return error(404, f"Partitioned Topic {name} not found")
        parts = {str(part): internal_stats_document(await self.service.get_topic(part)) for part in self.partitions(name)}
        return web.json_response({"metadata": {"partitions": count, "deleted": False}, "partitions": parts})


def internal_stats_document(topic: Topic) -> dict[str, Any]:
    """Pulsar's internal stats of one topic or partition (a subset): the ledger layout and each
    cursor's positions. As in Pulsar, the open ledger is listed with 0 entries; its count is
    ``currentLedgerEntries``."""
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
    return {
        "entriesAddedCounter": topic.entries_added,
        "numberOfEntries": ledger.last_entry_id + 1,
        "totalSize": ledger.total_bytes,
        "currentLedgerEntries": ledger.last_entry_id + 1,
        "currentLedgerSize": ledger.total_bytes,
        "lastConfirmedEntry": f"{ledger_id}:{ledger.last_entry_id}",
        "state": "LedgerOpened",
        "ledgers": [{"ledgerId": ledger_id, "entries": 0, "size": 0, "offloaded": False, "underReplicated": False}],
        "cursors": cursors,
    }


def _deleted_ranges(ledger_id: int, acked: set[int]) -> str:
    """Entries acknowledged above the mark-delete, as Pulsar prints them: ``[(L:4..L:6],(L:8..L:9]]``."""
    spans: list[list[int]] = []
    for entry in sorted(acked):
        if spans and entry == spans[-1][1] + 1:
            spans[-1][1] = entry
        else:
            spans.append([entry, entry])
    return "[" + ",".join(f"({ledger_id}:{first - 1}..{ledger_id}:{last}]" for first, last in spans) + "]"


def aggregate_stats(parts: dict[str, dict[str, Any]], partitions: int, per_partition: bool) -> dict[str, Any]:
    """Pulsar's partitioned-stats document: sums across partitions, and each partition's own."""
    total: dict[str, Any] = {key: sum(p[key] for p in parts.values()) for key in _SUMMED}
    total["averageMsgSize"] = total["bytesInCounter"] / total["msgInCounter"] if total["msgInCounter"] else 0.0
    total["publishers"] = [pub for p in parts.values() for pub in p["publishers"]]
    last = list(parts.values())[-1]
    total |= {key: last[key] for key in _FROM_LAST_PARTITION if key in last}
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
    total["metadata"] = {"partitions": partitions, "deleted": False}
    total["partitions"] = parts if per_partition else {}
    return total
