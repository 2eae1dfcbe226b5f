"""The admin operations of grants: which role may do what on a namespace, a topic or a subscription.

Pulsar's paths: ``/admin/v2/namespaces/{tenant}/{namespace}/permissions[/{role}]``,
``.../permissions/subscription[/{subscription}]`` (revoking: ``.../permissions/{subscription}/{role}``)
and ``/admin/v2/persistent/{tenant}/{namespace}/{topic}/permissions[/{role}]``. Granting replaces
what the role (or the subscription) had. A broker enforces grants only with authorization on
(Pulsar's ``authorizationEnabled``, the embedded broker's ``--authorization``); granting and
listing take a tenant admin or a superuser.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

import httpx

from .calls import AdminCall, Operation, UnexpectedResponse, decode_json, decode_nothing
from .paths import namespace_policy_path, topic_name, topic_path


class AuthAction(str, Enum):
    """What a grant allows (Pulsar's AuthAction); the value is the name Pulsar reads."""

    produce = "produce"
    consume = "consume"
    functions = "functions"
    sources = "sources"
    sinks = "sinks"
    packages = "packages"


def _action_names(actions: Iterable[AuthAction | str]) -> list[str]:
    """The actions' names; ValueError for a name Pulsar does not know (its broker would drop it
    without a word, granting less than asked)."""
    if isinstance(actions, str):
        raise TypeError(f"actions must be a list of actions, got the string {actions!r}")
    names = []
    for action in actions:
        try:
            names.append(AuthAction(action).value)
        except ValueError:
            raise ValueError(f"unknown action {action!r}: the actions are {', '.join(a.value for a in AuthAction)}") from None
    return sorted(set(names), key=[a.value for a in AuthAction].index)


def _role(role: str, what: str = "role") -> str:
    if not isinstance(role, str) or not role or "/" in role:
        raise ValueError(f"{what} must be a non-empty name without '/', got {role!r}")
    return role


def decode_grants(response: httpx.Response) -> dict[str, list[str]]:
    """A JSON object of names to lists of names (roles to actions, or subscriptions to roles).

    Pulsar lists an action name it did not know when it was granted as null: left out here."""
    body = decode_json(response)
    if not isinstance(body, dict) or not all(
        isinstance(names, list) and all(name is None or isinstance(name, str) for name in names) for names in body.values()
    ):
        raise UnexpectedResponse(f"expected an object of name lists, got {body!r:.100}")
    return {key: [name for name in names if name is not None] for key, names in body.items()}


def _permissions_path(namespace: str, *suffix: str) -> str:
    return namespace_policy_path(namespace, "permissions", *suffix)


# ---- namespaces ----


def namespace_permissions(namespace: str) -> Operation[dict[str, list[str]]]:
    """Each role's actions on every topic of ``tenant/namespace``."""
    return (yield AdminCall("namespace_permissions", "GET", _permissions_path(namespace), decode=decode_grants))


def grant_namespace_permission(namespace: str, role: str, actions: Iterable[AuthAction | str]) -> Operation[None]:
    """Let ``role`` take ``actions`` (``"produce"``, ``"consume"``, ...) on every topic of the
    namespace, replacing what it had there."""
    path = _permissions_path(namespace, _role(role))
    body: Any = _action_names(actions)
    return (yield AdminCall("grant_namespace_permission", "POST", path, body=body, decode=decode_nothing))


def revoke_namespace_permission(namespace: str, role: str) -> Operation[None]:
    """Take away ``role``'s namespace-wide actions (its grants on single topics stay)."""
    path = _permissions_path(namespace, _role(role))
    return (yield AdminCall("revoke_namespace_permission", "DELETE", path, decode=decode_nothing))


# ---- subscriptions ----


def subscription_permissions(namespace: str) -> Operation[dict[str, list[str]]]:
    """The roles allowed on each subscription of the namespace that has a list."""
    path = _permissions_path(namespace, "subscription")
    return (yield AdminCall("subscription_permissions", "GET", path, decode=decode_grants))


def grant_subscription_permission(namespace: str, subscription: str, roles: Iterable[str]) -> Operation[None]:
    """Let only ``roles`` (and tenant admins) consume ``subscription`` on the namespace's topics,
    replacing its list; a role still needs consume permission on the topic."""
    if isinstance(roles, str):
        raise TypeError(f"roles must be a list of roles, got the string {roles!r}")
    path = _permissions_path(namespace, "subscription", _role(subscription, "subscription"))
    body: Any = sorted({_role(role) for role in roles})
    return (yield AdminCall("grant_subscription_permission", "POST", path, body=body, decode=decode_nothing))


def revoke_subscription_permission(namespace: str, subscription: str, role: str) -> Operation[None]:
    """Take ``role`` off ``subscription``'s list (an empty list admits any consumer again). A
    subscription without a list is Pulsar's 500 (AdminServerError), which a retry does not cure."""
    path = _permissions_path(namespace, _role(subscription, "subscription"), _role(role))
    return (yield AdminCall("revoke_subscription_permission", "DELETE", path, decode=decode_nothing))


# ---- topics ----


def topic_permissions(topic: str) -> Operation[dict[str, list[str]]]:
    """Each role's actions on ``topic``: its namespace's grants joined with the topic's own."""
    path = topic_path(topic_name(topic), "permissions")
    return (yield AdminCall("topic_permissions", "GET", path, decode=decode_grants))


def grant_topic_permission(topic: str, role: str, actions: Iterable[AuthAction | str]) -> Operation[None]:
    """Let ``role`` take ``actions`` on ``topic`` (which has to exist; a partitioned topic's grant
    covers its partitions), replacing what it had there."""
    path = topic_path(topic_name(topic), "permissions", _role(role))
    body: Any = _action_names(actions)
    return (yield AdminCall("grant_topic_permission", "POST", path, body=body, decode=decode_nothing))


def revoke_topic_permission(topic: str, role: str) -> Operation[None]:
    """Take away ``role``'s grant on ``topic`` (and on its partitions); grants on the namespace stay."""
    path = topic_path(topic_name(topic), "permissions", _role(role))
    return (yield AdminCall("revoke_topic_permission", "DELETE", path, decode=decode_nothing))
