"""The admin REST paths of the cluster, its tenants and their namespaces (policies and topic
lists included), with Pulsar's statuses and reasons."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from airflow_pulsar.client.topic_name import is_valid_name_part

from .admin_authorization import Anyone, NamespacePolicy, OnNamespace, OnTenant, SuperuserOrTenantAdmin, requires
from .admin_resource import NAMESPACE_PATH, AdminResource, error, namespace_of, policy_response
from .authorization import NamespaceOperation
from .policies import DEDUPLICATION
from .tenants import CLUSTER

_TENANT = "/admin/v2/tenants/{tenant}"


class Tenants(AdminResource):
    """The one cluster and its tenants."""

    def routes(self) -> list[web.RouteDef]:
        """The cluster and tenant paths."""
        return [
            web.get("/admin/v2/clusters", self.clusters),
            web.get("/admin/v2/tenants", self.tenants),
            web.get(_TENANT, self.get_tenant),
            web.put(_TENANT, self.create_tenant),
            web.delete(_TENANT, self.delete_tenant),
        ]

    @requires(Anyone())
    async def clusters(self, request: web.Request) -> web.Response:
        """The cluster names: this standalone one."""
        return web.json_response([CLUSTER])

    @requires(SuperuserOrTenantAdmin("LIST_TENANTS"))
    async def tenants(self, request: web.Request) -> web.Response:
        """The tenant names, sorted."""
        return web.json_response(sorted(self.service.tenant_names()))

    @requires(SuperuserOrTenantAdmin("GET_TENANT"))
    async def get_tenant(self, request: web.Request) -> web.Response:
        """A tenant's TenantInfo."""
        tenant = request.match_info["tenant"]
        if not self.service.tenant_exists(tenant):
            return error(404, "Tenant does not exist")
        return web.json_response(self.service.tenants.info(tenant) or {"adminRoles": [], "allowedClusters": [CLUSTER]})

    @requires(SuperuserOrTenantAdmin("CREATE_TENANT"))
    async def create_tenant(self, request: web.Request) -> web.Response:
        """Create a tenant from its TenantInfo, ``{"adminRoles": [...], "allowedClusters": ["standalone"]}``."""
        tenant = request.match_info["tenant"]
        if not is_valid_name_part(tenant):
            return error(412, "Tenant name is not valid")
        text = await request.text()
        try:
            info = json.loads(text) if text.strip() else None
        except ValueError:
            return error(400, "the request body must be a TenantInfo JSON object")
        if info is None:
            return error(412, "TenantInfo is null")
        if not isinstance(info, dict):
            return error(400, "the request body must be a TenantInfo JSON object")
        clusters = info.get("allowedClusters")
        if not clusters:
            return error(412, "Clusters cannot be null")
        if not isinstance(clusters, list) or any(cluster != CLUSTER for cluster in clusters):
            return error(412, "Clusters do not exist")
        if self.service.tenant_exists(tenant) or not await self.service.tenants.create(
            tenant, {"adminRoles": list(info.get("adminRoles") or []), "allowedClusters": clusters}
        ):
            return error(409, "Tenant already exist")
        return web.Response(status=204)

    @requires(SuperuserOrTenantAdmin("DELETE_TENANT"))
    async def delete_tenant(self, request: web.Request) -> web.Response:
        """Delete a tenant that has no namespaces left."""
        tenant = request.match_info["tenant"]
        if any(namespace.startswith(f"{tenant}/") for namespace in self.service.namespaces()):
            return error(409, "The tenant still has active namespaces")
        if not await self.service.tenants.delete(tenant):
            return error(404, "Tenant doesn't exist")
        return web.Response(status=204)


class Namespaces(AdminResource):
    """Namespaces: their lifecycle, their deduplication policy, and the topics in them."""

    def routes(self) -> list[web.RouteDef]:
        """The namespace paths, and the namespace-wide topic lists."""
        return [
            web.get("/admin/v2/namespaces/{tenant}", self.namespaces),
            web.put(NAMESPACE_PATH, self.create_namespace),
            web.get(NAMESPACE_PATH, self.get_namespace),
            web.delete(NAMESPACE_PATH, self.delete_namespace),
            web.get(NAMESPACE_PATH + "/deduplication", self.get_deduplication),
            web.post(NAMESPACE_PATH + "/deduplication", self.set_deduplication),
            web.delete(NAMESPACE_PATH + "/deduplication", self.set_deduplication),
            web.get("/admin/v2/persistent/{tenant}/{namespace}", self.list_topics),
            web.get(NAMESPACE_PATH + "/topics", self.topics_of_namespace),
            web.get("/admin/v2/persistent/{tenant}/{namespace}/partitioned", self.list_partitioned),
        ]

    @requires(OnTenant("LIST_NAMESPACES"))
    async def namespaces(self, request: web.Request) -> web.Response:
        """A tenant's namespaces, sorted."""
        tenant = request.match_info["tenant"]
        if not self.service.tenant_exists(tenant):
            return error(404, "Tenant not found")
        return web.json_response(sorted(ns for ns in self.service.namespaces() if ns.startswith(tenant + "/")))

    @requires(NamespacePolicy("ALL", write=False))
    async def get_namespace(self, request: web.Request) -> web.Response:
        """The namespace's policies: the fields Pulsar always gives, and those set (deduplication)."""
        namespace = namespace_of(request)
        if not self.service.namespace_exists(namespace):
            return error(404, "Namespace does not exist")
        return web.json_response(_namespace_policies(self.service.policies.namespace_policies(namespace)))

    @requires(OnTenant("DELETE_NAMESPACE"))
    async def delete_namespace(self, request: web.Request) -> web.Response:
        """Delete an empty namespace."""
        namespace = namespace_of(request)
        if not self.service.namespace_exists(namespace):
            return error(404, f"Namespace {namespace} does not exist.")
        if not self.service.namespace_is_empty(namespace):
            return error(409, "Cannot delete non empty namespace")
        await self.service.policies.delete_namespace(namespace)
        return web.Response(status=204)

    @requires(OnTenant("CREATE_NAMESPACE"))
    async def create_namespace(self, request: web.Request) -> web.Response:
        """Create a namespace in an existing tenant."""
        namespace = namespace_of(request)
        if not self.service.tenant_exists(namespace.partition("/")[0]):
            return error(404, "Tenant does not exist")
        if self.service.namespace_exists(namespace) and namespace not in self.service.policies.namespaces():
            return error(409, "Namespace already exists")  # made implicitly by a topic in it
        if not await self.service.policies.create_namespace(namespace):
            return error(409, "Namespace already exists")
        return web.Response(status=204)

    @requires(NamespacePolicy("DEDUPLICATION", write=False))
    async def get_deduplication(self, request: web.Request) -> web.Response:
        """The namespace's deduplication policy; an empty 200 when unset."""
        namespace = namespace_of(request)
        if not self.service.namespace_exists(namespace):
            return error(404, "Namespace does not exist")
        return policy_response(self.service.policies.namespace_policy(namespace, DEDUPLICATION))

    @requires(NamespacePolicy("DEDUPLICATION", write=True))
    async def set_deduplication(self, request: web.Request) -> web.Response:
        """POST sets the policy (body ``true`` or ``false``), DELETE removes it."""
        namespace = namespace_of(request)
        if not self.service.namespace_exists(namespace):
            return error(404, "Namespace does not exist")
        policies = self.service.policies
        return await self.update_flag_policy(
            request, lambda value: policies.set_namespace_policy(namespace, DEDUPLICATION, value)
        )

    @requires(OnNamespace(NamespaceOperation.GET_TOPICS))
    async def list_topics(self, request: web.Request) -> web.Response:
        """The namespace's topics, partitions listed one by one."""
        tenant, _, namespace = self._listed_namespace(request).partition("/")
        return web.json_response(self.service.list_topics(tenant, namespace))

    @requires(OnNamespace(NamespaceOperation.GET_TOPICS))
    async def topics_of_namespace(self, request: web.Request) -> web.Response:
        """The namespace's topics of ``?mode=`` (PERSISTENT, the default, NON_PERSISTENT or ALL), as a
        client's HTTP lookup lists them for a pattern subscription; there are no non-persistent ones."""
        mode = request.query.get("mode", "PERSISTENT")
        if mode not in ("PERSISTENT", "NON_PERSISTENT", "ALL"):
            return error(404, f"unknown mode {mode!r}")
        tenant, _, namespace = self._listed_namespace(request).partition("/")
        return web.json_response([] if mode == "NON_PERSISTENT" else self.service.list_topics(tenant, namespace))

    @requires(OnNamespace(NamespaceOperation.GET_TOPICS))
    async def list_partitioned(self, request: web.Request) -> web.Response:
        """The namespace's partitioned topics."""
        tenant, _, namespace = self._listed_namespace(request).partition("/")
        return web.json_response(self.service.list_partitioned_topics(tenant, namespace))

    def _listed_namespace(self, request: web.Request) -> str:
        namespace = namespace_of(request)
        if not self.service.namespace_exists(namespace):
            raise LookupError("Namespace does not exist")
        return namespace


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
