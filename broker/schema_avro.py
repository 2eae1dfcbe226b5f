"""Avro schema resolution, as the Avro specification defines it: whether data written with one
schema (the writer's) can be read with another (the reader's).

Pulsar's registry decides the compatibility of AVRO and JSON schemas (a JSON schema's definition
is an Avro schema too) with Avro's own reader/writer check, so this is the rule set the strategies
are built on: BACKWARD asks whether the new schema reads the old data, FORWARD whether the old
schemas read the new data. The rules are the specification's "Schema Resolution" section:
promotions (int to long, float or double; long to float or double; float to double; string and
bytes both ways), records matched by name (or a reader alias) and their fields by name (or a
reader field's alias), a reader field missing from the writer needing a default, enum symbols
the reader lacks needing a reader default, unions resolved branch by branch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException

__all__ = ["AvroSchema", "AvroSchemaError", "parse_avro", "read_error"]

# Writer type -> the reader types it is promoted to.
_PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}
_NAMED = ("record", "error", "enum", "fixed")


class AvroSchemaError(ValueError):
    """A definition that is not an Avro schema."""


@dataclass(frozen=True)
class AvroSchema:
    """A parsed Avro schema (names made full, as fastavro gives them) and its named types."""

    root: Any
    names: dict[str, dict[str, Any]]


def parse_avro(definition: bytes | str) -> AvroSchema:
    """Parse an Avro schema's JSON text; AvroSchemaError saying why it is not one."""
    try:
        parsed = fastavro.parse_schema(json.loads(definition), _write_hint=False)
    except (ValueError, TypeError, KeyError, SchemaParseException) as exc:
        raise AvroSchemaError(f"not an Avro schema: {exc}") from None
    names: dict[str, dict[str, Any]] = {}
    _collect_names(parsed, names)
    return AvroSchema(parsed, names)


def read_error(reader: AvroSchema, writer: AvroSchema) -> str | None:
    """Why data written with ``writer`` cannot be read with ``reader``; None when it can."""
    return _Resolution(reader.names, writer.names).check(reader.root, writer.root, "")


def _collect_names(schema: Any, names: dict[str, dict[str, Any]]) -> None:
    if isinstance(schema, list):
        for branch in schema:
            _collect_names(branch, names)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in _NAMED:
            names[schema["name"]] = schema
        if kind in ("record", "error"):
            for field in schema["fields"]:
                _collect_names(field["type"], names)
        elif kind == "array":
            _collect_names(schema["items"], names)
        elif kind == "map":
            _collect_names(schema["values"], names)
        elif isinstance(kind, (dict, list)):
            _collect_names(kind, names)


def _short(full_name: str) -> str:
    return full_name.rsplit(".", 1)[-1]


class _Resolution:
    """One reader/writer check: both sides' named types, and the named pairs already on the path
    (a recursive type is taken as readable where it refers back to itself)."""

    def __init__(self, reader_names: dict[str, dict[str, Any]], writer_names: dict[str, dict[str, Any]]):
        self._reader_names = reader_names
        self._writer_names = writer_names
        self._on_path: set[tuple[str, str]] = set()

    def _resolve(self, schema: Any, names: dict[str, dict[str, Any]]) -> Any:
        if isinstance(schema, str) and schema in names:
            return names[schema]
        if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
            return self._resolve(schema["type"], names)
        if isinstance(schema, dict) and schema.get("type") in names:
            return names[schema["type"]]
        return schema

    @staticmethod
    def _kind(schema: Any) -> str:
        if isinstance(schema, list):
            return "union"
        if isinstance(schema, dict):
            kind = schema["type"]
            return "record" if kind == "error" else str(kind)
        return str(schema)

    def check(self, reader: Any, writer: Any, path: str) -> str | None:
        reader = self._resolve(reader, self._reader_names)
        writer = self._resolve(writer, self._writer_names)
        reader_kind, writer_kind = self._kind(reader), self._kind(writer)
        where = f"at {path}: " if path else ""
        if writer_kind == "union":
            for branch in writer:
                error = self.check(reader, branch, path)
                if error is not None:
                    return error
            return None
        if reader_kind == "union":
            if any(self.check(branch, writer, path) is None for branch in reader):
                return None
            return f"{where}no branch of the reader's union {self._describe(reader)} reads the writer's {self._describe(writer)}"
        if reader_kind != writer_kind:
            if reader_kind in _PROMOTIONS.get(writer_kind, ()):
                return None
            return f"{where}the writer's {self._describe(writer)} cannot be read as {self._describe(reader)}"
        if reader_kind in ("record", "enum", "fixed"):
            if not self._same_name(reader, writer):
                return f"{where}the writer's {reader_kind} {writer['name']} does not match the reader's {reader['name']}"
            pair = (reader["name"], writer["name"])
            if pair in self._on_path:
                return None
            self._on_path.add(pair)
            try:
                return getattr(self, f"_{reader_kind}")(reader, writer, path or _short(reader["name"]))
            finally:
                self._on_path.discard(pair)
        if reader_kind == "array":
            return self.check(reader["items"], writer["items"], f"{path}[]")
        if reader_kind == "map":
            return self.check(reader["values"], writer["values"], f"{path}{{}}")
        return None

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> str | None:
        written = {field["name"]: field for field in writer["fields"]}
        for field in reader["fields"]:
            names = [field["name"], *field.get("aliases", ())]
            source = next((written[name] for name in names if name in written), None)
            if source is None:
                if "default" not in field:
                    return (
                        f"at {path}: the reader's field {field['name']!r} has no default value "
                        "and the writer's record has no such field"
                    )
                continue
            error = self.check(field["type"], source["type"], f"{path}.{field['name']}")
            if error is not None:
                return error
        return None

    @staticmethod
    def _enum(reader: dict[str, Any], writer: dict[str, Any], path: str) -> str | None:
        missing = [symbol for symbol in writer["symbols"] if symbol not in reader["symbols"]]
        if missing and "default" not in reader:
            return f"at {path}: the reader's enum has no symbol {missing[0]!r} and no default"
        return None

    @staticmethod
    def _fixed(reader: dict[str, Any], writer: dict[str, Any], path: str) -> str | None:
        if reader["size"] != writer["size"]:
            return f"at {path}: the writer's fixed size {writer['size']} is not the reader's {reader['size']}"
        return None

    @staticmethod
    def _same_name(reader: dict[str, Any], writer: dict[str, Any]) -> bool:
        """Avro's rule: the same unqualified name, or the writer's full name among the reader's aliases."""
        aliases = {alias for alias in reader.get("aliases", ())} | {_short(a) for a in reader.get("aliases", ())}
        return _short(reader["name"]) == _short(writer["name"]) or writer["name"] in aliases

    @staticmethod
    def _describe(schema: Any) -> str:
        if isinstance(schema, list):
            return "[" + ", ".join(_Resolution._describe(branch) for branch in schema) + "]"
        if isinstance(schema, dict):
            kind = schema["type"]
            return f"{kind} {schema['name']}" if kind in _NAMED else str(kind)
        return str(schema)
