"""The admin REST paths of topic compaction: trigger a run, and read its status (Pulsar's
``LongRunningProcessStatus``), on a topic or, for the trigger, every partition of one."""

from __future__ import annotations

from aiohttp import web

from .admin_authorization import TopicPolicy, requires
from .admin_resource import TOPIC_PATH, AdminResource, error


class Compactions(AdminResource):
    """``PUT`` and ``GET`` of ``/admin/v2/persistent/{tenant}/{namespace}/{topic}/compaction``."""

    def routes(self) -> list[web.RouteDef]:
        """The compaction paths."""
        return [web.put(TOPIC_PATH + "/compaction", self.trigger), web.get(TOPIC_PATH + "/compaction", self.status)]

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
