"""The admin REST paths of non-persistent topics (``/admin/v2/non-persistent/...``): the
namespace's lists, partitioned topics, and stats, with Pulsar's statuses and field names."""

from __future__ import annotations

from aiohttp import web

from .admin_authorization import OnNamespace, OnTopic, requires
from .admin_resource import AdminResource, error
from .admin_topics import PersistentTopics, aggregate_stats
from .authorization import NamespaceOperation, TopicOperation

# The domain is a path variable that matches one value, so that names are read (and
# authorized) in it.
_NAMESPACE_PATH = "/admin/v2/{domain:non-persistent}/{tenant}/{namespace}"
_TOPIC_PATH = _NAMESPACE_PATH + "/{topic}"


class NonPersistentTopics(AdminResource):
    """Non-persistent topics: those loaded, partitioned ones, and their stats."""

    def routes(self) -> list[web.RouteDef]:
        """The non-persistent topic paths."""
        partitions = PersistentTopics(self.service)  # partitioned metadata is kept alike for both domains
        return [
            web.get(_NAMESPACE_PATH, self.list_topics),
            web.get(_NAMESPACE_PATH + "/partitioned", self.list_partitioned),
            web.put(_TOPIC_PATH + "/partitions", partitions.create_partitions),
            web.post(_TOPIC_PATH + "/partitions", partitions.create_partitions),
            web.get(_TOPIC_PATH + "/partitions", self.get_partitions),
            web.get(_TOPIC_PATH + "/stats", self.stats),
            web.get(_TOPIC_PATH + "/partitioned-stats", self.partitioned_stats),
        ]

    @requires(OnNamespace(NamespaceOperation.GET_TOPICS))
    async def list_topics(self, request: web.Request) -> web.Response:
        """The namespace's non-persistent topics that clients have used (as Pulsar lists those
        loaded), partitions one by one."""
        tenant, namespace = self._namespace(request)
        return web.json_response(self.service.list_non_persistent_topics(tenant, namespace))

    @requires(OnNamespace(NamespaceOperation.GET_TOPICS))
    async def list_partitioned(self, request: web.Request) -> web.Response:
        """The namespace's partitioned non-persistent topics."""
        tenant, namespace = self._namespace(request)
        return web.json_response(self.service.list_partitioned_topics(tenant, namespace, "non-persistent"))

    def _namespace(self, request: web.Request) -> tuple[str, str]:
        info = request.match_info
        if not self.service.namespace_exists(f"{info['tenant']}/{info['namespace']}"):
            raise LookupError("Namespace does not exist")
        return info["tenant"], info["namespace"]

    @requires(OnTopic(TopicOperation.LOOKUP))
    async def get_partitions(self, request: web.Request) -> web.Response:
        """A topic's partitioned metadata: 0 partitions when it is not partitioned."""
        name = self.topic_name(request)
        return web.json_response({"partitions": self.service.partitions_of(name), "deleted": False})

    @requires(OnTopic(TopicOperation.GET_STATS))
    async def stats(self, request: web.Request) -> web.Response:
        """Pulsar's stats of one non-persistent topic or partition that is loaded."""
        name = self.topic_name(request)
        topic = self.service.non_persistent.get(str(name))
        if topic is None:
            return error(404, "Topic not found")
        return web.json_response(topic.stats())

    @requires(OnTopic(TopicOperation.GET_STATS))
    async def partitioned_stats(self, request: web.Request) -> web.Response:
        """Pulsar's partitioned-stats of a non-persistent topic: the sums, and each partition's own."""
        name = self.topic_name(request)
        count = self.service.partitions_of(name)
        if not count:
            return error(404, f"Partitioned Topic {name} not found")
        per_partition = request.query.get("perPartition", "true").lower() != "false"
        parts = {str(part): (await self.service.open_topic(part)).stats() for part in self.partitions(name)}
        return web.json_response(aggregate_stats(parts, count, per_partition))
