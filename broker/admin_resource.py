"""What the admin REST resources share: reading names off a path as Pulsar does, Pulsar's error
document, and the topics a name stands for."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from airflow_pulsar.client.topic_name import InvalidTopicNameError, TopicName, is_valid_name_part

from .service import BrokerService, TopicNotFoundError
from .topic import Topic

TOPIC_PATH = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
NAMESPACE_PATH = "/admin/v2/namespaces/{tenant}/{namespace}"
# Pulsar's reasons for names it cannot parse.
BAD_TOPIC = "Topic name is not valid"
_BAD_NAMESPACE = "Namespace name is not valid"


def error(status: int, reason: str) -> web.Response:
    """Pulsar's error answer: the status and ``{"reason": ...}``."""
    return web.json_response({"reason": reason}, status=status)


def namespace_of(request: web.Request) -> str:
    """``tenant/namespace`` from the path, checked as Pulsar checks names."""
    info = request.match_info
    for label in ("tenant", "namespace"):
        if not is_valid_name_part(info[label]):
            raise InvalidTopicNameError(_BAD_NAMESPACE)
    return f"{info['tenant']}/{info['namespace']}"


def query_flag(request: web.Request, name: str) -> bool:
    """A boolean query parameter (``?force=true``), false when absent."""
    return request.query.get(name, "false").lower() == "true"


def policy_response(value: Any) -> web.Response:
    """A policy's value; Pulsar answers an unset one with an empty 200."""
    return web.Response(status=200) if value is None else web.json_response(value)


async def _flag_body(request: web.Request) -> bool | web.Response:
    """The JSON ``true`` or ``false`` a policy POST carries, or a 400 answer."""
    text = await request.text()
    if not text.strip():
        return error(400, "The request entity cannot be empty.")
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, bool):
        return error(400, f"the request body must be true or false, got {text[:50]!r}")
    return value


class AdminResource(ABC):
    """A group of admin paths served from one BrokerService, as Pulsar's ``AdminResource``."""

    def __init__(self, service: BrokerService):
        self.service = service

    @abstractmethod
    def routes(self) -> list[web.RouteDef]:
        """The paths this resource serves, in the order they are matched."""

    async def update_flag_policy(
        self, request: web.Request, save: Callable[[bool | None], Awaitable[None]]
    ) -> web.Response:
        """POST sets a boolean policy (body ``true`` or ``false``), DELETE removes it (``save``
        gets None); the topics apply it at once."""
        value = await _flag_body(request) if request.method == "POST" else None
        if isinstance(value, web.Response):
            return value
        await save(value)
        self.service.apply_policies()
        return web.Response(status=204)

    def topic_name(self, request: web.Request, namespace_first: bool = False) -> TopicName:
        """The topic a path names, refused as Pulsar refuses it: 412 when the name is not valid
        (``namespace_first``: checking the namespace part first, as Pulsar's create paths do),
        404 "Namespace not found" when its namespace does not exist."""
        info = request.match_info
        if namespace_first:
            namespace_of(request)
        try:
            domain = info.get("domain", "persistent")  # only the non-persistent paths name it
            name = TopicName.parse(f"{domain}://{info['tenant']}/{info['namespace']}/{info['topic']}", strict=False)
        except InvalidTopicNameError:
            raise InvalidTopicNameError(BAD_TOPIC) from None
        self.service.check_namespace(name)
        return name

    def exists(self, name: TopicName) -> bool:
        """Whether ``name`` is a topic, a partition or a partitioned topic."""
        return str(name) in self.service.topics or bool(self.service.partitions_of(name))

    def partitions(self, name: TopicName) -> list[TopicName]:
        """The partitions of a partitioned topic, or the topic itself."""
        count = self.service.partitions_of(name) if name.partition < 0 else 0
        return [name.partition_name(i) for i in range(count)] if count else [name]

    async def existing(self, name: TopicName) -> Topic:
        """The topic (or partition) ``name``, which has to exist already."""
        if str(name) not in self.service.topics:
            count = self.service.partitions_of(name.base) if name.partition >= 0 else 0
            raise TopicNotFoundError(
                "Topic partitions were not yet created" if name.partition >= count > 0 else f"Topic {name} not found"
            )
        return await self.service.get_topic(name, create=False)

    async def topics_of(self, name: TopicName) -> list[Topic]:
        """The topics ``name`` stands for: each partition of a partitioned topic, or the topic itself."""
        parts = self.partitions(name)
        if parts == [name] and str(name) not in self.service.topics:
            raise TopicNotFoundError(f"Topic {name} not found")
        return [await self.service.get_topic(part) for part in parts]

    def policy_topic(self, request: web.Request) -> TopicName | web.Response:
        """The topic a topic-policy path names, or Pulsar's error: policies belong to whole topics."""
        name = self.topic_name(request)
        if name.partition >= 0:
            return error(412, "Not allowed to set/get topic policy for a partition")
        if not self.service.namespace_exists(name.namespace_name):
            return error(404, "Namespace not found")
        if str(name) not in self.service.topics and not self.service.partitions_of(name):
            return error(404, f"Topic {name} not found")
        return name
