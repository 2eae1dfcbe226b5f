"""The schema registry: the schema versions of every topic, kept durably, as Pulsar keeps them.

Schemas are keyed as Pulsar keys them, ``tenant/namespace/topic`` of the base topic, so every
partition of a partitioned topic shares one. Versions count 0, 1, 2... per topic and go on the
wire as Pulsar's ``LongSchemaVersion``: 8 bytes, a big-endian long. Registering a definition a
version already has gives that version back. Deleting a schema through the admin API appends a
deletion marker (a version of its own); the versions before it no longer count, and the next
schema starts afresh after it. Deleting the topic drops the whole history.

A producer's schema is registered after the compatibility check (:meth:`add_schema`); a consumer's
is registered only while its topic is idle and otherwise checked the way Pulsar checks readers
(:meth:`check_consumer`).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from airflow_pulsar.client.protocol.PulsarApi_pb2 import KeyValue as KeyValuePb
from airflow_pulsar.client.protocol.PulsarApi_pb2 import Schema as SchemaPb
from airflow_pulsar.client.schema.info import SchemaType
from airflow_pulsar.client.topic_name import TopicName

from .schema_compatibility import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    SchemaCompatibilityStrategy,
    SchemaData,
    check_compatible,
    check_with_all,
    check_with_latest,
    validate,
)
from .storage import Storage

__all__ = ["SchemaRegistry", "StoredSchema", "schema_from_wire", "schema_id", "schema_to_wire", "version_bytes", "version_from_bytes"]

_VERSION = struct.Struct(">q")
# The wire's AutoConsume type; every other wire type number is the SchemaType's own.
_WIRE_AUTO_CONSUME = 21


def schema_id(topic: TopicName) -> str:
    """Pulsar's schema name of a topic: ``tenant/namespace/topic`` of the base (partitioned) topic."""
    base = topic.base
    return f"{base.tenant}/{base.namespace}/{base.local_name}"


def version_bytes(version: int) -> bytes:
    """A schema version as Pulsar sends it: a big-endian long, 8 bytes."""
    return _VERSION.pack(version)


def version_from_bytes(data: bytes) -> int:
    """The version 8 wire bytes carry (the first 8, as Pulsar reads them); ValueError when fewer."""
    if len(data) < _VERSION.size:
        raise ValueError(f"a schema version is {_VERSION.size} bytes (a big-endian long), got {len(data)}")
    return int(_VERSION.unpack_from(data)[0])


def schema_from_wire(proto: SchemaPb) -> SchemaData:
    """The schema a PRODUCER, SUBSCRIBE or GET_OR_CREATE_SCHEMA carries; InvalidSchemaError for an unknown type."""
    try:
        kind = SchemaType.AUTO_CONSUME if proto.type == _WIRE_AUTO_CONSUME else SchemaType(proto.type)
    except ValueError:
        raise InvalidSchemaError(f"unknown schema type {proto.type}") from None
    return SchemaData(kind, proto.schema_data, {pair.key: pair.value for pair in proto.properties})


def schema_to_wire(sid: str, schema: SchemaData) -> SchemaPb:
    """The ``Schema`` of a GET_SCHEMA answer: named by the schema id, as Pulsar names it."""
    properties = [KeyValuePb(key=key, value=value) for key, value in sorted(schema.properties.items())]
    return SchemaPb(name=sid, schema_data=schema.data, type=SchemaPb.Type.ValueType(max(int(schema.schema_type), 0)), properties=properties)


@dataclass(frozen=True)
class StoredSchema:
    """One version of a topic's schema: a schema, or (``deleted``) the marker of a deletion."""

    version: int
    schema: SchemaData
    timestamp: int
    deleted: bool = False


class SchemaRegistry:
    """Every topic's schema versions, in memory and in the storage."""

    def __init__(self, storage: Storage):
        self._storage = storage
        self._schemas: dict[str, list[StoredSchema]] = {}

    def load(self) -> None:
        """Read every stored version."""
        self._schemas = {}
        for sid, version, kind, data, properties, timestamp, deleted in self._storage.load_schemas():
            schema = SchemaData(SchemaType(kind), data, properties)
            self._schemas.setdefault(sid, []).append(StoredSchema(version, schema, timestamp, deleted))

    # ---- reading ----

    def latest(self, sid: str) -> StoredSchema | None:
        """The newest version, a deletion marker included (Pulsar's GET_SCHEMA answers with it)."""
        history = self._schemas.get(sid)
        return history[-1] if history else None

    def versions(self, sid: str) -> list[StoredSchema]:
        """The versions that count: those after the latest deletion, oldest first."""
        history = self._schemas.get(sid, [])
        for index in range(len(history) - 1, -1, -1):
            if history[index].deleted:
                return history[index + 1 :]
        return list(history)

    def current(self, sid: str) -> StoredSchema | None:
        """The latest schema, None when there is none (or it was deleted)."""
        versions = self.versions(sid)
        return versions[-1] if versions else None

    def version(self, sid: str, version: int) -> StoredSchema | None:
        """One version that counts, None when there is no such version."""
        return next((stored for stored in self.versions(sid) if stored.version == version), None)

    def find_version(self, sid: str, schema: SchemaData) -> int | None:
        """The version that already has ``schema``'s definition, if any."""
        for stored in self.versions(sid):
            if stored.schema.same_definition(schema):
                return stored.version
        return None

    # ---- checking ----

    def check_compatible(self, sid: str, schema: SchemaData, strategy: SchemaCompatibilityStrategy) -> None:
        """IncompatibleSchemaError unless a producer could register ``schema`` under ``strategy``."""
        check_compatible([stored.schema for stored in self.versions(sid)], schema, strategy)

    def check_consumer(self, sid: str, schema: SchemaData, strategy: SchemaCompatibilityStrategy) -> None:
        """Whether a consumer may read the topic with ``schema``, as Pulsar checks readers: under
        BACKWARD, FORWARD, FORWARD_TRANSITIVE and FULL it must read the latest version; under the
        other strategies it is checked against every version. LookupError when the topic has no schema."""
        if strategy == SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE:
            return
        versions = [stored.schema for stored in self.versions(sid)]
        if not versions:
            raise LookupError("Topic does not have schema to check")
        if strategy in _READ_LATEST:
            check_with_latest(versions[-1], schema, SchemaCompatibilityStrategy.BACKWARD)
        else:
            check_with_all(versions, schema, strategy)

    # ---- changing ----

    async def add_schema(
        self, sid: str, schema: SchemaData, strategy: SchemaCompatibilityStrategy, allow_auto_update: bool = True
    ) -> int:
        """The version of ``schema``: an existing one with its definition, else a new one if the
        strategy allows it (IncompatibleSchemaError otherwise). With auto update off (the
        namespace's ``isAllowAutoUpdateSchema``), only an existing version is accepted."""
        found = self.find_version(sid, schema)
        if found is not None:
            return found
        if not allow_auto_update:
            raise IncompatibleSchemaError("Schema not found and schema auto updating is disabled.")
        validate(schema)
        self.check_compatible(sid, schema, strategy)
        return await self._append(sid, schema, deleted=False)

    async def delete(self, sid: str) -> int:
        """Delete the schema as the admin API does: append a deletion marker; its version."""
        return await self._append(sid, SchemaData(SchemaType.NONE, b""), deleted=True)

    async def drop(self, sid: str) -> None:
        """Forget every version (the topic is deleted)."""
        if self._schemas.pop(sid, None) is not None:
            await self._storage.delete_schemas(sid)

    async def _append(self, sid: str, schema: SchemaData, deleted: bool) -> int:
        # Taken before the write is awaited, so two registrations never share a version.
        history = self._schemas.setdefault(sid, [])
        stored = StoredSchema(history[-1].version + 1 if history else 0, schema, int(time.time() * 1000), deleted)
        history.append(stored)
        await self._storage.save_schema(
            sid, stored.version, int(schema.schema_type), schema.data, dict(schema.properties), stored.timestamp, deleted
        )
        return stored.version


_READ_LATEST = frozenset(
    {
        SchemaCompatibilityStrategy.BACKWARD,
        SchemaCompatibilityStrategy.FORWARD,
        SchemaCompatibilityStrategy.FORWARD_TRANSITIVE,
        SchemaCompatibilityStrategy.FULL,
    }
)
