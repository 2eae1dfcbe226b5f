"""The admin operations of the schema registry and the schema compatibility policy, with Pulsar's
paths and JSON documents (``/admin/v2/schemas/...``, ``schemaCompatibilityStrategy``).

A schema comes back as Pulsar's GetSchemaResponse document: ``version``, ``type`` (``"AVRO"``,
``"JSON"``, ``"STRING"``...), ``timestamp`` (ms), ``data`` (the definition as text) and
``properties``.
"""

from __future__ import annotations

from typing import Any

import httpx

from .calls import AdminCall, Operation, UnexpectedResponse, decode_document, decode_json, decode_nothing
from .operations import non_negative_int
from .paths import namespace_policy_path, schema_path, topic_name

# Pulsar's SchemaCompatibilityStrategy names.
STRATEGIES = (
    "UNDEFINED",
    "ALWAYS_INCOMPATIBLE",
    "ALWAYS_COMPATIBLE",
    "BACKWARD",
    "FORWARD",
    "FULL",
    "BACKWARD_TRANSITIVE",
    "FORWARD_TRANSITIVE",
    "FULL_TRANSITIVE",
)


def _decode_versions(response: httpx.Response) -> list[dict[str, Any]]:
    body = decode_document(response)
    versions = body.get("getSchemaResponses")
    if not isinstance(versions, list) or not all(isinstance(item, dict) for item in versions):
        raise UnexpectedResponse(f"expected {{'getSchemaResponses': [...]}}, got {body!r:.100}")
    return versions


def _decode_version(response: httpx.Response) -> int:
    """The version of a post (``{"version": {"version": N}}``) or a delete (``{"version": N}``)."""
    body = decode_document(response)
    version = body.get("version")
    if isinstance(version, dict):
        version = version.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise UnexpectedResponse(f"expected a schema version, got {body!r:.100}")
    return version


def _decode_strategy(response: httpx.Response) -> str | None:
    # Pulsar answers a topic without a strategy of its own with an empty 200.
    if not response.content.strip():
        return None
    body = decode_json(response)
    if body not in STRATEGIES:
        raise UnexpectedResponse(f"expected a schema compatibility strategy, got {body!r:.100}")
    return str(body)


def _check_strategy(strategy: Any) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
    return str(strategy)


def get_schema(topic: str, version: int | None = None) -> Operation[dict[str, Any]]:
    """The topic's latest schema, or the given ``version`` of it; AdminNotFoundError when there is none."""
    name = topic_name(topic)
    path = schema_path(name, "schema") if version is None else schema_path(name, "schema", str(non_negative_int(version, "version")))
    return (yield AdminCall("get_schema", "GET", path, decode=decode_document))


def get_all_schemas(topic: str) -> Operation[list[dict[str, Any]]]:
    """Every version of the topic's schema since it was last deleted, oldest first."""
    path = schema_path(topic_name(topic), "schemas")
    return (yield AdminCall("get_all_schemas", "GET", path, decode=_decode_versions))


def create_schema(topic: str, schema_type: str, schema: str, properties: dict[str, str] | None = None) -> Operation[int]:
    """Register a schema (``schema_type`` as Pulsar names it, ``"AVRO"``, ``"JSON"``, ``"STRING"``...;
    ``schema`` the definition) under the topic's compatibility strategy: its version, an existing
    one for a definition already registered. AdminConflictError (409) when it is incompatible."""
    if not isinstance(schema_type, str) or not schema_type:
        raise ValueError(f"schema_type must be a schema type name such as 'AVRO', got {schema_type!r}")
    if not isinstance(schema, str):
        raise ValueError(f"schema must be the definition as a str, got {schema!r:.50}")
    body = {"type": schema_type, "schema": schema, "properties": dict(properties or {})}
    path = schema_path(topic_name(topic), "schema")
    return (yield AdminCall("create_schema", "POST", path, body=body, decode=_decode_version))


def delete_schema(topic: str, force: bool = False) -> Operation[int]:
    """Delete the topic's schema: the version of the deletion marker (with ``force`` the whole
    history is dropped and the answer is -1)."""
    path = schema_path(topic_name(topic), "schema")
    params = {"force": "true" if force else "false"}
    return (yield AdminCall("delete_schema", "DELETE", path, params, decode=_decode_version))


def namespace_schema_compatibility_strategy(namespace: str) -> Operation[str]:
    """The namespace's schema compatibility strategy, ``"UNDEFINED"`` when unset (the broker's applies)."""
    path = namespace_policy_path(namespace, "schemaCompatibilityStrategy")
    return (yield AdminCall("namespace_schema_compatibility_strategy", "GET", path, decode=_decode_strategy))


def set_namespace_schema_compatibility_strategy(namespace: str, strategy: str) -> Operation[None]:
    """Set the strategy new schemas of the namespace's topics are checked with (Pulsar's names)."""
    path = namespace_policy_path(namespace, "schemaCompatibilityStrategy")
    body = _check_strategy(strategy)
    return (yield AdminCall("set_namespace_schema_compatibility_strategy", "PUT", path, body=body, decode=decode_nothing))
