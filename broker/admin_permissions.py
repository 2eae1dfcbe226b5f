"""The admin REST paths of grants, with Pulsar's paths, bodies, statuses and reasons.

On a namespace: ``GET .../permissions`` (each role's actions), ``POST``/``DELETE
.../permissions/{role}`` (the body a JSON list of actions), ``GET .../permissions/subscription``
(each subscription's roles), ``POST .../permissions/subscription/{subscription}`` (the body a JSON
list of roles) and ``DELETE .../permissions/{subscription}/{role}``. On a topic, which has to
exist: ``GET .../permissions`` (its namespace's grants joined with its own) and ``POST``/``DELETE
.../permissions/{role}``; revoking on a partitioned topic revokes on its partitions too.

As Pulsar's JSON reader, a grant ignores action names it does not know; grants are kept, and
listed, whether or not ``--authorization`` enforces them.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from airflow_pulsar.client.topic_name import TopicName

from .admin_authorization import OnNamespace, TenantAdministration, requires
from .admin_resource import NAMESPACE_PATH, TOPIC_PATH, AdminResource, error, namespace_of
from .authorization import NamespaceOperation, TenantNotFoundError
from .permissions import AuthAction
from .service import NamespaceNotFoundError

_NAMESPACE_PERMISSIONS = NAMESPACE_PATH + "/permissions"
_TOPIC_PERMISSIONS = TOPIC_PATH + "/permissions"
# JSON null and no body alike: Pulsar's reasons when the list is missing.
_NO_ACTIONS = "Actions should not be null"
_NO_ROLES = "Roles should not be null"


async def _json_list(request: web.Request) -> list[Any] | None | web.Response:
    """The request's JSON list of names; None when there is no body (or it is null); a 400 answer
    when it is something else, as Pulsar's JSON reader refuses it."""
    text = await request.text()
    try:
        value = json.loads(text) if text.strip() else None
    except ValueError:
        value = text
    if value is not None and not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
        return error(400, f"the body must be a JSON list of names, got {text[:50]!r}")
    return value


def _actions(names: list[str]) -> list[AuthAction]:
    """The actions named, those Pulsar does not know left out (as its JSON reader drops them)."""
    return [action for action in AuthAction if action.value in names]


class Permissions(AdminResource):
    """Grants on namespaces, topics and subscriptions."""

    def routes(self) -> list[web.RouteDef]:
        """The permission paths of namespaces and topics."""
        return [
            web.get(_NAMESPACE_PERMISSIONS, self.namespace_permissions),
            web.get(_NAMESPACE_PERMISSIONS + "/subscription", self.subscription_permissions),
            web.post(_NAMESPACE_PERMISSIONS + "/subscription/{subscription}", self.grant_subscription),
            web.post(_NAMESPACE_PERMISSIONS + "/{role}", self.grant_namespace),
            web.delete(_NAMESPACE_PERMISSIONS + "/{role}", self.revoke_namespace),
            web.delete(_NAMESPACE_PERMISSIONS + "/{subscription}/{role}", self.revoke_subscription),
            web.get(_TOPIC_PERMISSIONS, self.topic_permissions),
            web.post(_TOPIC_PERMISSIONS + "/{role}", self.grant_topic),
            web.delete(_TOPIC_PERMISSIONS + "/{role}", self.revoke_topic),
        ]

    def _existing_namespace(self, request: web.Request) -> str:
        namespace = namespace_of(request)
        if not self.service.namespace_exists(namespace):
            raise LookupError("Namespace does not exist")
        return namespace

    # ---- namespaces ----

    @requires(OnNamespace(NamespaceOperation.GET_PERMISSION))
    async def namespace_permissions(self, request: web.Request) -> web.Response:
        """Each role's actions on the whole namespace."""
        return web.json_response(self.service.permissions.namespace_grants(self._existing_namespace(request)))

    @requires(OnNamespace(NamespaceOperation.GRANT_PERMISSION))
    async def grant_namespace(self, request: web.Request) -> web.Response:
        """Set a role's actions on the whole namespace (the body: a JSON list of actions)."""
        namespace = namespace_of(request)
        names = await _json_list(request)
        if isinstance(names, web.Response):
            return names
        if names is None:
            return error(400, _NO_ACTIONS)
        if not self.service.namespace_exists(namespace):
            return error(404, "Topic's namespace does not exist")  # Pulsar's reason, "Topic's" and all
        await self.service.permissions.grant_namespace(namespace, request.match_info["role"], _actions(names))
        return web.Response(status=204)

    @requires(OnNamespace(NamespaceOperation.REVOKE_PERMISSION))
    async def revoke_namespace(self, request: web.Request) -> web.Response:
        """Take away a role's namespace-wide actions (none granted: nothing to do)."""
        namespace = namespace_of(request)
        if not self.service.namespace_exists(namespace):
            return error(404, "")  # Pulsar answers this one without a reason
        await self.service.permissions.revoke_namespace(namespace, request.match_info["role"])
        return web.Response(status=204)

    # ---- subscriptions ----

    @requires(OnNamespace(NamespaceOperation.GET_PERMISSION))
    async def subscription_permissions(self, request: web.Request) -> web.Response:
        """The roles allowed on each subscription that has a list."""
        return web.json_response(self.service.permissions.subscription_roles(self._existing_namespace(request)))

    @requires(OnNamespace(NamespaceOperation.GRANT_PERMISSION))
    async def grant_subscription(self, request: web.Request) -> web.Response:
        """Set the roles allowed to consume a subscription in this namespace (the body: a JSON list of roles)."""
        roles = await _json_list(request)
        if isinstance(roles, web.Response):
            return roles
        if roles is None:
            return error(400, _NO_ROLES)
        namespace = self._existing_namespace(request)
        await self.service.permissions.grant_subscription(namespace, request.match_info["subscription"], roles)
        return web.Response(status=204)

    @requires(OnNamespace(NamespaceOperation.REVOKE_PERMISSION))
    async def revoke_subscription(self, request: web.Request) -> web.Response:
        """Take a role off a subscription's list; a subscription without a list is Pulsar's 500."""
        namespace = self._existing_namespace(request)
        subscription = request.match_info["subscription"]
        if not await self.service.permissions.revoke_subscription(namespace, subscription, request.match_info["role"]):
            return error(500, f"couldn't find subscription: {subscription} has no roles granted in namespace {namespace}")
        return web.Response(status=204)

    # ---- topics ----

    @requires(TenantAdministration())
    async def topic_permissions(self, request: web.Request) -> web.Response:
        """Each role's actions on a topic: its namespace's grants joined with the topic's own."""
        name = self._existing_topic(request)
        return web.json_response(self.service.permissions.topic_grants(name))

    @requires(TenantAdministration())
    async def grant_topic(self, request: web.Request) -> web.Response:
        """Set a role's actions on a topic (the body: a JSON list of actions)."""
        name = self._existing_topic(request)
        names = await _json_list(request)
        if isinstance(names, web.Response):
            return names
        await self.service.permissions.grant_topic(name, request.match_info["role"], _actions(names or []))
        return web.Response(status=204)

    @requires(TenantAdministration())
    async def revoke_topic(self, request: web.Request) -> web.Response:
        """Take away a role's grants on a topic (and, for a partitioned topic, on its partitions)."""
        name = self._existing_topic(request)
        await self.service.permissions.revoke_topic(name, request.match_info["role"])
        return web.Response(status=204)

    def _existing_topic(self, request: web.Request) -> TopicName:
        """The topic a path names, which has to exist (a topic, a partition or a partitioned topic);
        as Pulsar, a tenant that does not exist is named first, and a missing namespace is a missing topic."""
        if not self.service.tenant_exists(request.match_info["tenant"]):
            raise TenantNotFoundError()
        try:
            name = self.topic_name(request)
        except NamespaceNotFoundError:
            info = request.match_info
            raise LookupError(f"Topic persistent://{info['tenant']}/{info['namespace']}/{info['topic']} not found") from None
        if not self.exists(name):
            raise LookupError(f"Topic {name} not found")
        return name
