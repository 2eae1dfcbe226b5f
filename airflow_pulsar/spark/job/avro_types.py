"""Spark column types of Avro definitions: what a topic's registered record schema becomes in a table.

Pulsar describes both its AVRO and its JSON schemas with an Avro record definition. Its fields
become columns, typed as Spark's own Avro support types them:

==========================================  ==================================================
Avro                                        Spark
==========================================  ==================================================
boolean, int, long, float, double           BOOLEAN, INT, BIGINT, FLOAT, DOUBLE
string (also ``uuid``), enum                STRING
bytes, fixed                                BINARY
record                                      STRUCT of its fields
array, map                                  ARRAY, MAP<STRING, ...>
union of ``null`` and one type              that type (every column is nullable)
union of int and long / float and double    BIGINT / DOUBLE
any other union                             STRUCT<member0, member1, ...>, one per non-null type
``date``                                    DATE
``timestamp-millis|micros|nanos``           TIMESTAMP
``local-timestamp-millis|micros|nanos``     TIMESTAMP_NTZ
``decimal`` (bytes or fixed)                DECIMAL(precision, scale)
==========================================  ==================================================

Other logical types keep their underlying type. A recursive record, a field of type ``null``
alone, or two fields whose names differ only in case (Spark's names are case-insensitive) cannot
be columns: ValueError names the field.
"""

from __future__ import annotations

import json
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

# An Avro type as fastavro's parse_schema(expand=True) leaves it: a primitive's name, a union's
# list of branches, or a complex type's dict.
Avro = Any

NULL = "null"
PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}
# Unions Spark's Avro support reads as one wider type.
_WIDENED = ({"int", "long"}, {"float", "double"})
# Timestamp logical types: (unit, whether they are UTC instants).
TIMESTAMPS = {
    "timestamp-millis": ("ms", True),
    "timestamp-micros": ("us", True),
    "timestamp-nanos": ("ns", True),
    "local-timestamp-millis": ("ms", False),
    "local-timestamp-micros": ("us", False),
    "local-timestamp-nanos": ("ns", False),
}
MAX_DECIMAL_PRECISION = 38


def parse_definition(definition: str | dict[str, Any]) -> dict[str, Any]:
    """A record definition (text or parsed JSON) with its named types expanded where they are used.

    ValueError when it is not JSON, not a valid Avro schema, or not a record.
    """
    try:
        body = json.loads(definition) if isinstance(definition, str) else definition
        parsed = fastavro.parse_schema(body, expand=True, _write_hint=False)
    except (ValueError, SchemaParseException, TypeError, KeyError) as error:
        raise ValueError(f"not a valid Avro schema definition: {error}") from None
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise ValueError(f"a schema with typed columns must be an Avro record, got {_kind(parsed)!r}")
    return parsed


def value_struct(record: dict[str, Any]) -> StructType:
    """The columns of a record's fields (see the module's table)."""
    struct = spark_type(record, record.get("name", "record"))
    assert isinstance(struct, StructType)
    return struct


def value_ddl(record: dict[str, Any]) -> str:
    """The columns of a record's fields as a DDL field list (``\\`id\\` BIGINT, \\`user\\` STRUCT<...>``)."""
    return ", ".join(f"{quoted(field.name)} {ddl_type(field.dataType)}" for field in value_struct(record).fields)


def ddl_type(kind: DataType) -> str:
    """A Spark type as DDL, field names quoted."""
    if isinstance(kind, StructType):
        return "STRUCT<" + ", ".join(f"{quoted(f.name)}: {ddl_type(f.dataType)}" for f in kind.fields) + ">"
    if isinstance(kind, ArrayType):
        return f"ARRAY<{ddl_type(kind.elementType)}>"
    if isinstance(kind, MapType):
        return f"MAP<{ddl_type(kind.keyType)}, {ddl_type(kind.valueType)}>"
    return kind.simpleString().upper()


def spark_type(avro: Avro, path: str) -> DataType:
    """The Spark type of an Avro type; ``path`` names the field in errors."""
    if isinstance(avro, list):
        return _union_type(avro, path)
    if isinstance(avro, str):
        if avro in PRIMITIVES:
            return PRIMITIVES[avro]
        if avro == NULL:
            raise ValueError(f"field {path!r} has the Avro type null alone: it cannot be a column")
        raise ValueError(f"field {path!r} refers to {avro!r}, a record that contains itself: a recursive type cannot be a column")
    logical = _logical_type(avro, path)
    if logical is not None:
        return logical
    kind = avro["type"]
    if kind == "record":
        fields = [StructField(field["name"], spark_type(field["type"], f"{path}.{field['name']}")) for field in avro["fields"]]
        _check_names(fields, path)
        return StructType(fields)
    if kind == "enum":
        return StringType()
    if kind == "fixed":
        return BinaryType()
    if kind == "array":
        return ArrayType(spark_type(avro["items"], f"{path}[]"))
    if kind == "map":
        return MapType(StringType(), spark_type(avro["values"], f"{path}{{}}"))
    return spark_type(kind, path)  # {"type": "long"} and the like


def union_branches(union: list[Avro]) -> list[Avro]:
    """The branches of a union other than ``null``."""
    return [branch for branch in union if branch != NULL]


def widened(union: list[Avro]) -> str | None:
    """``long`` or ``double`` for a union Spark reads as that one type, else None."""
    names = {branch for branch in union_branches(union) if isinstance(branch, str)}
    if len(names) == len(union_branches(union)) and len(names) > 1:
        for pair in _WIDENED:
            if names == pair:
                return "long" if "long" in pair else "double"
    return None


def type_key(avro: Avro) -> str:
    """What a union branch is matched by when a writer's union is read as a reader's: a named
    type's name, else the type's name."""
    if isinstance(avro, str):
        return avro
    if isinstance(avro, list):
        return "union"
    name = avro.get("name")
    # Unqualified: versions of a schema may move their named types to another namespace.
    return str(name).rpartition(".")[2] if name else str(avro["type"])


def logical(avro: Avro) -> str | None:
    """The logical type of an Avro type, if it has one."""
    return avro.get("logicalType") if isinstance(avro, dict) else None


def _union_type(union: list[Avro], path: str) -> DataType:
    branches = union_branches(union)
    if not branches:
        raise ValueError(f"field {path!r} has the Avro type null alone: it cannot be a column")
    if len(branches) == 1:
        return spark_type(branches[0], path)
    wide = widened(union)
    if wide is not None:
        return PRIMITIVES[wide]
    return StructType([StructField(f"member{i}", spark_type(branch, f"{path}.member{i}")) for i, branch in enumerate(branches)])


def _logical_type(avro: dict[str, Any], path: str) -> DataType | None:
    name, base = logical(avro), avro.get("type")
    if name == "date" and base == "int":
        return DateType()
    if name in TIMESTAMPS and base == "long":
        return TimestampType() if TIMESTAMPS[name][1] else TimestampNTZType()
    if name == "decimal" and base in ("bytes", "fixed"):
        precision, scale = avro.get("precision"), avro.get("scale", 0)
        if (
            not isinstance(precision, int)
            or not 0 < precision <= MAX_DECIMAL_PRECISION
            or not isinstance(scale, int)
            or not 0 <= scale <= precision
        ):
            raise ValueError(
                f"field {path!r} is a decimal of precision {precision!r} and scale {scale!r}: Spark holds precisions 1 to "
                f"{MAX_DECIMAL_PRECISION} with a scale from 0 to the precision"
            )
        return DecimalType(precision, scale)
    return None


def _check_names(fields: list[StructField], path: str) -> None:
    seen: dict[str, str] = {}
    for field in fields:
        other = seen.setdefault(field.name.lower(), field.name)
        if other != field.name:
            raise ValueError(f"record {path!r} has fields {other!r} and {field.name!r}: Spark column names ignore case, so they clash")


def quoted(name: str) -> str:
    """A name as Spark SQL quotes an identifier."""
    return "`" + name.replace("`", "``") + "`"


def _kind(avro: Avro) -> str:
    if isinstance(avro, dict):
        return str(avro.get("type"))
    return "union" if isinstance(avro, list) else str(avro)
