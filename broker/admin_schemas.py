"""The admin REST paths of the schema registry and of the schema policies, with Pulsar's paths,
JSON field names and statuses.

``/admin/v2/schemas/{tenant}/{namespace}/{topic}/schema`` (GET the latest, POST a new one,
DELETE), ``.../schema/{version}``, ``.../schemas`` (every version since the last deletion) and
``.../compatibility`` (would a schema be accepted); the compatibility strategy of a namespace
(``/admin/v2/namespaces/{t}/{ns}/schemaCompatibilityStrategy``) and of a topic
(``/admin/v2/persistent/{t}/{ns}/{topic}/schemaCompatibilityStrategy``), and a namespace's
``isAllowAutoUpdateSchema``. Where Pulsar answers a malformed request with a 500 and a Java stack
trace (a version that is no number, an unknown schema type), this answers 400 saying what is wrong.

A KEY_VALUE schema is kept as producers declare it, both definitions packed in one binary value;
on these paths, as in Pulsar, it is the JSON ``{"key": ..., "value": ...}`` of the two definitions,
``""`` standing for a side of a primitive type.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from airflow_pulsar.client.schema.info import SchemaType
from airflow_pulsar.client.schema.key_value import pack
from airflow_pulsar.client.topic_name import InvalidTopicNameError, TopicName

from .admin_authorization import NamespacePolicy, OnTopic, TenantAdministration, TopicPolicy, requires
from .admin_resource import BAD_TOPIC, NAMESPACE_PATH, TOPIC_PATH, AdminResource, error, namespace_of, policy_response, query_flag
from .authorization import TopicOperation
from .policies import AUTO_UPDATE_SCHEMA, NAMESPACE_SCHEMA_STRATEGY, TOPIC_SCHEMA_STRATEGY
from .schema_compatibility import (
    PRIMITIVE_TYPES,
    IncompatibleSchemaError,
    InvalidSchemaError,
    SchemaCompatibilityStrategy,
    SchemaData,
    key_value_sides,
)
from .schema_registry import StoredSchema, schema_id

_SCHEMA_PATH = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"
_NOT_FOUND = "Schema not found"
# The types a schema can be posted with: those the broker keeps (not BYTES, not the AUTO ones).
_POSTABLE = {kind.name: kind for kind in SchemaType if kind >= 0}


def schema_document(stored: StoredSchema) -> dict[str, Any]:
    """Pulsar's GetSchemaResponse: ``version``, ``type``, ``timestamp``, ``data``, ``properties``."""
    schema = stored.schema
    data = _key_value_text(schema) if schema.schema_type == SchemaType.KEY_VALUE else schema.data.decode("utf-8", "replace")
    return {
        "version": stored.version,
        "type": schema.schema_type.name,
        "timestamp": stored.timestamp,
        "data": data,
        "properties": dict(schema.properties),
    }


def _compact_json(value: Any) -> str:
    # As Pulsar writes JSON here: no spaces, non-ASCII characters as they are.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _key_value_text(schema: SchemaData) -> str:
    """A KEY_VALUE definition as Pulsar shows it: the JSON of its two definitions, ``""`` for a
    side of a primitive type (a side that is no JSON shows as its text)."""
    document = {}
    for name, side in zip(("key", "value"), key_value_sides(schema), strict=True):
        text = side.data.decode("utf-8", "replace")
        try:
            document[name] = "" if side.schema_type in PRIMITIVE_TYPES else json.loads(text)
        except ValueError:
            document[name] = text
    return _compact_json(document)


def _key_value_definition(text: str) -> bytes:
    """The binary definition of a posted KEY_VALUE schema, as Pulsar converts it: each side of
    ``{"key": ..., "value": ...}`` as compact JSON (``""`` as no definition), both packed."""
    document = json.loads(text)
    if not isinstance(document, dict) or not {"key", "value"} <= document.keys():
        raise ValueError("not a JSON object with key and value")
    return pack(*(b"" if document[side] == "" else _compact_json(document[side]).encode() for side in ("key", "value")))


class Schemas(AdminResource):
    """The schema registry's paths and the schema compatibility policies."""

    def routes(self) -> list[web.RouteDef]:
        """The registry paths, then the policy paths."""
        return [
            web.get(_SCHEMA_PATH + "/schema", self.get_schema),
            web.post(_SCHEMA_PATH + "/schema", self.post_schema),
            web.delete(_SCHEMA_PATH + "/schema", self.delete_schema),
            web.get(_SCHEMA_PATH + "/schema/{version}", self.get_schema_version),
            web.get(_SCHEMA_PATH + "/schemas", self.get_all_schemas),
            web.post(_SCHEMA_PATH + "/compatibility", self.test_compatibility),
            web.get(NAMESPACE_PATH + "/schemaCompatibilityStrategy", self.get_namespace_strategy),
            web.put(NAMESPACE_PATH + "/schemaCompatibilityStrategy", self.set_namespace_strategy),
            web.get(NAMESPACE_PATH + "/isAllowAutoUpdateSchema", self.get_auto_update),
            web.post(NAMESPACE_PATH + "/isAllowAutoUpdateSchema", self.set_auto_update),
            web.get(TOPIC_PATH + "/schemaCompatibilityStrategy", self.get_topic_strategy),
            web.put(TOPIC_PATH + "/schemaCompatibilityStrategy", self.set_topic_strategy),
            web.delete(TOPIC_PATH + "/schemaCompatibilityStrategy", self.set_topic_strategy),
        ]

    def _schema_topic(self, request: web.Request) -> TopicName:
        """The topic a schema path names (a partition's schema is its partitioned topic's)."""
        info = request.match_info
        try:
            return TopicName.parse(f"persistent://{info['tenant']}/{info['namespace']}/{info['topic']}", strict=False)
        except InvalidTopicNameError:
            raise InvalidTopicNameError(BAD_TOPIC) from None

    # ---- the registry ----

    @requires(OnTopic(TopicOperation.GET_METADATA))
    async def get_schema(self, request: web.Request) -> web.Response:
        """The latest schema; 404 when there is none, or it was deleted."""
        stored = self.service.schemas.current(schema_id(self._schema_topic(request)))
        return error(404, _NOT_FOUND) if stored is None else web.json_response(schema_document(stored))

    @requires(OnTopic(TopicOperation.GET_METADATA))
    async def get_schema_version(self, request: web.Request) -> web.Response:
        """One version of the schema; 404 when there is no such version (or it was deleted)."""
        sid = schema_id(self._schema_topic(request))
        text = request.match_info["version"]
        try:
            version = int(text)
        except ValueError:
            return error(400, f"the schema version must be an integer, got {text!r}")
        stored = self.service.schemas.version(sid, version)
        return error(404, _NOT_FOUND) if stored is None else web.json_response(schema_document(stored))

    @requires(OnTopic(TopicOperation.GET_METADATA))
    async def get_all_schemas(self, request: web.Request) -> web.Response:
        """Every version since the last deletion, oldest first, under ``getSchemaResponses``."""
        versions = self.service.schemas.versions(schema_id(self._schema_topic(request)))
        return web.json_response({"getSchemaResponses": [schema_document(stored) for stored in versions]})

    @requires(OnTopic(TopicOperation.PRODUCE))
    async def post_schema(self, request: web.Request) -> web.Response:
        """Register a schema (PostSchemaPayload: ``type``, ``schema``, ``properties``) under the
        topic's strategy: its version, 409 when incompatible, 422 when the definition is invalid."""
        posted = await self._posted_with_strategy(request)
        if isinstance(posted, web.Response):
            return posted
        sid, schema, strategy = posted
        try:
            version = await self.service.schemas.add_schema(sid, schema, strategy)
        except IncompatibleSchemaError as exc:
            return error(409, str(exc))
        except InvalidSchemaError as exc:
            return error(422, str(exc))
        return web.json_response({"version": {"version": version}})

    @requires(TenantAdministration())
    async def delete_schema(self, request: web.Request) -> web.Response:
        """Delete the schema: a deletion marker, whose version is answered; with ``force=true``
        the whole history goes and the version is -1."""
        name = self._schema_topic(request)
        self.service.check_namespace(name)
        sid = schema_id(name)
        if query_flag(request, "force"):
            await self.service.schemas.drop(sid)
            return web.json_response({"version": -1})
        return web.json_response({"version": await self.service.schemas.delete(sid)})

    @requires(TenantAdministration())
    async def test_compatibility(self, request: web.Request) -> web.Response:
        """Whether a producer could register the schema now; as Pulsar, 202 with the strategy when
        it could, and a 500 whose reason says why when it could not."""
        posted = await self._posted_with_strategy(request)
        if isinstance(posted, web.Response):
            return posted
        sid, schema, strategy = posted
        try:
            self.service.schemas.check_compatible(sid, schema, strategy)
        except IncompatibleSchemaError as exc:
            return error(500, str(exc))
        return web.json_response({"schemaCompatibilityStrategy": strategy.value, "compatibility": True}, status=202)

    async def _posted_with_strategy(
        self, request: web.Request
    ) -> tuple[str, SchemaData, SchemaCompatibilityStrategy] | web.Response:
        """The topic's schema id, the posted schema and the strategy it is judged by; or the 400
        that says what is wrong with the body."""
        name = self._schema_topic(request)
        self.service.check_namespace(name)
        schema = await _posted_schema(request)
        if isinstance(schema, web.Response):
            return schema
        return schema_id(name), schema, self.service.policies.schema_compatibility_strategy(name)

    # ---- the policies ----

    @requires(NamespacePolicy("SCHEMA_COMPATIBILITY_STRATEGY", write=False))
    async def get_namespace_strategy(self, request: web.Request) -> web.Response:
        """The namespace's strategy, ``"UNDEFINED"`` when unset."""
        namespace = self._existing_namespace(request)
        value = self.service.policies.namespace_policy(namespace, NAMESPACE_SCHEMA_STRATEGY)
        return web.json_response(value or SchemaCompatibilityStrategy.UNDEFINED.value)

    @requires(NamespacePolicy("SCHEMA_COMPATIBILITY_STRATEGY", write=True))
    async def set_namespace_strategy(self, request: web.Request) -> web.Response:
        """Set the namespace's strategy (body: a strategy name as a JSON string)."""
        namespace = self._existing_namespace(request)
        strategy = await _strategy_body(request)
        if isinstance(strategy, web.Response):
            return strategy
        await self.service.policies.set_namespace_policy(namespace, NAMESPACE_SCHEMA_STRATEGY, strategy.value)
        return web.Response(status=204)

    @requires(NamespacePolicy("SCHEMA_COMPATIBILITY_STRATEGY", write=False))
    async def get_auto_update(self, request: web.Request) -> web.Response:
        """Whether producers may add schema versions in the namespace (true unless turned off)."""
        namespace = self._existing_namespace(request)
        value = self.service.policies.namespace_policy(namespace, AUTO_UPDATE_SCHEMA)
        return web.json_response(True if value is None else value)

    @requires(NamespacePolicy("SCHEMA_COMPATIBILITY_STRATEGY", write=True))
    async def set_auto_update(self, request: web.Request) -> web.Response:
        """Turn schema auto update on or off for the namespace (body ``true`` or ``false``)."""
        namespace = self._existing_namespace(request)
        policies = self.service.policies
        return await self.update_flag_policy(
            request, lambda value: policies.set_namespace_policy(namespace, AUTO_UPDATE_SCHEMA, value)
        )

    @requires(TopicPolicy("SCHEMA_COMPATIBILITY_STRATEGY", write=False))
    async def get_topic_strategy(self, request: web.Request) -> web.Response:
        """The topic's own strategy (an empty 200 when unset), or with ``applied=true`` the one in force."""
        name = self.policy_topic(request)
        if isinstance(name, web.Response):
            return name
        policies = self.service.policies
        if query_flag(request, "applied"):
            return web.json_response(policies.schema_compatibility_strategy(name).value)
        return policy_response(policies.topic_policy(name, TOPIC_SCHEMA_STRATEGY))

    @requires(TopicPolicy("SCHEMA_COMPATIBILITY_STRATEGY", write=True))
    async def set_topic_strategy(self, request: web.Request) -> web.Response:
        """PUT sets the topic's strategy (body: a strategy name as a JSON string), DELETE removes it."""
        name = self.policy_topic(request)
        if isinstance(name, web.Response):
            return name
        value = None
        if request.method == "PUT":
            strategy = await _strategy_body(request)
            if isinstance(strategy, web.Response):
                return strategy
            value = strategy.value
        await self.service.policies.set_topic_policy(name, TOPIC_SCHEMA_STRATEGY, value)
        return web.Response(status=204)

    def _existing_namespace(self, request: web.Request) -> str:
        namespace = namespace_of(request)
        if not self.service.namespace_exists(namespace):
            raise LookupError("Namespace does not exist")
        return namespace


async def _json_body(request: web.Request) -> Any:
    """The request's JSON body; ValueError when it is none."""
    return json.loads(await request.text())


async def _strategy_body(request: web.Request) -> SchemaCompatibilityStrategy | web.Response:
    """The strategy a policy PUT carries (a JSON string), or a 400 naming the valid ones."""
    try:
        return SchemaCompatibilityStrategy.parse(await _json_body(request))
    except ValueError as exc:
        return error(400, str(exc))


async def _posted_schema(request: web.Request) -> SchemaData | web.Response:
    """The schema of a PostSchemaPayload (``type``, ``schema``, ``properties``), or a 400 saying
    what is wrong with it."""
    try:
        payload = await _json_body(request)
    except ValueError:
        return error(400, "the request body must be a JSON object with type, schema and properties")
    if not isinstance(payload, dict):
        return error(400, "the request body must be a JSON object with type, schema and properties")
    kind = _POSTABLE.get(payload.get("type"))  # type: ignore[arg-type]
    if kind is None:
        return error(400, f"type must be one of {', '.join(_POSTABLE)}; got {payload.get('type')!r}")
    definition, properties = payload.get("schema"), payload.get("properties") or {}
    if not isinstance(definition, str):
        return error(400, f"schema must be the definition as a string; got {definition!r:.50}")
    if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
        return error(400, "properties must be an object of strings")
    if kind != SchemaType.KEY_VALUE:
        return SchemaData(kind, definition.encode(), properties)
    try:
        return SchemaData(kind, _key_value_definition(definition), properties)
    except ValueError as exc:
        return error(400, f'a KEY_VALUE schema must be the JSON object {{"key": ..., "value": ...}} of its two definitions: {exc}')
