"""Grants, kept as Pulsar keeps them: in each namespace's policies, under ``auth_policies``.

``namespace_auth`` maps a role to the actions it may take on every topic of the namespace,
``destination_auth`` a topic to such a map of its own, and ``subscription_auth_roles`` a
subscription name to the roles allowed to consume it (none listed: any role with consume
permission). They are stored with the namespace's other policies, so they survive a restart and
go with the namespace when it is deleted; a topic's grants go with the topic.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

from airflow_pulsar.client.topic_name import TopicName

from .policies import Policies

__all__ = ["AUTH_POLICIES", "AuthAction", "Permissions"]

# Pulsar's field name in a namespace's Policies, and those of its AuthPolicies.
AUTH_POLICIES = "auth_policies"
_NAMESPACE = "namespace_auth"
_TOPICS = "destination_auth"
_SUBSCRIPTIONS = "subscription_auth_roles"


class AuthAction(str, Enum):
    """What a grant allows (Pulsar's AuthAction): the value is the name on the wire and in JSON."""

    produce = "produce"
    consume = "consume"
    functions = "functions"
    sources = "sources"
    sinks = "sinks"
    packages = "packages"


def _names(actions: Iterable[AuthAction]) -> list[str]:
    chosen = set(actions)
    return [action.value for action in AuthAction if action in chosen]


class Permissions:
    """Reads and changes the grants in the namespaces' policies."""

    def __init__(self, policies: Policies):
        self._policies = policies

    def _auth(self, namespace: str) -> dict[str, Any]:
        stored = self._policies.namespace_policy(namespace, AUTH_POLICIES) or {}
        return {
            _NAMESPACE: dict(stored.get(_NAMESPACE, {})),
            _TOPICS: {topic: dict(roles) for topic, roles in stored.get(_TOPICS, {}).items()},
            _SUBSCRIPTIONS: dict(stored.get(_SUBSCRIPTIONS, {})),
        }

    async def _save(self, namespace: str, auth: dict[str, Any]) -> None:
        await self._policies.set_namespace_policy(namespace, AUTH_POLICIES, auth)

    # ---- reading ----

    def namespace_grants(self, namespace: str) -> dict[str, list[str]]:
        """Each role's actions on every topic of ``namespace``."""
        return self._auth(namespace)[_NAMESPACE]

    def topic_grants(self, topic: TopicName) -> dict[str, list[str]]:
        """Each role's actions on ``topic``: its namespace's grants joined with the topic's own, as
        Pulsar lists a topic's permissions."""
        auth = self._auth(topic.namespace_name)
        grants = {role: set(actions) for role, actions in auth[_NAMESPACE].items()}
        for role, actions in auth[_TOPICS].get(str(topic), {}).items():
            grants.setdefault(role, set()).update(actions)
        return {role: _names(AuthAction(name) for name in actions) for role, actions in grants.items()}

    def subscription_roles(self, namespace: str) -> dict[str, list[str]]:
        """The roles allowed on each subscription of ``namespace`` that has a list."""
        return self._auth(namespace)[_SUBSCRIPTIONS]

    def allows(self, role: str, topic: TopicName, action: AuthAction) -> bool:
        """Whether ``role`` was granted ``action`` on ``topic``: on its namespace, on the topic, or
        (for a partition) on its partitioned topic, as Pulsar checks a permission."""
        auth = self._auth(topic.namespace_name)
        if action.value in auth[_NAMESPACE].get(role, ()):
            return True
        names = {str(topic), str(topic.base)}
        return any(action.value in auth[_TOPICS].get(name, {}).get(role, ()) for name in names)

    def allows_in_namespace(self, role: str, namespace: str, action: AuthAction) -> bool:
        """Whether ``role`` was granted ``action`` on the whole of ``namespace``."""
        return action.value in self._auth(namespace)[_NAMESPACE].get(role, ())

    def subscription_admits(self, role: str, namespace: str, subscription: str) -> bool:
        """Whether ``role`` may consume ``subscription``: it lists no roles, or lists this one."""
        roles = self._auth(namespace)[_SUBSCRIPTIONS].get(subscription)
        return not roles or role in roles

    # ---- changing ----

    async def grant_namespace(self, namespace: str, role: str, actions: Iterable[AuthAction]) -> None:
        """Set ``role``'s actions on every topic of ``namespace`` (replacing what it had)."""
        auth = self._auth(namespace)
        auth[_NAMESPACE][role] = _names(actions)
        await self._save(namespace, auth)

    async def revoke_namespace(self, namespace: str, role: str) -> None:
        """Take away ``role``'s namespace-wide actions (its topic grants stay)."""
        auth = self._auth(namespace)
        if auth[_NAMESPACE].pop(role, None) is not None:
            await self._save(namespace, auth)

    async def grant_topic(self, topic: TopicName, role: str, actions: Iterable[AuthAction]) -> None:
        """Set ``role``'s actions on ``topic`` (replacing what it had there)."""
        auth = self._auth(topic.namespace_name)
        auth[_TOPICS].setdefault(str(topic), {})[role] = _names(actions)
        await self._save(topic.namespace_name, auth)

    async def revoke_topic(self, topic: TopicName, role: str) -> None:
        """Take away ``role``'s grants on ``topic`` (the partitioned topic and its partitions)."""
        auth = self._auth(topic.namespace_name)
        for name, roles in list(auth[_TOPICS].items()):
            if (name == str(topic) or TopicName.parse(name, strict=False).base == topic) and roles.pop(role, None):
                if not roles:
                    del auth[_TOPICS][name]
        await self._save(topic.namespace_name, auth)

    async def grant_subscription(self, namespace: str, subscription: str, roles: Iterable[str]) -> None:
        """Set the roles allowed to consume ``subscription`` (replacing the list it had)."""
        auth = self._auth(namespace)
        auth[_SUBSCRIPTIONS][subscription] = sorted(set(roles))
        await self._save(namespace, auth)

    async def revoke_subscription(self, namespace: str, subscription: str, role: str) -> bool:
        """Take ``role`` off ``subscription``'s list (the list goes when empty); False when the
        subscription has no list."""
        auth = self._auth(namespace)
        roles = auth[_SUBSCRIPTIONS].get(subscription)
        if roles is None:
            return False
        remaining = [name for name in roles if name != role]
        if remaining:
            auth[_SUBSCRIPTIONS][subscription] = remaining
        else:
            del auth[_SUBSCRIPTIONS][subscription]
        await self._save(namespace, auth)
        return True

    async def forget_topic(self, topics: Iterable[TopicName]) -> None:
        """Drop the grants of deleted topics, as Pulsar does when it deletes a topic."""
        for topic in topics:
            auth = self._auth(topic.namespace_name)
            if auth[_TOPICS].pop(str(topic), None) is not None:
                await self._save(topic.namespace_name, auth)
