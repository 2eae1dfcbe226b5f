"""Values decoded with the schema version a message was written with, read as the newest version's columns.

This is Avro's schema resolution, done on whole Arrow arrays: record fields are matched by name
(or by the reader's aliases), a reader field the writer lacks takes its default (null when it has
none), a writer field the reader lacks is dropped, numbers are promoted (int to long, float to
double...), string and bytes read as each other, and a union branch is matched by its type's name.
The result has exactly the Arrow type Spark expects for the columns (``target``).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa

from .avro_types import TIMESTAMPS, Avro, logical, type_key, union_branches, widened


def conform(values: pa.Array, writer: Avro, reader: Avro, target: pa.DataType, path: str = "value") -> pa.Array:
    """``values`` (decoded with ``writer``) as values of ``reader``, of Arrow type ``target``."""
    writer, reader = _unwrap(writer), _unwrap(reader)
    if isinstance(reader, list) and widened(reader) is not None:  # int|long, float|double: one number
        return _leaf(values, reader, target)
    if isinstance(reader, list):  # a general union: a struct of members
        return _union(values, writer, reader, target, path)
    if isinstance(writer, list):
        if widened(writer) is None:
            raise ValueError(f"{path}: a union of {[type_key(b) for b in union_branches(writer)]} cannot be read as {type_key(reader)!r}")
        return _leaf(values, reader, target)
    if pa.types.is_struct(target):
        return _record(values, writer, reader, target, path)
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        items = conform(_list_values(values), writer["items"], reader["items"], target.value_type, f"{path}[]")
        return type(values).from_arrays(_offsets(values), items, type=target, mask=_nulls(values))
    if pa.types.is_map(target):
        keys, items = _map_children(values)
        items = conform(items, writer["values"], reader["values"], target.item_type, f"{path}{{}}")
        maps = pa.MapArray.from_arrays(_offsets(values), _leaf(keys, "string", target.key_type), items, type=target)
        return _null_where(maps, values)
    return _leaf(values, reader, target)


def _unwrap(avro: Avro) -> Avro:
    """A union of null and one type, as that type (every column is nullable)."""
    if isinstance(avro, list):
        branches = union_branches(avro)
        return branches[0] if len(branches) == 1 else avro
    return avro


def _record(values: pa.Array, writer: Avro, reader: Avro, target: pa.StructType, path: str) -> pa.Array:
    if not isinstance(writer, dict) or writer.get("type") != "record":
        raise ValueError(f"{path}: a {type_key(writer)!r} cannot be read as the record {type_key(reader)!r}")
    written = {field["name"]: (index, field["type"]) for index, field in enumerate(writer["fields"])}
    children = []
    for field, kind in zip(reader["fields"], target, strict=True):
        name = field["name"]
        source = next((written[alias] for alias in (name, *field.get("aliases", ())) if alias in written), None)
        if source is None:
            children.append(_default(field, kind.type, len(values), f"{path}.{name}"))
        else:
            children.append(conform(values.field(source[0]), source[1], field["type"], kind.type, f"{path}.{name}"))
    return pa.StructArray.from_arrays(children, fields=list(target), mask=_nulls(values))


def _union(values: pa.Array, writer: Avro, reader: list[Avro], target: pa.StructType, path: str) -> pa.Array:
    """A reader's general union (a struct of members) from a writer's union or from one type."""
    written = union_branches(writer) if isinstance(writer, list) else [writer]
    members = []
    for branch, member in zip(union_branches(reader), target, strict=True):
        match = next((index for index, kind in enumerate(written) if type_key(kind) == type_key(branch)), None)
        if match is None:
            members.append(pa.nulls(len(values), member.type))
            continue
        child = values.field(match) if isinstance(writer, list) else values
        members.append(conform(child, written[match], branch, member.type, f"{path}.{member.name}"))
    return pa.StructArray.from_arrays(members, fields=list(target), mask=_nulls(values))


def _default(field: dict[str, Any], target: pa.DataType, count: int, path: str) -> pa.Array:
    """A reader field the writer lacks: its default in every row (null without one)."""
    default = field.get("default")
    if default is None:
        return pa.nulls(count, target)
    if isinstance(field["type"], list):  # a union's default is of its first branch
        first = field["type"][0]
        kind = first if isinstance(first, str) else first.get("type")
    else:
        kind = field["type"] if isinstance(field["type"], str) else field["type"].get("type")
    if kind in ("bytes", "fixed") and isinstance(default, str):
        default = default.encode("latin-1")  # Avro writes a bytes default as one character per byte
    try:
        return pa.repeat(pa.scalar(default, target), count)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: the default {json.dumps(default)} cannot be a {target} value: {error}") from None


def _leaf(values: pa.Array, reader: Avro, target: pa.DataType) -> pa.Array:
    """A value of a primitive type, cast to the column's; text that is not UTF-8 gets U+FFFD, as
    bytes.decode(errors="replace") does. Dates and timestamps given as numbers (JSON's) count in
    the reader's logical type's unit."""
    if values.type == target:
        return values
    name = logical(reader)
    if pa.types.is_integer(values.type) and name in TIMESTAMPS:
        unit, utc = TIMESTAMPS[name]
        values = values.cast(pa.int64()).cast(pa.timestamp(unit, tz="UTC" if utc else None))
    elif pa.types.is_integer(values.type) and name == "date":
        values = values.cast(pa.int32()).cast(pa.date32())
    try:
        return values.cast(target)
    except pa.ArrowInvalid:
        if not pa.types.is_string(target):
            raise
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in values.to_pylist()], target)


def _nulls(values: pa.Array) -> pa.Array | None:
    return values.is_null() if values.null_count else None


def _null_where(array: pa.Array, like: pa.Array) -> pa.Array:
    """``array`` with nulls where ``like`` has them (pyarrow 15 builds no map with a mask)."""
    if not like.null_count:
        return array
    return array.take(pa.array(np.arange(len(array)), mask=np.asarray(like.is_null())))


def _offsets(values: pa.Array) -> pa.Array:
    """The offsets of a list or map array, from 0."""
    offsets = np.asarray(values.offsets)
    return pa.array((offsets - offsets[0]).astype(np.int32))


def _list_values(values: pa.Array) -> pa.Array:
    offsets = values.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    return values.values.slice(first, last - first)


def _map_children(values: pa.MapArray) -> tuple[pa.Array, pa.Array]:
    offsets = values.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    return values.keys.slice(first, last - first), values.items.slice(first, last - first)
