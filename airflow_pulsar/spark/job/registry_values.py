"""Message values decoded on the executors with the schema their topic registered (``value_format="schema"``).

- AVRO: the messages of a batch are grouped by the schema version they were written with; each
  group is decoded with that version (:mod:`.avro_decode`, vectorized) and resolved to the newest
  version's columns (:mod:`.avro_resolve`), so a column added since is null (or its default) in
  older messages. Versions other than the newest are asked of the broker (GET_SCHEMA) once per
  worker process. A value that is not one datum of its version keeps its bytes, base64-encoded,
  in ``_corrupt_record``.
- JSON: the values are parsed together by pyarrow's JSON reader into the newest version's
  columns (JSON names its fields: an older message lacks the new ones); dates and timestamps are
  numbers, as Pulsar's JSON schemas write them. A value that does not parse keeps its text in
  ``_corrupt_record``.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_pulsar.client.schema import SchemaSource, SchemaType, schema_version_number

from .avro_decode import decode_datums, interleave
from .avro_resolve import conform
from .avro_types import parse_definition
from .columns import CORRUPT_RECORD, ValueDecoder, decode_json, json_parse_schema
from .topic_schema import AVRO, TopicSchema

# A record definition by schema version.
WriterSchemas = Callable[[int], dict[str, Any]]

# Writer schemas fetched by this worker process: (client id, topic, version) -> record definition.
_fetched: dict[tuple[int, str, int], dict[str, Any]] = {}
_fetching = threading.Lock()


def registry_decoder(schema: TopicSchema, fields: pa.Schema, client: SchemaSource, topic: str) -> ValueDecoder:
    """The decoder of ``topic``'s values into ``fields`` (the row schema's value fields, see
    ``columns.value_fields``), reading older schema versions through ``client``."""
    if schema.kind == AVRO:
        return AvroValues(schema, fields, lambda version: writer_schema(client, topic, version))
    return RegistryJsonValues(schema, fields)


def writer_schema(client: SchemaSource, topic: str, version: int) -> dict[str, Any]:
    """The record definition ``topic`` registered as ``version``, asked of the broker once per process."""
    key = (id(client), topic, version)
    with _fetching:
        found = _fetched.get(key)
        if found is None:
            info = client.get_schema_info(topic, version)
            if info.schema_type() != SchemaType.AVRO:
                raise ValueError(f"version {version} of the schema of {topic} is {info.schema_type().name}, not AVRO")
            found = _fetched[key] = parse_definition(info.schema())
    return found


class AvroValues:
    """Avro values, each read with its schema version and resolved to the newest."""

    versioned = True

    def __init__(self, schema: TopicSchema, fields: pa.Schema, writers: WriterSchemas) -> None:
        self.schema = schema
        self.fields = fields
        self.target = pa.struct(list(fields))
        self._writers = writers

    def decode(self, values: pa.Array, versions: Sequence[str]) -> dict[str, pa.Array]:
        count = len(values)
        present = ~np.asarray(values.is_null())  # a null value (a tombstone) has no fields
        distinct = set(versions)
        if len(distinct) == 1:  # the usual batch: one version
            groups = [(distinct.pop(), np.flatnonzero(present))]
        else:  # which version each message has, dictionary-encoded in C
            encoded = pa.array(versions, pa.string()).dictionary_encode()
            version_of = np.asarray(encoded.indices)
            groups = [(raw, np.flatnonzero((version_of == code) & present)) for code, raw in enumerate(encoded.dictionary.to_pylist())]
        parts: list[tuple[np.ndarray, pa.Array]] = []
        bad_rows: list[np.ndarray] = []
        for raw_version, rows in groups:
            if not rows.size:
                continue
            version = schema_version_number(raw_version)
            writer = self.schema.record if version < 0 or version == self.schema.version else self._writers(version)
            datums, bad = decode_datums(values if rows.size == count else values.take(pa.array(rows)), writer)
            if bad.any():
                bad_rows.append(rows[bad])
                datums = datums.take(pa.array(np.arange(len(rows)), mask=bad))  # nothing of a bad datum is kept
            parts.append((rows, conform(datums, writer, self.schema.record, self.target)))
        struct = interleave(count, parts, self.target) if parts else pa.nulls(count, self.target)
        columns = dict(zip(self.fields.names, struct.flatten(), strict=True))
        columns[CORRUPT_RECORD] = _corrupt(values, np.concatenate(bad_rows) if bad_rows else np.empty(0, np.int64))
        return columns


class RegistryJsonValues:
    """JSON values of a registered JSON schema, parsed into its columns."""

    versioned = False

    def __init__(self, schema: TopicSchema, fields: pa.Schema) -> None:
        self.schema = schema
        self.fields = fields
        self.target = pa.struct(list(fields))
        self._parse = json_parse_schema(fields, numeric_times=True)

    def decode(self, values: pa.Array, versions: Sequence[str]) -> dict[str, pa.Array]:
        parsed, corrupt = decode_json(values, self._parse, self._parse)
        struct = pa.StructArray.from_arrays([parsed.column(name).combine_chunks() for name in self._parse.names], fields=list(self._parse))
        record = self.schema.record
        typed = conform(struct, record, record, self.target)
        columns = dict(zip(self.fields.names, typed.flatten(), strict=True))
        columns[CORRUPT_RECORD] = corrupt
        return columns


def _corrupt(values: pa.Array, rows: np.ndarray) -> pa.Array:
    """``_corrupt_record``: the base64 of the values at ``rows``, null elsewhere."""
    if not rows.size:
        return pa.nulls(len(values), pa.string())
    text: list[str | None] = [None] * len(values)
    for row in rows.tolist():  # only the bad ones: rare
        value = values[row].as_py()
        text[row] = base64.b64encode(value).decode("ascii") if value is not None else None
    return pa.array(text, pa.string())
