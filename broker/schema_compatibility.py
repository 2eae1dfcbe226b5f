"""Schema compatibility as Pulsar's registry decides it: the strategies and the checks by type.

A new schema is checked against the latest version (BACKWARD, FORWARD, FULL) or against every
version since the last deletion (the ``_TRANSITIVE`` ones). A change of type is refused unless
the strategy is ALWAYS_COMPATIBLE; the same definition again is always compatible with the latest
version. AVRO and JSON definitions are Avro schemas and are checked by Avro resolution
(:mod:`.schema_avro`): BACKWARD means the new schema reads data written with the old one, FORWARD
the old ones read data written with the new one, FULL both. A KEY_VALUE schema is checked side
by side, each side by its own type. A PROTOBUF_NATIVE schema may change anything but its root
message's full name under BACKWARD, FORWARD and FULL (transitive or not), as Pulsar's default
``ProtobufNativeSchemaCompatibilityCheck`` decides. The other types (STRING and the primitives)
have no definition to evolve, and only ALWAYS_INCOMPATIBLE refuses a new one, as with Pulsar's
default check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from airflow_pulsar.client.schema.info import SchemaType
from airflow_pulsar.client.schema.key_value import unpack

from .schema_avro import AvroSchema, AvroSchemaError, parse_avro, read_error
from .schema_protobuf import ProtobufNativeSchemaError, root_message_name

__all__ = [
    "DEFAULT_STRATEGY",
    "IncompatibleSchemaError",
    "InvalidSchemaError",
    "PRIMITIVE_TYPES",
    "SchemaCompatibilityStrategy",
    "SchemaData",
    "check_compatible",
    "check_with_all",
    "check_with_latest",
    "key_value_sides",
    "validate",
]


class SchemaCompatibilityStrategy(Enum):
    """Pulsar's ``SchemaCompatibilityStrategy`` names; UNDEFINED defers to the next level's."""

    UNDEFINED = "UNDEFINED"
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        """Whether a new schema is checked against every version, not only the latest."""
        return self.name.endswith("_TRANSITIVE")

    @classmethod
    def parse(cls, value: object) -> SchemaCompatibilityStrategy:
        """The strategy named ``value``; ValueError naming the valid ones otherwise."""
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(strategy.value for strategy in cls)
            raise ValueError(f"schema compatibility strategy must be one of {names}; got {value!r}") from None


# Pulsar's broker default (broker.conf ``schemaCompatibilityStrategy``).
DEFAULT_STRATEGY = SchemaCompatibilityStrategy.FULL
# The types whose definition is an Avro schema.
_AVRO_TYPES = (SchemaType.AVRO, SchemaType.JSON)
# Pulsar's primitive types (``SchemaType.isPrimitiveType``): none has a definition of its own.
PRIMITIVE_TYPES = frozenset(
    {
        SchemaType.NONE, SchemaType.STRING, SchemaType.BYTES, SchemaType.BOOLEAN, SchemaType.INT8,
        SchemaType.INT16, SchemaType.INT32, SchemaType.INT64, SchemaType.FLOAT, SchemaType.DOUBLE,
        SchemaType.DATE, SchemaType.TIME, SchemaType.TIMESTAMP, SchemaType.INSTANT, SchemaType.LOCAL_DATE,
        SchemaType.LOCAL_TIME, SchemaType.LOCAL_DATE_TIME,
    }
)


class IncompatibleSchemaError(Exception):
    """A schema the strategy refuses; the message says why."""


class InvalidSchemaError(ValueError):
    """A definition that is not what its type declares (an AVRO schema that is no Avro schema)."""


@dataclass(frozen=True)
class SchemaData:
    """A schema as the registry keeps it: its type, definition bytes and properties."""

    schema_type: SchemaType
    data: bytes
    properties: Mapping[str, str] = field(default_factory=dict)

    def same_definition(self, other: SchemaData) -> bool:
        """Whether ``other`` is this schema again: the same type and definition (Avro definitions
        compared parsed, as Pulsar compares them, so spacing does not matter)."""
        if self.schema_type != other.schema_type:
            return False
        if self.data == other.data:
            return True
        if self.schema_type in _AVRO_TYPES:
            try:
                return bool(json.loads(self.data) == json.loads(other.data))
            except ValueError:
                return False
        return False


def validate(schema: SchemaData) -> None:
    """Refuse (InvalidSchemaError) a definition that is not what its type declares, as Pulsar's
    schema data validators do before registering it: an AVRO (not a union), JSON or PROTOBUF
    definition that is no Avro schema (a JSON one may be any JSON object instead, an early JSON-schema
    form), a PROTOBUF_NATIVE one the root message cannot be built from, a STRING or primitive schema
    with a definition, and a KEY_VALUE schema with such a side."""
    kind = schema.schema_type
    if kind in (SchemaType.AVRO, SchemaType.JSON, SchemaType.PROTOBUF):
        try:
            parsed = parse_avro(schema.data)
        except AvroSchemaError:
            if kind == SchemaType.JSON and _is_json_object(schema.data):
                return
            raise InvalidSchemaError(f"Invalid schema definition data for {kind.name} schema") from None
        if kind == SchemaType.AVRO and isinstance(parsed.root, list):
            raise InvalidSchemaError("Avro schema typed [UNION] is not supported")
    elif kind == SchemaType.PROTOBUF_NATIVE:
        try:
            root_message_name(schema.data)
        except ProtobufNativeSchemaError as exc:
            raise InvalidSchemaError(str(exc)) from None
    elif kind == SchemaType.STRING:
        # The official Python client's older releases declared a string schema's definition as "null".
        if schema.data not in (b"", b"null"):
            raise InvalidSchemaError(f"Invalid schema definition data for string schema : '{schema.data.decode(errors='replace')}'")
    elif kind in PRIMITIVE_TYPES and kind not in (SchemaType.NONE, SchemaType.BYTES) and schema.data:
        raise InvalidSchemaError(
            "Invalid schema definition data for primitive schemas :"
            f"length of schema data should be zero, but {len(schema.data)} bytes is found"
        )
    elif kind == SchemaType.KEY_VALUE:
        for side in key_value_sides(schema):
            validate(side)


def check_compatible(versions: Sequence[SchemaData], new: SchemaData, strategy: SchemaCompatibilityStrategy) -> None:
    """Check ``new`` against the versions a producer's schema is checked against: every one for a
    transitive strategy, else the latest. ``versions`` run oldest first; none means compatible."""
    if not versions:
        return
    if strategy.transitive:
        check_with_all(versions, new, strategy)
    else:
        check_with_latest(versions[-1], new, strategy)


def check_with_latest(latest: SchemaData, new: SchemaData, strategy: SchemaCompatibilityStrategy) -> None:
    """IncompatibleSchemaError unless ``new`` may follow ``latest`` under ``strategy``."""
    if strategy == SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE:
        return
    _check_type(latest, new)
    if latest.data != new.data:
        _check_by_type([latest], new, strategy)


def check_with_all(versions: Sequence[SchemaData], new: SchemaData, strategy: SchemaCompatibilityStrategy) -> None:
    """IncompatibleSchemaError unless ``new`` may follow every one of ``versions`` under ``strategy``."""
    if strategy == SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE:
        return
    for version in versions:
        _check_type(version, new)
    _check_by_type(versions, new, strategy)


def _check_type(existing: SchemaData, new: SchemaData) -> None:
    if existing.schema_type != new.schema_type:
        raise IncompatibleSchemaError(
            f"Incompatible schema: exists schema type {existing.schema_type.name}, new schema type {new.schema_type.name}"
        )


def _check_by_type(versions: Sequence[SchemaData], new: SchemaData, strategy: SchemaCompatibilityStrategy) -> None:
    if new.schema_type == SchemaType.AVRO:
        _check_avro(versions, new, strategy)
    elif new.schema_type == SchemaType.JSON:
        _check_json(versions, new, strategy)
    elif new.schema_type == SchemaType.KEY_VALUE:
        _check_key_value(versions, new, strategy)
    elif new.schema_type == SchemaType.PROTOBUF_NATIVE:
        _check_protobuf_native(versions, new, strategy)
    elif strategy == SchemaCompatibilityStrategy.ALWAYS_INCOMPATIBLE:
        raise IncompatibleSchemaError("Schema compatibility strategy is ALWAYS_INCOMPATIBLE")


def _refusal(strategy: SchemaCompatibilityStrategy, reason: str) -> IncompatibleSchemaError:
    return IncompatibleSchemaError(f"Error during schema compatibility check with strategy {strategy.value}: {reason}")


def _check_avro(versions: Sequence[SchemaData], new: SchemaData, strategy: SchemaCompatibilityStrategy) -> None:
    try:
        written = [parse_avro(version.data) for version in versions]
        schema = parse_avro(new.data)
    except AvroSchemaError as exc:
        raise _refusal(strategy, str(exc)) from None
    _check_avro_parsed(written, schema, strategy)


def _check_avro_parsed(versions: Sequence[AvroSchema], new: AvroSchema, strategy: SchemaCompatibilityStrategy) -> None:
    name = strategy.name.removesuffix("_TRANSITIVE")
    if name not in ("BACKWARD", "FORWARD", "FULL"):  # ALWAYS_INCOMPATIBLE (or an unresolved UNDEFINED)
        raise _refusal(strategy, "no new schema is allowed")
    # Newest first, as Avro's validators report the first version that fails.
    for number, old in reversed(list(enumerate(versions))):
        which = "the latest schema" if len(versions) == 1 else f"schema {number} of {len(versions)} checked"
        if name in ("BACKWARD", "FULL") and (error := read_error(new, old)) is not None:
            raise _refusal(strategy, f"the new schema cannot read data written with {which}: {error}")
        if name in ("FORWARD", "FULL") and (error := read_error(old, new)) is not None:
            raise _refusal(strategy, f"{which} cannot read data written with the new schema: {error}")


def _check_protobuf_native(versions: Sequence[SchemaData], new: SchemaData, strategy: SchemaCompatibilityStrategy) -> None:
    """As Pulsar's default check: under BACKWARD, FORWARD and FULL (transitive or not) the root
    message keeps its full name, and nothing else is compared."""
    if strategy.name.removesuffix("_TRANSITIVE") not in ("BACKWARD", "FORWARD", "FULL"):
        raise _refusal(strategy, "no new schema is allowed")
    try:
        name = root_message_name(new.data)
        for version in versions:
            if (old := root_message_name(version.data)) != name:
                raise IncompatibleSchemaError(
                    f"Protobuf root message change is not allowed under the '{strategy.value}' strategy. "
                    f"Original message name: '{old}', new message name: '{name}'."
                )
    except ProtobufNativeSchemaError as exc:
        raise _refusal(strategy, str(exc)) from None


def _check_json(versions: Sequence[SchemaData], new: SchemaData, strategy: SchemaCompatibilityStrategy) -> None:
    """As Pulsar: Avro definitions on both sides are checked as Avro; an old definition that is no
    Avro schema (an early JSON-schema format) may be replaced; a new one must be a JSON object."""
    try:
        schema = parse_avro(new.data)
    except AvroSchemaError:
        if not _is_json_object(new.data):
            raise IncompatibleSchemaError("Unknown schema format") from None
        return
    written = []
    for version in versions:
        try:
            written.append(parse_avro(version.data))
        except AvroSchemaError:
            continue
    if written:
        _check_avro_parsed(written, schema, strategy)


def _is_json_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:
        return False


def _check_key_value(versions: Sequence[SchemaData], new: SchemaData, strategy: SchemaCompatibilityStrategy) -> None:
    new_key, new_value = key_value_sides(new)
    keys, values = [], []
    for version in versions:
        key, value = key_value_sides(version)
        if (key.schema_type, value.schema_type) != (new_key.schema_type, new_value.schema_type):
            raise IncompatibleSchemaError(
                "Key schemas or Value schemas are different schema type, from key schema type is "
                f"{key.schema_type.name} and to key schema is {new_key.schema_type.name}, from value schema is "
                f"{value.schema_type.name} and to value schema is {new_value.schema_type.name}"
            )
        keys.append(key)
        values.append(value)
    _check_by_type(keys, new_key, strategy)
    _check_by_type(values, new_value, strategy)


def key_value_sides(schema: SchemaData) -> tuple[SchemaData, SchemaData]:
    """The key and the value schema a KEY_VALUE schema packs (types named in its properties, BYTES
    when unnamed, as Pulsar decodes them); IncompatibleSchemaError when it packs no two schemas."""
    try:
        key, value = unpack(schema.data)
        sides = []
        for side, data in (("key", key), ("value", value)):
            type_name = schema.properties.get(f"{side}.schema.type", "BYTES")
            properties = json.loads(schema.properties.get(f"{side}.schema.properties") or "{}")
            sides.append(SchemaData(SchemaType[type_name], data or b"", properties))
    except (ValueError, KeyError) as exc:
        raise IncompatibleSchemaError(f"not a KEY_VALUE schema definition: {exc}") from None
    return sides[0], sides[1]
