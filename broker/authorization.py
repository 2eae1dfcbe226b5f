"""The broker's authorization: who may do what, decided as Pulsar's PulsarAuthorizationProvider does.

With ``--authorization`` every request is checked against the role its credentials authenticated.
A superuser (``--superuser-roles``) may do anything, and an admin of a tenant (its TenantInfo's
``adminRoles``) anything within the tenant. Other roles may do what grants allow them:

* on a topic, LOOKUP (and reading its stats, metadata and schema) needs produce or consume,
  PRODUCE needs produce, and CONSUME, SUBSCRIBE, PEEK_MESSAGES, SKIP, RESET_CURSOR,
  EXPIRE_MESSAGES, UNSUBSCRIBE and GET_SUBSCRIPTIONS need consume, and, when the request names a
  subscription that has a list of roles, to be on that list;
* in a namespace, listing its topics needs produce or consume granted on the whole namespace;
* creating and deleting topics and namespaces, policies, and grants are for tenant admins.

A refusal says which role lacked what on which resource.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from airflow_pulsar.client.topic_name import TopicName

from .permissions import AuthAction, Permissions
from .tenants import Tenants

__all__ = ["Authorizer", "NamespaceOperation", "Refusal", "TenantNotFoundError", "TopicOperation"]


class TopicOperation(Enum):
    """What a request does to a topic (Pulsar's TopicOperation, the ones this broker serves)."""

    LOOKUP = "LOOKUP"
    GET_STATS = "GET_STATS"
    GET_METADATA = "GET_METADATA"
    PRODUCE = "PRODUCE"
    CONSUME = "CONSUME"
    SUBSCRIBE = "SUBSCRIBE"
    UNSUBSCRIBE = "UNSUBSCRIBE"
    GET_SUBSCRIPTIONS = "GET_SUBSCRIPTIONS"
    SKIP = "SKIP"
    PEEK_MESSAGES = "PEEK_MESSAGES"
    RESET_CURSOR = "RESET_CURSOR"
    EXPIRE_MESSAGES = "EXPIRE_MESSAGES"
    GET_BACKLOG_SIZE = "GET_BACKLOG_SIZE"


class NamespaceOperation(Enum):
    """What a request does to a namespace (Pulsar's NamespaceOperation, the ones served here)."""

    GET_TOPICS = "GET_TOPICS"
    CREATE_TOPIC = "CREATE_TOPIC"
    DELETE_TOPIC = "DELETE_TOPIC"
    GRANT_PERMISSION = "GRANT_PERMISSION"
    GET_PERMISSION = "GET_PERMISSION"
    REVOKE_PERMISSION = "REVOKE_PERMISSION"


# The topic operations a role's grants can allow, by the actions that allow them (any one of them).
_LOOKING = (AuthAction.produce, AuthAction.consume)
_TOPIC_GRANTS: dict[TopicOperation, tuple[AuthAction, ...]] = {
    TopicOperation.LOOKUP: _LOOKING,
    TopicOperation.GET_STATS: _LOOKING,
    TopicOperation.GET_METADATA: _LOOKING,
    TopicOperation.PRODUCE: (AuthAction.produce,),
    **{
        operation: (AuthAction.consume,)
        for operation in (
            TopicOperation.CONSUME,
            TopicOperation.SUBSCRIBE,
            TopicOperation.UNSUBSCRIBE,
            TopicOperation.GET_SUBSCRIPTIONS,
            TopicOperation.SKIP,
            TopicOperation.PEEK_MESSAGES,
            TopicOperation.RESET_CURSOR,
            TopicOperation.EXPIRE_MESSAGES,
            TopicOperation.GET_BACKLOG_SIZE,
        )
    },
}
# Lookups check consume without the subscription (there is none), as Pulsar's canLookup does.
_SUBSCRIPTION_BLIND = (TopicOperation.LOOKUP, TopicOperation.GET_STATS, TopicOperation.GET_METADATA)


class TenantNotFoundError(LookupError):
    """A role that is not a superuser asked about a tenant that does not exist (Pulsar answers 404)."""

    def __init__(self) -> None:
        super().__init__("Tenant does not exist")


@dataclass(frozen=True)
class Refusal:
    """Why a role may not do something: the role, what it lacks, and on what."""

    role: str
    lacks: str
    resource: str

    def __str__(self) -> str:
        return f"role '{self.role}' {self.lacks} {self.resource}"


class Authorizer:
    """Decides requests from the superuser roles, the tenants' admin roles and the grants."""

    def __init__(self, superusers: frozenset[str], tenants: Tenants, permissions: Permissions, tenant_exists: Callable[[str], bool]):
        self.superusers = superusers
        self._tenants = tenants
        self._permissions = permissions
        self._tenant_exists = tenant_exists

    def is_superuser(self, role: str) -> bool:
        """Whether ``role`` is one of the superuser roles."""
        return role in self.superusers

    def check_tenant(self, tenant: str) -> None:
        """Raise TenantNotFoundError unless ``tenant`` exists."""
        if not self._tenant_exists(tenant):
            raise TenantNotFoundError()

    def administers(self, role: str, tenant: str) -> bool:
        """Whether ``role`` is a superuser or an admin of ``tenant``; TenantNotFoundError when a
        role that is no superuser names a tenant that does not exist."""
        if self.is_superuser(role):
            return True
        self.check_tenant(tenant)
        info = self._tenants.info(tenant) or {}
        return role in (info.get("adminRoles") or ())

    def tenant_refusal(self, role: str, tenant: str) -> Refusal | None:
        """Why ``role`` may not administer ``tenant``; None when it may."""
        if self.administers(role, tenant):
            return None
        return Refusal(role, "is neither a superuser nor an admin of", f"tenant '{tenant}'")

    def superuser_refusal(self, role: str) -> Refusal | None:
        """Why ``role`` may not do what only superusers may; None when it may."""
        return None if self.is_superuser(role) else Refusal(role, "is not a superuser, as needed on", "this cluster")

    def topic_refusal(
        self, role: str, topic: TopicName, operation: TopicOperation, subscription: str | None = None
    ) -> Refusal | None:
        """Why ``role`` may not do ``operation`` on ``topic`` (with ``subscription``, when the
        request names one); None when it may."""
        if self.administers(role, topic.tenant):
            return None
        if subscription and operation not in _SUBSCRIPTION_BLIND:
            if not self._permissions.subscription_admits(role, topic.namespace_name, subscription):
                return Refusal(
                    role, "is not among the roles granted", f"subscription '{subscription}' of namespace {topic.namespace_name}"
                )
        actions = _TOPIC_GRANTS[operation]
        if any(self._permissions.allows(role, topic, action) for action in actions):
            return None
        return Refusal(role, f"has no {' or '.join(action.value for action in actions)} permission on", f"topic {topic}")

    def namespace_refusal(self, role: str, namespace: str, operation: NamespaceOperation) -> Refusal | None:
        """Why ``role`` may not do ``operation`` in ``namespace`` (``tenant/namespace``); None when it may."""
        tenant = namespace.partition("/")[0]
        if self.administers(role, tenant):
            return None
        if operation is NamespaceOperation.GET_TOPICS:
            if any(self._permissions.allows_in_namespace(role, namespace, action) for action in _LOOKING):
                return None
            return Refusal(role, "has no produce or consume permission on", f"namespace {namespace}")
        return Refusal(role, "is neither a superuser nor an admin of", f"tenant '{tenant}'")
