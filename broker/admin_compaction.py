"""The admin REST paths of topic compaction: trigger a run, and read its status (Pulsar's
``LongRunningProcessStatus``), on a topic or, for the trigger, every partition of one; and the
namespace's ``compactionThreshold``, past which the broker compacts a topic by itself."""

from __future__ import annotations

import json

from aiohttp import web

from .admin_authorization import NamespacePolicy, TopicPolicy, requires
from .admin_resource import NAMESPACE_PATH, TOPIC_PATH, AdminResource, error, namespace_of, policy_response
from .policies import COMPACTION_THRESHOLD


class Compactions(AdminResource):
    """``/admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction`` and a namespace's ``compactionThreshold``."""

    def routes(self) -> list[web.RouteDef]:
        """The compaction paths."""
        threshold = NAMESPACE_PATH + "/compactionThreshold"
        return [
            web.put(TOPIC_PATH + "/compaction", self.trigger),
            web.get(TOPIC_PATH + "/compaction", self.status),
            web.get(threshold, self.get_threshold),
            web.put(threshold, self.set_threshold),
            web.delete(threshold, self.set_threshold),
        ]

    @requires(TopicPolicy("COMPACTION", write=True))
    async def trigger(self, request: web.Request) -> web.Response:
        """Start compacting the topic (each partition of a partitioned one); 409 while a run is under way."""
        topics = await self.topics_of(self.topic_name(request))
        if any(topic.compaction.running for topic in topics):
            return error(409, "Compaction already in progress")
        for topic in topics:
            topic.compaction.trigger()
        return web.Response(status=204)

    @requires(TopicPolicy("COMPACTION", write=False))
    async def status(self, request: web.Request) -> web.Response:
        """The state of the topic's latest compaction run, and the error of a failed one."""
        topic = await self.existing(self.topic_name(request))
        return web.json_response(topic.compaction.status())

    @requires(NamespacePolicy("COMPACTION", write=False))
    async def get_threshold(self, request: web.Request) -> web.Response:
        """The namespace's threshold in bytes; an empty 200 when unset."""
        namespace = self._existing_namespace(request)
        return policy_response(self.service.policies.namespace_policy(namespace, COMPACTION_THRESHOLD))

    @requires(NamespacePolicy("COMPACTION", write=True))
    async def set_threshold(self, request: web.Request) -> web.Response:
        """PUT sets the threshold (body: bytes, 0 turns automatic compaction off), DELETE removes it."""
        namespace = self._existing_namespace(request)
        value = None
        if request.method == "PUT":
            try:
                value = json.loads(await request.text())
            except ValueError:
                value = None
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                return error(412, "compactionThreshold must be 0 or more")
        await self.service.policies.set_namespace_policy(namespace, COMPACTION_THRESHOLD, value)
        return web.Response(status=204)

    def _existing_namespace(self, request: web.Request) -> str:
        namespace = namespace_of(request)
        if not self.service.namespace_exists(namespace):
            raise LookupError("Namespace does not exist")
        return namespace
