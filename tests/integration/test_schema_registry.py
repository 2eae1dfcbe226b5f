"""The schema registry of the broker, as Apache Pulsar's behaves, on both brokers.

Versions and GET_SCHEMA, GET_OR_CREATE_SCHEMA, each compatibility strategy accepting and refusing
(transitive against non-transitive), what producers and consumers with and without a schema may
do, the admin REST paths and their JSON, a schema shared by the partitions of a topic, the schema
going with its topic, KEY_VALUE schemas through the admin API, PROTOBUF_NATIVE schemas checked by
their root message, and (our broker) the registry surviving a restart. Each strategy test works in
a namespace of its own: the Pulsar instance is shared by the session.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf import duration_pb2, timestamp_pb2

from airflow_pulsar.client.admin import AdminConflictError, AdminNotFoundError, PulsarAdmin
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, Schema, ServerError
from airflow_pulsar.client.schema.key_value import pack
from airflow_pulsar.client.schema.protobuf_native import schema_definition
from tests.support.schema_wire import WireSession, wire_schema

T = BaseCommand
AVRO, STRING, AUTO_CONSUME = Schema.Type.Value("Avro"), Schema.Type.Value("String"), Schema.Type.Value("AutoConsume")
KEY_VALUE, PROTOBUF_NATIVE = Schema.Type.Value("KeyValue"), Schema.Type.Value("ProtobufNative")
NONE = Schema.Type.Value("None")


def record(*fields: dict[str, Any]) -> str:
    """An Avro record schema ``Item`` with these fields."""
    return json.dumps({"type": "record", "name": "Item", "fields": list(fields)})


NAME = record({"name": "name", "type": "string"})
NAME_INT = record({"name": "name", "type": "int"})  # neither reads the other's data
NAME_NOTE = record({"name": "name", "type": "string"}, {"name": "note", "type": ["null", "string"], "default": None})
NAME_COUNT = record({"name": "name", "type": "string"}, {"name": "count", "type": "int"})
NAME_COUNT_DEFAULT = record({"name": "name", "type": "string"}, {"name": "count", "type": "int", "default": 0})

REFUSED = "refused"
# Strategy -> the schemas producers declare in turn, each with the version it gets or REFUSED.
SCENARIOS: dict[str, list[tuple[str, int | str]]] = {
    "ALWAYS_COMPATIBLE": [(NAME, 0), (NAME_INT, 1), (NAME, 0)],
    "ALWAYS_INCOMPATIBLE": [(NAME, 0), (NAME, 0), (NAME_NOTE, REFUSED)],
    # A new field without a default: old data cannot be read (not BACKWARD), old readers skip it (FORWARD).
    "BACKWARD": [(NAME, 0), (NAME_COUNT, REFUSED), (NAME_NOTE, 1), (NAME_INT, REFUSED)],
    "FORWARD": [(NAME, 0), (NAME_COUNT, 1), (NAME_INT, REFUSED)],
    "FULL": [(NAME, 0), (NAME_COUNT, REFUSED), (NAME_NOTE, 1), (NAME_INT, REFUSED)],
    "UNDEFINED": [(NAME, 0), (NAME_COUNT, REFUSED), (NAME_NOTE, 1)],  # the broker's default: FULL
    # Compatible with the latest version, not with the first: only the transitive ones refuse.
    "BACKWARD_TRANSITIVE": [(NAME, 0), (NAME_COUNT_DEFAULT, 1), (NAME_COUNT, REFUSED)],
    "FORWARD_TRANSITIVE": [(NAME_COUNT, 0), (NAME_COUNT_DEFAULT, 1), (NAME, REFUSED)],
    "FULL_TRANSITIVE": [(NAME, 0), (NAME_COUNT_DEFAULT, 1), (NAME_COUNT, REFUSED)],
}
# The same histories under the non-transitive strategies: the last schema is accepted.
NON_TRANSITIVE = {
    "BACKWARD": [(NAME, 0), (NAME_COUNT_DEFAULT, 1), (NAME_COUNT, 2)],
    "FORWARD": [(NAME_COUNT, 0), (NAME_COUNT_DEFAULT, 1), (NAME, 2)],
    "FULL": [(NAME, 0), (NAME_COUNT_DEFAULT, 1), (NAME_COUNT, 2)],
}


@pytest.fixture(scope="module")
def admin(broker: Any) -> Iterator[PulsarAdmin]:
    with PulsarAdmin(broker.web_url) as made:
        yield made


@pytest.fixture
def wire(broker: Any) -> Iterator[WireSession]:
    with WireSession(broker.service_url) as session:
        yield session


@pytest.fixture
def topic(topic_name: str) -> str:
    return f"persistent://public/default/{topic_name}"


def strategy_namespace(admin: PulsarAdmin, strategy: str) -> str:
    """A fresh namespace whose topics use ``strategy`` (set before any topic is loaded)."""
    namespace = f"public/schema-{strategy.lower().replace('_', '-')}-{uuid.uuid4().hex[:8]}"
    admin.create_namespace(namespace)
    if strategy != "UNDEFINED":
        admin.set_namespace_schema_compatibility_strategy(namespace, strategy)
    assert admin.namespace_schema_compatibility_strategy(namespace) == strategy
    return namespace


def declare(
    wire: WireSession, topic: str, definition: str | bytes, schema_type: int = AVRO, properties: dict[str, str] | None = None
) -> int | str:
    """A producer's schema: the version PRODUCER_SUCCESS gives it, or REFUSED (IncompatibleSchema)."""
    kind, body = wire.producer(topic, wire_schema(schema_type, definition, properties=properties))
    if kind == T.ERROR:
        assert body.error == ServerError.IncompatibleSchema, body
        assert body.message
        return REFUSED
    return int.from_bytes(body.schema_version, "big", signed=True)


@pytest.mark.parametrize(
    ("strategy", "steps"),
    [*SCENARIOS.items(), *((f"{name}-latest-only", steps) for name, steps in NON_TRANSITIVE.items())],
    ids=[*SCENARIOS, *(f"{name}-latest-only" for name in NON_TRANSITIVE)],
)
def test_each_strategy_accepts_and_refuses(admin: PulsarAdmin, wire: WireSession, strategy: str, steps: list[Any]) -> None:
    namespace = strategy_namespace(admin, strategy.removesuffix("-latest-only"))
    topic = f"persistent://{namespace}/items"
    assert [declare(wire, topic, definition) for definition, _ in steps] == [expected for _, expected in steps]


def test_versions_and_get_schema(wire: WireSession, topic: str) -> None:
    missing = wire.get_schema(topic)
    assert (missing.error_code, missing.error_message) == (ServerError.TopicNotFound, f"Topic not found or no-schema {topic}")
    assert [declare(wire, topic, d) for d in (NAME, NAME_NOTE, NAME)] == [0, 1, 0]
    latest = wire.get_schema(topic)
    assert latest.schema_version == (1).to_bytes(8, "big")  # Pulsar's LongSchemaVersion: 8 bytes, big-endian
    assert (latest.schema.type, latest.schema.schema_data.decode()) == (AVRO, NAME_NOTE)
    assert latest.schema.name == topic.removeprefix("persistent://")  # the schema id: tenant/namespace/topic
    first = wire.get_schema(topic, 0)
    assert (first.schema_version, first.schema.schema_data.decode()) == ((0).to_bytes(8, "big"), NAME)
    assert wire.get_schema(topic, 7).error_code == ServerError.TopicNotFound


def test_get_or_create_schema(wire: WireSession, topic: str, admin: PulsarAdmin) -> None:
    missing = wire.get_or_create_schema(topic, wire_schema(AVRO, NAME))
    assert (missing.error_code, missing.error_message) == (ServerError.TopicNotFound, f"Topic not found {topic}")
    admin.create_topic(topic)
    assert wire.get_or_create_schema(topic, wire_schema(AVRO, NAME)).schema_version == (0).to_bytes(8, "big")
    assert wire.get_or_create_schema(topic, wire_schema(AVRO, NAME_NOTE)).schema_version == (1).to_bytes(8, "big")
    assert wire.get_or_create_schema(topic, wire_schema(AVRO, NAME)).schema_version == (0).to_bytes(8, "big")
    none = wire.get_or_create_schema(topic, wire_schema(NONE))
    assert none.HasField("schema_version") and none.schema_version == b"" and not none.HasField("error_code")
    refused = wire.get_or_create_schema(topic, wire_schema(AVRO, NAME_INT))
    assert refused.error_code == ServerError.IncompatibleSchema and "FULL" in refused.error_message


def test_a_change_of_type_is_refused(wire: WireSession, topic: str) -> None:
    assert declare(wire, topic, NAME) == 0
    kind, body = wire.producer(topic, wire_schema(STRING))
    assert (kind, body.error) == (T.ERROR, ServerError.IncompatibleSchema)
    assert "Incompatible schema: exists schema type AVRO, new schema type STRING" in body.message


def test_producers_and_consumers_without_a_schema_use_any_topic(wire: WireSession, topic: str) -> None:
    assert declare(wire, topic, NAME) == 0
    kind, body = wire.producer(topic)
    assert kind == T.PRODUCER_SUCCESS and not body.schema_version
    assert wire.subscribe(topic, "bytes")[0] == T.SUCCESS
    assert wire.subscribe(topic, "auto", wire_schema(AUTO_CONSUME))[0] == T.SUCCESS


def test_a_producer_schema_on_a_topic_with_data_and_no_schema_is_registered(wire: WireSession, topic: str, official: Any) -> None:
    official.create_producer(topic).send(b"raw")
    assert declare(wire, topic, NAME) == 0


def test_a_consumer_schema_is_registered_only_on_an_idle_topic(wire: WireSession, topic: str, official: Any) -> None:
    official.create_producer(topic).send(b"raw")
    kind, body = wire.subscribe(topic, "avro", wire_schema(AVRO, NAME))
    assert (kind, body.error) == (T.ERROR, ServerError.IncompatibleSchema)
    assert body.message == "Failed to add schema to an active topic with empty(BYTES) schema: new schema type AVRO"
    idle = topic + "-idle"
    assert wire.subscribe(idle, "first", wire_schema(AVRO, NAME))[0] == T.SUCCESS
    assert wire.get_schema(idle).schema.schema_data.decode() == NAME


def test_a_consumer_schema_is_checked_against_the_latest(wire: WireSession, topic: str) -> None:
    assert [declare(wire, topic, d) for d in (NAME, NAME_NOTE)] == [0, 1]
    assert wire.subscribe(topic, "old-reader", wire_schema(AVRO, NAME))[0] == T.SUCCESS  # it reads the latest's data
    kind, body = wire.subscribe(topic, "wrong", wire_schema(AVRO, NAME_INT))
    assert (kind, body.error) == (T.ERROR, ServerError.IncompatibleSchema)
    kind, body = wire.subscribe(topic, "text", wire_schema(STRING))
    assert "exists schema type AVRO, new schema type STRING" in body.message
    assert wire.get_schema(topic).schema_version == (1).to_bytes(8, "big")  # consumers registered nothing


def test_without_auto_update_only_known_schemas_are_accepted(broker: Any, admin: PulsarAdmin, wire: WireSession) -> None:
    namespace = strategy_namespace(admin, "UNDEFINED")
    response = broker.admin("POST", f"/admin/v2/namespaces/{namespace}/isAllowAutoUpdateSchema", json=False)
    assert response.status_code == 204
    assert broker.admin("GET", f"/admin/v2/namespaces/{namespace}/isAllowAutoUpdateSchema").json() is False
    topic = f"persistent://{namespace}/items"
    admin.create_topic(topic)
    kind, body = wire.producer(topic, wire_schema(AVRO, NAME))
    assert "Schema not found and schema auto updating is disabled." in body.message
    assert admin.create_schema(topic, "AVRO", NAME) == 0  # the admin API still registers
    assert declare(wire, topic, NAME) == 0
    assert declare(wire, topic, NAME_NOTE) == REFUSED


def test_admin_schema_paths(admin: PulsarAdmin, broker: Any, topic_name: str) -> None:
    path = f"/admin/v2/schemas/public/default/{topic_name}"
    missing = broker.admin("GET", path + "/schema")
    assert (missing.status_code, missing.json()) == (404, {"reason": "Schema not found"})
    assert broker.admin("GET", path + "/schemas").json() == {"getSchemaResponses": []}
    posted = broker.admin("POST", path + "/schema", json={"type": "AVRO", "schema": NAME, "properties": {"a": "b"}})
    assert (posted.status_code, posted.json()) == (200, {"version": {"version": 0}})
    latest = broker.admin("GET", path + "/schema").json()
    assert set(latest) == {"version", "type", "timestamp", "data", "properties"}
    assert (latest["version"], latest["type"], latest["data"], latest["properties"]) == (0, "AVRO", NAME, {"a": "b"})
    assert broker.admin("GET", path + "/schema/0").json() == latest
    assert broker.admin("GET", path + "/schema/3").status_code == 404
    assert admin.create_schema(topic_name, "AVRO", NAME_NOTE) == 1
    assert [doc["version"] for doc in admin.get_all_schemas(topic_name)] == [0, 1]
    assert admin.get_schema(topic_name, 0) == latest
    refused = broker.admin("POST", path + "/schema", json={"type": "AVRO", "schema": NAME_INT, "properties": {}})
    assert refused.status_code == 409
    with pytest.raises(AdminConflictError):
        admin.create_schema(topic_name, "STRING", "")
    invalid = broker.admin("POST", path + "/schema", json={"type": "AVRO", "schema": "not avro", "properties": {}})
    assert invalid.status_code == 422
    fits = broker.admin("POST", path + "/compatibility", json={"type": "AVRO", "schema": NAME, "properties": {}})
    assert (fits.status_code, fits.json()) == (202, {"schemaCompatibilityStrategy": "FULL", "compatibility": True})
    assert broker.admin("POST", path + "/compatibility", json={"type": "AVRO", "schema": NAME_INT}).status_code == 500
    # Deleting appends a marker version; the history before it no longer counts.
    assert admin.delete_schema(topic_name) == 2
    assert broker.admin("GET", path + "/schema").status_code == 404
    assert broker.admin("GET", path + "/schema/0").status_code == 404
    assert admin.get_all_schemas(topic_name) == []
    assert admin.create_schema(topic_name, "AVRO", NAME_INT) == 3  # nothing left to be incompatible with
    with pytest.raises(AdminNotFoundError):
        admin.get_schema(topic_name, 1)


def compact(definition: str) -> str:
    """A JSON definition without spaces, as Pulsar writes the sides of a posted KEY_VALUE schema."""
    return json.dumps(json.loads(definition), separators=(",", ":"))


# A key/value schema with a STRING key and an Avro ``Item`` value, as the Java client declares it.
KV_PROPERTIES = {
    "key.schema.name": "", "key.schema.type": "STRING", "key.schema.properties": "{}",
    "value.schema.name": "Item", "value.schema.type": "AVRO", "value.schema.properties": "{}",
    "kv.encoding.type": "SEPARATED",
}


def test_key_value_schemas_through_the_admin_api(broker: Any, wire: WireSession, topic: str) -> None:
    """A KEY_VALUE schema reads and posts as the JSON of its two definitions ("" for the STRING key),
    and is kept in the binary form producers declare."""
    assert declare(wire, topic, pack(b"", compact(NAME).encode()), KEY_VALUE, KV_PROPERTIES) == 0
    path = f"/admin/v2/schemas/{topic.removeprefix('persistent://')}/schema"
    document = broker.admin("GET", path).json()
    expected = ("KEY_VALUE", f'{{"key":"","value":{compact(NAME)}}}', KV_PROPERTIES)
    assert (document["type"], document["data"], document["properties"]) == expected

    def post(value: str, key: Any = "") -> Any:
        definition = json.dumps({"key": key, "value": json.loads(value)})
        return broker.admin("POST", path, json={"type": "KEY_VALUE", "schema": definition, "properties": KV_PROPERTIES})

    assert post(NAME).json() == {"version": {"version": 0}}  # the producer's schema again
    assert post(NAME_NOTE).json() == {"version": {"version": 1}}
    assert wire.get_schema(topic).schema.schema_data == pack(b"", compact(NAME_NOTE).encode())
    assert post(NAME_INT).status_code == 409  # the value side is checked as Avro
    assert post(NAME, key="abc").status_code == 422  # a STRING key has no definition
    assert declare(wire, topic, pack(b"", compact(NAME_NOTE).encode()), KEY_VALUE, KV_PROPERTIES) == 1


TIMESTAMP = json.dumps(schema_definition(timestamp_pb2.Timestamp.DESCRIPTOR))
DURATION = json.dumps(schema_definition(duration_pb2.Duration.DESCRIPTOR))


@pytest.mark.parametrize(("strategy", "versions"), [("UNDEFINED", [0, REFUSED, 0]), ("ALWAYS_COMPATIBLE", [0, 1, 0])])
def test_a_protobuf_native_schema_keeps_its_root_message(admin: PulsarAdmin, wire: WireSession, strategy: str, versions: list[Any]) -> None:
    """Pulsar's default PROTOBUF_NATIVE check: the root message may change only under ALWAYS_COMPATIBLE."""
    topic = f"persistent://{strategy_namespace(admin, strategy)}/ticks"
    assert [declare(wire, topic, d, PROTOBUF_NATIVE) for d in (TIMESTAMP, DURATION, TIMESTAMP)] == versions


def test_a_protobuf_native_definition_must_build_its_root_message(broker: Any, wire: WireSession, topic: str) -> None:
    broken = json.dumps({**json.loads(TIMESTAMP), "rootMessageTypeName": "google.protobuf.Nope"})
    assert declare(wire, topic, broken, PROTOBUF_NATIVE) == REFUSED
    path = f"/admin/v2/schemas/{topic.removeprefix('persistent://')}/schema"
    assert broker.admin("POST", path, json={"type": "PROTOBUF_NATIVE", "schema": "{}", "properties": {}}).status_code == 422


def test_strategy_policy_paths(admin: PulsarAdmin, broker: Any, topic_name: str) -> None:
    namespace = strategy_namespace(admin, "UNDEFINED")
    admin.create_topic(f"persistent://{namespace}/{topic_name}")
    path = f"/admin/v2/persistent/{namespace}/{topic_name}/schemaCompatibilityStrategy"
    unset = broker.admin("GET", path)
    assert (unset.status_code, unset.content) == (200, b"")
    assert broker.admin("GET", path, params={"applied": "true"}).json() == "FULL"
    admin.set_namespace_schema_compatibility_strategy(namespace, "BACKWARD")
    assert broker.admin("GET", f"/admin/v2/namespaces/{namespace}").json()["schema_compatibility_strategy"] == "BACKWARD"
    assert broker.admin("PUT", path, json="FORWARD").status_code == 204
    assert broker.admin("GET", path).json() == "FORWARD"
    assert broker.admin("DELETE", path).status_code == 204
    assert broker.admin("GET", path, params={"applied": "true"}).json() == "BACKWARD"
    assert broker.admin("GET", f"/admin/v2/persistent/{namespace}/missing/schemaCompatibilityStrategy").status_code == 404


def test_partitions_share_the_schema_of_their_topic(admin: PulsarAdmin, wire: WireSession, topic: str) -> None:
    admin.create_partitioned_topic(topic, 2)
    assert declare(wire, f"{topic}-partition-0", NAME) == 0
    assert declare(wire, f"{topic}-partition-1", NAME_NOTE) == 1
    for name in (topic, f"{topic}-partition-0", f"{topic}-partition-1"):
        assert wire.get_schema(name).schema.schema_data.decode() == NAME_NOTE
    assert [doc["version"] for doc in admin.get_all_schemas(topic)] == [0, 1]
    missing = wire.get_or_create_schema(topic, wire_schema(AVRO, NAME))  # the partitioned topic itself is no topic
    assert missing.error_code == ServerError.TopicNotFound


def test_deleting_a_topic_deletes_its_schema(admin: PulsarAdmin, wire: WireSession, topic: str) -> None:
    assert [declare(wire, topic, d) for d in (NAME, NAME_NOTE)] == [0, 1]
    admin.delete_topic(topic, force=True)
    assert wire.get_schema(topic).error_code == ServerError.TopicNotFound
    assert admin.get_all_schemas(topic) == []
    assert declare(wire, topic, NAME_INT) == 0  # a new topic, a new history
    partitioned = topic + "-partitioned"
    admin.create_partitioned_topic(partitioned, 2)
    assert declare(wire, f"{partitioned}-partition-0", NAME) == 0
    admin.delete_partitioned_topic(partitioned, force=True)
    assert admin.get_all_schemas(partitioned) == []


@pytest.mark.embedded_only
def test_the_registry_survives_a_restart(broker_factory: Any) -> None:
    """Our broker's own storage: the versions, a deletion marker and the strategy policy are on disk."""
    process = broker_factory()
    topic = "persistent://public/default/kept"
    with WireSession(process.service_url) as wire:
        assert [declare(wire, topic, d) for d in (NAME, NAME_NOTE)] == [0, 1]
    with PulsarAdmin(process.web_url) as admin:
        admin.set_namespace_schema_compatibility_strategy("public/default", "BACKWARD")
        deleted = "persistent://public/default/deleted"
        admin.create_schema(deleted, "STRING", "")
        assert admin.delete_schema(deleted) == 1
    process.restart()
    with WireSession(process.service_url) as wire, PulsarAdmin(process.web_url) as admin:
        assert wire.get_schema(topic).schema_version == (1).to_bytes(8, "big")
        assert wire.get_schema(topic, 0).schema.schema_data.decode() == NAME
        assert admin.namespace_schema_compatibility_strategy("public/default") == "BACKWARD"
        assert declare(wire, topic, NAME_COUNT) == REFUSED  # BACKWARD, still
        assert declare(wire, topic, NAME) == 0
        assert admin.get_all_schemas("persistent://public/default/deleted") == []
        assert admin.create_schema("persistent://public/default/deleted", "STRING", "") == 2
