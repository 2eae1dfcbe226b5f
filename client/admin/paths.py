"""Pulsar's admin REST paths of topics and namespaces, each name part percent-encoded."""

from __future__ import annotations

from urllib.parse import quote

from ..topic_name import TopicName, is_valid_name_part


def topic_name(topic: str | TopicName) -> TopicName:
    """``topic`` parsed, whether short (``"my-topic"``) or full (``"persistent://t/ns/my-topic"``)."""
    return topic if isinstance(topic, TopicName) else TopicName.parse(topic)


def _segments(parts: tuple[str, ...]) -> str:
    return "/".join(quote(part, safe="") for part in parts)


def topic_path(name: TopicName, *suffix: str) -> str:
    """``/admin/v2/{domain}/{tenant}/{namespace}/{topic}/...``."""
    return "/admin/v2/" + _segments((name.domain, name.tenant, name.namespace, name.local_name, *suffix))


def lookup_path(name: TopicName) -> str:
    """``/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}``: Pulsar's HTTP topic lookup."""
    return "/lookup/v2/topic/" + _segments((name.domain, name.tenant, name.namespace, name.local_name))


def _namespace_parts(namespace: str) -> tuple[str, str]:
    tenant, _, local = namespace.partition("/")
    if not (is_valid_name_part(tenant) and is_valid_name_part(local)):
        raise ValueError(f"namespace must be 'tenant/namespace', got {namespace!r}")
    return tenant, local


def namespace_path(namespace: str, *suffix: str) -> str:
    """``/admin/v2/persistent/{tenant}/{namespace}/...``: the namespace's persistent topics."""
    return "/admin/v2/persistent/" + _segments((*_namespace_parts(namespace), *suffix))


def namespace_policy_path(namespace: str, *suffix: str) -> str:
    """``/admin/v2/namespaces/{tenant}/{namespace}/...``: the namespace's own resource."""
    return "/admin/v2/namespaces/" + _segments((*_namespace_parts(namespace), *suffix))


def schema_path(name: TopicName, *suffix: str) -> str:
    """``/admin/v2/schemas/{tenant}/{namespace}/{topic}/...``: the topic's schema registry entry."""
    return "/admin/v2/schemas/" + _segments((name.tenant, name.namespace, name.local_name, *suffix))


def transactions_path(resource: str, name: TopicName, *suffix: str) -> str:
    """``/admin/v3/transactions/{resource}/{tenant}/{namespace}/{topic}/...``: a topic's part in transactions."""
    return f"/admin/v3/transactions/{resource}/" + _segments((name.tenant, name.namespace, name.local_name, *suffix))
