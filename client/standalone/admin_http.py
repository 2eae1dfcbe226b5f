"""The broker's admin REST API: a subset of Pulsar's ``/admin/v2`` paths and JSON field names,
and its HTTP lookup (``/lookup/v2/topic/...``).

Errors answer 4xx with ``{"reason": ...}`` and Pulsar's own status and reason, so clients written
against a real cluster (the backlog sensor among them) read ours the same way. As with Pulsar, a
request body must be JSON: a PUT or POST carrying another content type is answered 415.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ..topic_name import PARTITION_SUFFIX, InvalidTopicNameError, TopicName, is_valid_name_part
from .authentication import TokenAuthenticator
from .policies import DEDUPLICATION
from .entry_response import entry_response
from .service import BrokerService, TopicBusyError, TopicNotFoundError
from .storage import StoredEntry
from .subscription import Subscription
from .tenants import CLUSTER
from .topic import Topic

_TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
_NAMESPACE = "/admin/v2/namespaces/{tenant}/{namespace}"
_TENANT = "/admin/v2/tenants/{tenant}"
# Pulsar's reasons for names it cannot parse.
_BAD_TOPIC = "Topic name is not valid"
_BAD_NAMESPACE = "Namespace name is not valid"
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
    except TopicBusyError as exc:
        return _error(412, str(exc))
    except LookupError as exc:
        return _error(404, str(exc.args[0]) if exc.args else "not found")
    except ValueError as exc:
        return _error(409, str(exc))


# The content types Pulsar's resources consume, by the end of the path; JSON for the others.
_CONSUMED: dict[str, tuple[str, ...] | None] = {
    "/skip_all": None,  # takes no body: anything goes
    "/partitions": ("application/json", "text/plain"),
    "/deduplicationEnabled": ("application/json", "text/plain"),
}


@web.middleware
async def _json_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Pulsar's admin resources consume JSON (a few also plain text): a PUT or POST with a body
    (or a content type) of another type is refused with 415 and no body, before anything else."""
    if request.method in ("PUT", "POST") and (request.headers.get("Content-Type") or request.can_read_body):
        suffix = "/" + request.path.rsplit("/", 1)[-1]
        accepted = _CONSUMED.get(suffix, ("application/json",))
        if accepted is not None and request.content_type not in accepted:
            return web.Response(status=415)
    return await handler(request)


class AdminApi:
    """aiohttp application serving the admin paths for one BrokerService."""

    def __init__(self, service: BrokerService, authenticator: TokenAuthenticator | None = None):
        self.service = service
        guards = [authenticator.http_middleware()] if authenticator is not None else []
        self.app = web.Application(middlewares=[*guards, _json_only, _errors])
        self.app.add_routes(
            [
                web.get("/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}", self.lookup),
                web.get("/admin/v2/clusters", self.clusters),
                web.get("/admin/v2/tenants", self.tenants),
                web.get(_TENANT, self.get_tenant),
                web.put(_TENANT, self.create_tenant),
                web.delete(_TENANT, self.delete_tenant),
                web.get("/admin/v2/namespaces/{tenant}", self.namespaces),
                web.put(_NAMESPACE, self.create_namespace),
                web.get(_NAMESPACE, self.get_namespace),
                web.delete(_NAMESPACE, self.delete_namespace),
                web.get(_NAMESPACE + "/deduplication", self.get_namespace_deduplication),
                web.post(_NAMESPACE + "/deduplication", self.set_namespace_deduplication),
                web.delete(_NAMESPACE + "/deduplication", self.set_namespace_deduplication),
                web.get("/admin/v2/persistent/{tenant}/{namespace}", self.list_topics),
                web.get("/admin/v2/persistent/{tenant}/{namespace}/partitioned", self.list_partitioned),
                web.put(_TOPIC, self.create_topic),
                web.delete(_TOPIC, self.delete_topic),
                web.put(_TOPIC + "/partitions", self.create_partitions),
                web.post(_TOPIC + "/partitions", self.create_partitions),
                web.get(_TOPIC + "/partitions", self.get_partitions),
                web.delete(_TOPIC + "/partitions", self.delete_partitioned),
                web.get(_TOPIC + "/deduplicationEnabled", self.get_topic_deduplication),
                web.post(_TOPIC + "/deduplicationEnabled", self.set_topic_deduplication),
                web.delete(_TOPIC + "/deduplicationEnabled", self.set_topic_deduplication),
                web.get(_TOPIC + "/stats", self.stats),
                web.get(_TOPIC + "/partitioned-stats", self.partitioned_stats),
                web.get(_TOPIC + "/internalStats", self.internal_stats),
                web.get(_TOPIC + "/subscriptions", self.subscriptions),
                web.put(_TOPIC + "/subscription/{subscription}", self.create_subscription),
                web.delete(_TOPIC + "/subscription/{subscription}", self.delete_subscription),
                web.post(_TOPIC + "/subscription/{subscription}/skip_all", self.skip_all),
                web.get(_TOPIC + "/subscription/{subscription}/position/{position}", self.peek),
                web.get(_TOPIC + r"/ledger/{ledger:-?\d+}/entry/{entry:-?\d+}", self.message_by_id),
                web.get(_TOPIC + "/examinemessage", self.examine_message),
            ]
        )

    # ---- helpers ----

    def _name(self, request: web.Request, namespace_first: bool = False) -> TopicName:
        """The topic a path names, refused as Pulsar refuses it: 412 when the name is not valid
        (``namespace_first``: checking the namespace part first, as Pulsar's create paths do),
        404 "Namespace not found" when its namespace does not exist."""
        info = request.match_info
        if namespace_first:
            _namespace(request)
        try:
            name = TopicName.parse(
                f"persistent://{info['tenant']}/{info['namespace']}/{info['topic']}", strict=False
            )
        except InvalidTopicNameError:
            raise InvalidTopicNameError(_BAD_TOPIC) from None
        self.service.check_namespace(name)
        return name

    def _partitions(self, name: TopicName) -> list[TopicName]:
        """The partitions of a partitioned topic, or the topic itself."""
        count = self.service.partitions_of(name) if name.partition < 0 else 0
        return [name.partition_name(i) for i in range(count)] if count else [name]

    async def _existing(self, name: TopicName) -> Topic:
        if str(name) not in self.service.topics:
            count = self.service.partitions_of(name.base) if name.partition >= 0 else 0
            raise TopicNotFoundError(
                "Topic partitions were not yet created" if name.partition >= count > 0 else f"Topic {name} not found"
            )
        return await self.service.get_topic(name, create=False)

    async def _topics_of(self, name: TopicName) -> list[Topic]:
        parts = self._partitions(name)
        if parts == [name] and str(name) not in self.service.topics:
            raise TopicNotFoundError(f"Topic {name} not found")
        return [await self.service.get_topic(part) for part in parts]

    # ---- cluster and namespaces ----

    async def lookup(self, request: web.Request) -> web.Response:
        """Pulsar's HTTP lookup: the broker serving a topic (this one), in Pulsar's LookupData fields."""
        info = request.match_info
        if info["domain"] not in ("persistent", "non-persistent"):
            return _error(412, _BAD_TOPIC)
        try:
            name = TopicName.parse(
                f"{info['domain']}://{info['tenant']}/{info['namespace']}/{info['topic']}", strict=False
            )
        except InvalidTopicNameError:
            return _error(412, _BAD_TOPIC)
        self.service.check_namespace(name)
        service_url, web_url = self.service.service_url, self.service.web_service_url
        if self.service.config.tls:  # both ports serve TLS only: the Tls fields carry the URLs
            return web.json_response(
                {"brokerUrlTls": service_url, "httpUrlTls": web_url, "nativeUrl": service_url, "brokerUrlSsl": service_url}
            )
        return web.json_response({"brokerUrl": service_url, "httpUrl": web_url, "nativeUrl": service_url, "brokerUrlSsl": ""})

    async def clusters(self, request: web.Request) -> web.Response:
        return web.json_response([CLUSTER])

    # ---- tenants ----

    async def tenants(self, request: web.Request) -> web.Response:
        return web.json_response(sorted(self.service.tenant_names()))

    async def get_tenant(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        if not self.service.tenant_exists(tenant):
            return _error(404, "Tenant does not exist")
        return web.json_response(self.service.tenants.info(tenant) or {"adminRoles": [], "allowedClusters": [CLUSTER]})

    async def create_tenant(self, request: web.Request) -> web.Response:
        """Create a tenant from its TenantInfo, ``{"adminRoles": [...], "allowedClusters": ["standalone"]}``."""
        tenant = request.match_info["tenant"]
        if not is_valid_name_part(tenant):
            return _error(412, "Tenant name is not valid")
        text = await request.text()
        try:
            info = json.loads(text) if text.strip() else None
        except ValueError:
            return _error(400, "the request body must be a TenantInfo JSON object")
        if info is None:
            return _error(412, "TenantInfo is null")
        if not isinstance(info, dict):
            return _error(400, "the request body must be a TenantInfo JSON object")
        clusters = info.get("allowedClusters")
        if not clusters:
            return _error(412, "Clusters cannot be null")
        if not isinstance(clusters, list) or any(cluster != CLUSTER for cluster in clusters):
            return _error(412, "Clusters do not exist")
        if self.service.tenant_exists(tenant) or not await self.service.tenants.create(
            tenant, {"adminRoles": list(info.get("adminRoles") or []), "allowedClusters": clusters}
        ):
            return _error(409, "Tenant already exist")
        return web.Response(status=204)

    async def delete_tenant(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        if any(namespace.startswith(f"{tenant}/") for namespace in self.service.namespaces()):
            return _error(409, "The tenant still has active namespaces")
        if not await self.service.tenants.delete(tenant):
            return _error(404, "Tenant doesn't exist")
        return web.Response(status=204)

    # ---- namespaces ----

    async def namespaces(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        if not self.service.tenant_exists(tenant):
            return _error(404, "Tenant not found")
        return web.json_response(sorted(ns for ns in self.service.namespaces() if ns.startswith(tenant + "/")))

    async def get_namespace(self, request: web.Request) -> web.Response:
        """The namespace's policies: the fields Pulsar always gives, and those set (deduplication)."""
        namespace = _namespace(request)
        if not self.service.namespace_exists(namespace):
            return _error(404, "Namespace does not exist")
        return web.json_response(_namespace_policies(self.service.policies.namespace_policies(namespace)))

    async def delete_namespace(self, request: web.Request) -> web.Response:
        namespace = _namespace(request)
        if not self.service.namespace_exists(namespace):
            return _error(404, f"Namespace {namespace} does not exist.")
        if not self.service.namespace_is_empty(namespace):
            return _error(409, "Cannot delete non empty namespace")
        await self.service.policies.delete_namespace(namespace)
        return web.Response(status=204)

    async def create_namespace(self, request: web.Request) -> web.Response:
        namespace = _namespace(request)
        if not self.service.tenant_exists(namespace.partition("/")[0]):
            return _error(404, "Tenant does not exist")
        if self.service.namespace_exists(namespace) and namespace not in self.service.policies.namespaces():
            return _error(409, "Namespace already exists")  # made implicitly by a topic in it
        if not await self.service.policies.create_namespace(namespace):
            return _error(409, "Namespace already exists")
        return web.Response(status=204)

    # ---- deduplication policies: Pulsar answers an unset one with an empty 200 ----

    async def get_namespace_deduplication(self, request: web.Request) -> web.Response:
        namespace = _namespace(request)
        if not self.service.namespace_exists(namespace):
            return _error(404, "Namespace does not exist")
        return _policy_response(self.service.policies.namespace_policy(namespace, DEDUPLICATION))

    async def set_namespace_deduplication(self, request: web.Request) -> web.Response:
        """POST sets the policy (body ``true`` or ``false``), DELETE removes it."""
        namespace = _namespace(request)
        if not self.service.namespace_exists(namespace):
            return _error(404, "Namespace does not exist")
        value = await _flag_body(request) if request.method == "POST" else None
        if isinstance(value, web.Response):
            return value
        await self.service.policies.set_namespace_policy(namespace, DEDUPLICATION, value)
        self.service.apply_policies()
        return web.Response(status=204)

    async def get_topic_deduplication(self, request: web.Request) -> web.Response:
        """The topic's own policy, or with ``applied=true`` the one in force."""
        name = self._policy_topic(request)
        if isinstance(name, web.Response):
            return name
        if request.query.get("applied", "false").lower() == "true":
            return web.json_response(self.service.policies.deduplication(name))
        return _policy_response(self.service.policies.topic_policy(name, DEDUPLICATION))

    async def set_topic_deduplication(self, request: web.Request) -> web.Response:
        """POST sets the topic's policy (body ``true`` or ``false``), DELETE removes it."""
        name = self._policy_topic(request)
        if isinstance(name, web.Response):
            return name
        value = await _flag_body(request) if request.method == "POST" else None
        if isinstance(value, web.Response):
            return value
        await self.service.policies.set_topic_policy(name, DEDUPLICATION, value)
        self.service.apply_policies()
        return web.Response(status=204)

    def _policy_topic(self, request: web.Request) -> TopicName | web.Response:
        """The topic a topic-policy path names, or Pulsar's error: policies belong to whole topics."""
        name = self._name(request)
        if name.partition >= 0:
            return _error(412, "Not allowed to set/get topic policy for a partition")
        if not self.service.namespace_exists(name.namespace_name):
            return _error(404, "Namespace not found")
        if str(name) not in self.service.topics and not self.service.partitions_of(name):
            return _error(404, f"Topic {name} not found")
        return name

    async def list_topics(self, request: web.Request) -> web.Response:
        tenant, _, namespace = self._listed_namespace(request).partition("/")
        return web.json_response(self.service.list_topics(tenant, namespace))

    async def list_partitioned(self, request: web.Request) -> web.Response:
        tenant, _, namespace = self._listed_namespace(request).partition("/")
        return web.json_response(self.service.list_partitioned_topics(tenant, namespace))

    def _listed_namespace(self, request: web.Request) -> str:
        namespace = _namespace(request)
        if not self.service.namespace_exists(namespace):
            raise LookupError("Namespace does not exist")
        return namespace

    # ---- topics ----

    def _exists(self, name: TopicName) -> bool:
        """Whether ``name`` is a topic, a partition or a partitioned topic."""
        return str(name) in self.service.topics or bool(self.service.partitions_of(name))

    async def create_topic(self, request: web.Request) -> web.Response:
        name = self._name(request, namespace_first=True)
        if self._exists(name):
            return _error(409, "This topic already exists")
        count = self.service.partitions_of(name.base) if name.partition >= 0 else 0
        if name.partition >= count > 0:  # Pulsar's reason, "smaller" and all
            return _error(
                412,
                f'Can\'t create topic {name.local_name} with "-partition-" followed by a number smaller than '
                f"number of partition of partitioned topic {name.base.local_name}",
            )
        await self.service.get_topic(name)
        return web.Response(status=204)

    async def delete_topic(self, request: web.Request) -> web.Response:
        name = self._name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return _error(
                409,
                f"{name} is a partitioned topic, instead of calling delete topic, please call delete-partitioned-topic.",
            )
        await self.service.delete_topic(name, force=_query_flag(request, "force"))
        return web.Response(status=204)

    async def create_partitions(self, request: web.Request) -> web.Response:
        """PUT creates a partitioned topic, POST adds partitions to one; the body is the count."""
        creating = request.method == "PUT"
        name = self._name(request, namespace_first=creating)
        if creating and PARTITION_SUFFIX in name.local_name:
            return _error(412, "Partitioned Topic Name should not contain '-partition-'")
        text = await request.text()
        if not text.strip():
            return _error(400, "The request entity cannot be empty.")
        try:
            # As Pulsar's JSON reader: a number, or a string holding one; a fraction is cut.
            partitions = int(float(json.loads(text)))
        except (ValueError, TypeError, OverflowError):
            return _error(400, f"the request body must be the number of partitions, got {text[:50]!r}")
        if partitions <= 0:
            return _error(406, "Number of partitions should be more than 0")
        current = self.service.partitions_of(name)
        if creating and (current or str(name) in self.service.topics):
            return _error(409, "This topic already exists")
        if not creating:
            if not current:
                return _error(409, f"Topic {name} is not the partitioned topic.")
            if partitions < current:
                return _error(422, f"Desired partitions {partitions} can't be less than the current partitions {current}.")
        await self.service.create_partitioned_topic(name, partitions)
        return web.Response(status=204)

    async def get_partitions(self, request: web.Request) -> web.Response:
        name = self._name(request)
        if not self._exists(name):
            return _error(404, f"Topic {name} not found")
        return web.json_response({"partitions": self.service.partitions_of(name), "deleted": False})

    async def delete_partitioned(self, request: web.Request) -> web.Response:
        name = self._name(request)
        if not self.service.partitions_of(name) or name.partition >= 0:
            if str(name) in self.service.topics:
                return _error(
                    409,
                    f"{name} is a non-partitioned topic. Instead of calling delete-partitioned-topic please call delete.",
                )
            return _error(404, f"Topic {name} not found.")
        await self.service.delete_topic(name, force=_query_flag(request, "force"))
        return web.Response(status=204)

    # ---- stats ----

    async def stats(self, request: web.Request) -> web.Response:
        name = self._name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return _error(404, f"Topic {name} not found")  # Pulsar's answer: the partitions are the topics
        topic = await self._existing(name)
        return web.json_response(topic.stats())

    async def partitioned_stats(self, request: web.Request) -> web.Response:
        name = self._name(request)
        count = self.service.partitions_of(name)
        if not count:
            return _error(404, f"Partitioned Topic {name} not found")
        per_partition = request.query.get("perPartition", "true").lower() != "false"
        parts = {str(part): (await self.service.get_topic(part)).stats() for part in self._partitions(name)}
        return web.json_response(aggregate_stats(parts, count, per_partition))

    async def internal_stats(self, request: web.Request) -> web.Response:
        """Pulsar's internal stats (a subset): the ledger layout and each cursor's positions.

        As in Pulsar, the open ledger is listed with 0 entries; its count is ``currentLedgerEntries``.
        """
        name = self._name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return _error(404, f"Topic {name} not found")  # Pulsar's answer: ask one partition
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
        )

    # ---- subscriptions ----

    async def subscriptions(self, request: web.Request) -> web.Response:
        names: set[str] = set()
        for topic in await self._topics_of(self._name(request)):
            names.update(topic.subscriptions)
        return web.json_response(sorted(names))

    async def create_subscription(self, request: web.Request) -> web.Response:
        """Create a durable subscription at a message id (or ``earliest``/``latest``); as with
        Pulsar, a topic that does not exist yet is created with it."""
        sub_name = request.match_info["subscription"]
        body = await request.text()
        try:
            start = json.loads(body) if body.strip() else None
        except ValueError:
            return _error(400, f"the body must be a message id or \"earliest\"/\"latest\", got {body[:50]!r}")
        name = self._name(request)
        if not self._exists(name):
            await self.service.get_topic(name)
        created = False
        for topic in await self._topics_of(name):
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
            return _error(409, "Subscription already exists for topic")
        return web.Response(status=204)

    async def delete_subscription(self, request: web.Request) -> web.Response:
        sub_name = request.match_info["subscription"]
        force = _query_flag(request, "force")
        name = self._name(request)
        topics = await self._topics_of(name)
        found = [t for t in topics if sub_name in t.subscriptions]
        if not found:
            partitioned = len(topics) > 1 or topics[0].name != name
            return _error(404, "Subscription not found" if partitioned else _no_subscription(sub_name, name))
        busy = [t for t in found if t.subscriptions[sub_name].consumers]
        if busy and not force:
            return _error(412, "Subscription has active connected consumers")
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
        name = self._name(request)
        topics = await self._topics_of(name)
        found: list[Subscription] = [t.subscriptions[sub_name] for t in topics if sub_name in t.subscriptions]
        if not found:
            return _error(404, _no_subscription(sub_name, name))
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
        return self._entry_response(topic, ledger.read(entry_id, 1)[0])

    def _entry_response(self, topic: Topic, entry: StoredEntry) -> web.Response:
        index = topic.ledger.entry_index(entry.entry_id) if self.service.config.entry_index else None
        return entry_response(topic.ledger.ledger_id, entry, index)

    async def message_by_id(self, request: web.Request) -> web.Response:
        """Pulsar's get-message-by-id: one entry by its ledger and entry id, with the peek headers."""
        name = self._name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return _error(405, "GetMessageById is not allowed on partitioned-topic")
        topic = await self._existing(name)
        ledger = topic.ledger
        ledger_id, entry_id = int(request.match_info["ledger"]), int(request.match_info["entry"])
        found = ledger.read(entry_id, 1) if ledger_id == ledger.ledger_id and entry_id >= 0 else []
        if not found or found[0].entry_id != entry_id:  # a read past a hole returns the next entry
            return _error(404, "Message id not found")
        return self._entry_response(topic, found[0])

    async def examine_message(self, request: web.Request) -> web.Response:
        """Pulsar's examine-message: the n-th entry (``messagePosition``, from 1) counted from the
        newest (``initialPosition=latest``, the default) or the oldest (``earliest``) of the topic.

        As in Pulsar, a position below 1 means 1 and one past the oldest entry, counted from
        ``earliest``, gives the newest. Counted from ``latest`` past the oldest, Pulsar fails with
        500; this answers 412.
        """
        name = self._name(request)
        if self.service.partitions_of(name) and name.partition < 0:
            return _error(
                405,
                "Examine messages on a partitioned topic is not allowed, please try examine message on specific topic partition",
            )
        text = request.query.get("messagePosition", "1")
        try:
            position = max(int(text), 1)
        except ValueError:
            return _error(412, f"messagePosition must be an integer, got {text!r}")
        topic = await self._existing(name)
        last = topic.ledger.last_entry_id
        if last < 0:
            return _error(412, "Could not examine messages due to the total message is zero")
        if request.query.get("initialPosition", "latest") == "earliest":  # Pulsar compares case-sensitively
            entry_id = min(position - 1, last)
        else:
            entry_id = last - (position - 1)
            if entry_id < 0:
                return _error(412, f"messagePosition {position} is beyond the {last + 1} entries of topic {name}")
        return self._entry_response(topic, topic.ledger.read(entry_id, 1)[0])


def _namespace(request: web.Request) -> str:
    """``tenant/namespace`` from the path, checked as Pulsar checks names."""
    info = request.match_info
    for label in ("tenant", "namespace"):
        if not is_valid_name_part(info[label]):
            raise InvalidTopicNameError(_BAD_NAMESPACE)
    return f"{info['tenant']}/{info['namespace']}"


def _namespace_policies(policies: dict[str, Any]) -> dict[str, Any]:
    """Pulsar's Policies document for a namespace: its defaults on one standalone cluster, and
    the policies set (by Pulsar's field names)."""
    return {
        "auth_policies": {"namespace_auth": {}, "destination_auth": {}, "subscription_auth_roles": {}},
        "replication_clusters": [CLUSTER],
        "allowed_clusters": [],
        "bundles": {
            "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
            "numBundles": 4,
        },
        "backlog_quota_map": {},
        "deleted": False,
        "encryption_required": False,
        "subscription_auth_mode": "None",
        "schema_compatibility_strategy": "UNDEFINED",
        "is_allow_auto_update_schema": True,
        "schema_validation_enforced": False,
        "subscription_types_enabled": [],
        "properties": {},
        "migrated": False,
        **policies,
    }


def _no_subscription(subscription: str, topic: TopicName) -> str:
    """Pulsar's reason for a subscription a topic does not have."""
    return f"Subscription {subscription} not found for topic {topic}"


def _query_flag(request: web.Request, name: str) -> bool:
    """A boolean query parameter (``?force=true``), false when absent."""
    return request.query.get(name, "false").lower() == "true"


def _policy_response(value: Any) -> web.Response:
    return web.Response(status=200) if value is None else web.json_response(value)


async def _flag_body(request: web.Request) -> bool | web.Response:
    """The JSON ``true`` or ``false`` a policy POST carries, or a 400 answer."""
    text = await request.text()
    if not text.strip():
        return _error(400, "The request entity cannot be empty.")
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, bool):
        return _error(400, f"the request body must be true or false, got {text[:50]!r}")
    return value


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
