"""The rows an ingest batch writes: their schema, and Arrow record batches built from messages.

Every row is one message::

    key STRING, value BINARY | value STRING | <the JSON fields>, _corrupt_record STRING,
    topic STRING, partition INT,
    message_id STRUCT<ledger_id BIGINT, entry_id BIGINT, batch_index INT>,
    publish_time TIMESTAMP, event_time TIMESTAMP, properties MAP<STRING, STRING>,
    redelivery_count INT, batch_id STRING

With JSON values the value's fields (given as a DDL string) take the place of ``value``, and a
message that does not parse as a JSON object of those fields keeps its text in
``_corrupt_record`` (Spark's name for it) with the fields left null. With ``schema`` values the
fields of the topic's registered schema take that place, decoded by a :class:`ValueDecoder`
(:mod:`.registry_values`). ``batch_id`` comes last: it is the table's partition column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from airflow_pulsar.client import Message
from airflow_pulsar.client.entries import ReceivedEntry

from .entry_messages import EntryColumns, MessageColumns, message_columns
from .spec import VALUE_BYTES, VALUE_JSON, VALUE_SCHEMA, VALUE_STRING, check_value_schema

CORRUPT_RECORD = "_corrupt_record"
BATCH_ID = "batch_id"
MESSAGE_ID_DDL = "STRUCT<ledger_id: BIGINT, entry_id: BIGINT, batch_index: INT>"
_META_DDL = (
    f"topic STRING, partition INT, message_id {MESSAGE_ID_DDL}, publish_time TIMESTAMP, "
    f"event_time TIMESTAMP, properties MAP<STRING, STRING>, redelivery_count INT, {BATCH_ID} STRING"
)


def row_ddl(value_format: str, value_schema: str | None = None) -> str:
    """The DDL of the rows for a value format (JSON and schema values: with the value's fields, a
    DDL field list, in place of ``value``; for schema values without them when not known yet)."""
    if value_format == VALUE_BYTES:
        value = "value BINARY"
    elif value_format == VALUE_STRING:
        value = "value STRING"
    elif value_format == VALUE_JSON or (value_format == VALUE_SCHEMA and value_schema):
        check_value_schema(value_schema or "")
        value = f"{value_schema}, {CORRUPT_RECORD} STRING"
    elif value_format == VALUE_SCHEMA:
        value = f"{CORRUPT_RECORD} STRING"
    else:
        raise ValueError(f"unknown value format {value_format!r}")
    return f"key STRING, {value}, {_META_DDL}"


def json_parse_schema(target: pa.Schema, numeric_times: bool = False) -> pa.Schema:
    """The schema pyarrow's JSON reader parses with: dates are read as text and cast afterwards,
    or with ``numeric_times`` (JSON schemas of a registry, which write them as numbers) dates and
    timestamps are read as integers.

    Raises ValueError for types the reader cannot produce (maps)."""
    return pa.schema([pa.field(f.name, _parse_type(f.type, f.name, numeric_times), f.nullable) for f in target])


def _parse_type(kind: pa.DataType, name: str, numeric_times: bool) -> pa.DataType:
    if numeric_times and (pa.types.is_date(kind) or pa.types.is_timestamp(kind)):
        return pa.int64()
    if pa.types.is_date(kind):
        return pa.string()
    if pa.types.is_map(kind):
        raise ValueError(f"JSON field {name!r}: MAP types cannot be decoded from JSON; declare a STRUCT")
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _parse_type(f.type, f"{name}.{f.name}", numeric_times), f.nullable) for f in kind])
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        value = kind.value_field
        return pa.list_(pa.field(value.name, _parse_type(kind.value_type, name, numeric_times), value.nullable))
    return kind


class ValueDecoder(Protocol):
    """Turns message values into the value's columns and ``_corrupt_record``."""

    @property
    def versioned(self) -> bool:
        """Whether it reads each message's schema version."""
        ...

    def decode(self, values: pa.Array, versions: Sequence[str]) -> dict[str, pa.Array]:
        """The value columns (by name) and ``_corrupt_record`` of the values (a binary array, null
        for a null value); ``versions`` holds each message's ``schema_version()`` when the decoder
        is ``versioned``."""
        ...


class JsonValues:
    """JSON object values parsed into the fields of a DDL (``value_format="json"``)."""

    versioned = False

    def __init__(self, fields: pa.Schema) -> None:
        self.fields = fields
        self._parse = json_parse_schema(fields)

    def decode(self, values: pa.Array, versions: Sequence[str]) -> dict[str, pa.Array]:
        table, corrupt = decode_json(values, self.fields, self._parse)
        columns = {name: table.column(name).combine_chunks() for name in self.fields.names}
        columns[CORRUPT_RECORD] = corrupt
        return columns


class RowBatchBuilder:
    """Collects the messages of one topic partition and turns them into Arrow record batches of the
    row schema (``arrow_schema``, exactly what Spark expects for the data source's schema).

    Messages come in as whole received entries (:meth:`add_entries`, the range readers' path: no
    object per message) or as :class:`Message` objects (:meth:`add_messages`); both give the same
    rows. JSON values are parsed by a :class:`JsonValues` of the schema's fields; schema values
    need a ``decoder``.
    """

    def __init__(
        self,
        arrow_schema: pa.Schema,
        value_format: str,
        source_topic: str,
        partition: int,
        batch_id: str,
        decoder: ValueDecoder | None = None,
    ):
        self.schema = arrow_schema
        self.value_format = value_format
        self.source_topic = source_topic
        self.partition = partition
        self.batch_id = batch_id
        if decoder is None and value_format == VALUE_JSON:
            decoder = JsonValues(value_fields(arrow_schema))
        if decoder is None and value_format == VALUE_SCHEMA:
            raise ValueError("value_format 'schema' needs a decoder of the topic's schema")
        self._decoder = decoder
        #: Whether each message's schema version is collected (for the decoder).
        self.versioned = decoder is not None and decoder.versioned
        self._rows: list[RowChunk] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add_entries(self, entries: Sequence[ReceivedEntry], columns: EntryColumns) -> None:
        """Append the messages of ``entries``, as :func:`.entry_messages.entry_columns` gives them."""
        counts = np.diff(columns.rows)
        if not counts.sum():
            return
        self._add(
            RowChunk(
                columns.messages,
                np.repeat(np.fromiter((entry.ledger_id for entry in entries), np.int64, len(entries)), counts),
                np.repeat(np.fromiter((entry.entry_id for entry in entries), np.int64, len(entries)), counts),
                np.repeat(np.fromiter((entry.metadata.publish_time for entry in entries), np.int64, len(entries)), counts),
                np.repeat(np.fromiter((entry.redelivery_count for entry in entries), np.int32, len(entries)), counts),
                np.repeat(np.array([entry.metadata.schema_version.decode("latin-1") for entry in entries], object), counts)
                if self.versioned
                else _NO_VERSIONS,
            )
        )

    def add_messages(self, messages: Sequence[Message]) -> None:
        """Append messages received one by one (reading each one's ``schema_version()`` too when ``versioned``)."""
        if not messages:
            return
        keys, values, ledgers, entries, indexes, publish_times, event_times, properties, redeliveries = zip(
            *[message.fields() for message in messages], strict=True
        )
        self._add(
            RowChunk(
                message_columns(
                    indexes, keys, values, event_times, [len(pairs) for pairs in properties],
                    [key for pairs in properties for key, _ in pairs], [value for pairs in properties for _, value in pairs],
                ),
                np.array(ledgers, np.int64),
                np.array(entries, np.int64),
                np.array(publish_times, np.int64),
                np.array(redeliveries, np.int32),
                np.array([message.schema_version() for message in messages], object) if self.versioned else _NO_VERSIONS,
            )
        )

    def _add(self, chunk: RowChunk) -> None:
        self._rows.append(chunk)
        self._count += len(chunk.messages.indexes)

    def _cut(self, count: int) -> RowChunk:
        """The first ``count`` collected rows, taken out of the rest."""
        head: list[RowChunk] = []
        taken = 0
        while taken < count:
            chunk = self._rows[0]
            size = len(chunk.messages.indexes)
            if taken + size <= count:
                head.append(self._rows.pop(0))
                taken += size
            else:
                head.append(chunk.slice(0, count - taken))
                self._rows[0] = chunk.slice(count - taken, size)
                taken = count
        self._count -= count
        return RowChunk.concat(head)

    def build(self, limit: int | None = None) -> pa.RecordBatch:
        """The first ``limit`` collected rows (None: all) as one record batch; the rest stay collected.

        Columns are Arrow arrays or numpy arrays already; no Python loop per row.
        """
        rows = self._cut(len(self) if limit is None else min(limit, len(self)))
        messages = rows.messages
        count = len(messages.indexes)
        schema = self.schema
        columns: dict[str, pa.Array] = {"key": _null_if(messages.keys, "")}
        if self._decoder is not None:
            columns.update(self._decoder.decode(messages.values, rows.versions.tolist() if self.versioned else ()))
        elif self.value_format == VALUE_STRING:
            columns["value"] = _utf8(messages.values)
        else:
            columns["value"] = messages.values
        offsets = np.zeros(count + 1, np.int32)
        np.cumsum(messages.property_counts, out=offsets[1:])
        properties = pa.MapArray.from_arrays(
            pa.array(offsets), messages.property_keys, messages.property_values, type=schema.field("properties").type
        )
        columns.update(
            {
                "topic": pa.repeat(pa.scalar(self.source_topic, pa.string()), count),
                "partition": pa.repeat(pa.scalar(self.partition, pa.int32()), count),
                "message_id": pa.StructArray.from_arrays(
                    [pa.array(rows.ledgers), pa.array(rows.entries), pa.array(messages.indexes)],
                    fields=list(schema.field("message_id").type),
                ),
                "publish_time": _timestamps(pa.array(rows.publish_times), schema.field("publish_time").type),
                "event_time": _timestamps(
                    _null_if(pa.array(messages.event_times.astype(np.int64)), 0), schema.field("event_time").type
                ),
                "properties": properties,
                "redelivery_count": pa.array(rows.redeliveries),
                BATCH_ID: pa.repeat(pa.scalar(self.batch_id, pa.string()), count),
            }
        )
        return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


# The versions of rows whose builder does not read them.
_NO_VERSIONS = np.empty(0, object)


class RowChunk(NamedTuple):
    """Rows a builder collected: the messages' own columns, and those of the entries they came in
    (repeated per message); ``versions`` is each message's schema version, or empty when the
    builder does not read them."""

    messages: MessageColumns
    ledgers: np.ndarray
    entries: np.ndarray
    publish_times: np.ndarray
    redeliveries: np.ndarray
    versions: np.ndarray

    def slice(self, start: int, stop: int) -> RowChunk:
        """Rows ``start`` to ``stop - 1``."""
        return RowChunk(self.messages.slice(start, stop), *(column[start:stop] for column in self[1:]))

    @staticmethod
    def concat(chunks: Sequence[RowChunk]) -> RowChunk:
        """The rows of ``chunks``, one after the other (none: no rows)."""
        if not chunks:
            no_rows = np.empty(0, np.int64)
            return RowChunk(MessageColumns.concat([]), no_rows, no_rows, no_rows, no_rows.astype(np.int32), _NO_VERSIONS)
        if len(chunks) == 1:
            return chunks[0]
        return RowChunk(
            MessageColumns.concat([chunk.messages for chunk in chunks]),
            *(np.concatenate(columns) for columns in zip(*(chunk[1:] for chunk in chunks), strict=True)),
        )


def value_fields(schema: pa.Schema) -> pa.Schema:
    """The value's fields of a row schema: those between ``key`` and ``_corrupt_record``."""
    names = schema.names
    first, last = names.index("key") + 1, names.index(CORRUPT_RECORD)
    return pa.schema([schema.field(i) for i in range(first, last)])


def decode_json(values: pa.Array, target: pa.Schema, parse: pa.Schema) -> tuple[pa.Table, pa.Array]:
    """Parse JSON object values (a binary array) into the ``target`` fields; (fields, text of the
    corrupt ones).

    The values are parsed together by pyarrow as newline-delimited JSON: a newline can only be
    whitespace in valid JSON, so it is replaced by a space. If the whole block does not parse,
    each value is tried alone and the ones that fail become corrupt records.
    """
    # A null value is an empty object; a line break inside a value (only whitespace there) becomes
    # a space. All in C, the replacing only where a line break was found.
    lines = values.fill_null(b"{}") if values.null_count else values
    count = len(lines)
    block = _joined(lines)
    if b"\r" in block or block.count(b"\n") != count - 1:
        lines = pc.replace_substring(pc.replace_substring(lines, b"\n", b" "), b"\r", b" ")
        block = _joined(lines)
    try:
        table = _read_lines(block, count, parse)
        corrupt = pa.nulls(count, pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        texts: list[bytes] = lines.to_pylist()
        good = [index for index, line in enumerate(texts) if _parses(line, parse)]
        table = _read_lines(b"\n".join([texts[i] for i in good]), len(good), parse)
        rows: list[int | None] = [None] * count
        for position, index in enumerate(good):
            rows[index] = position
        table = table.take(pa.array(rows, pa.int64()))
        kept = set(good)
        corrupt = pa.array([None if i in kept else texts[i].decode("utf-8", "replace") for i in range(count)], pa.string())
    return table.cast(target), corrupt


def _joined(lines: pa.Array) -> bytes:
    """The values of a binary array, a newline after each but the last."""
    offsets = pa.array([0, len(lines)], pa.int32())
    return pc.binary_join(pa.ListArray.from_arrays(offsets, lines), b"\n")[0].as_py()


def _read_lines(block: bytes, count: int, parse: pa.Schema) -> pa.Table:
    """The ``count`` newline-separated JSON objects of ``block`` as a table."""
    if not count:
        return parse.empty_table()
    options = pa_json.ParseOptions(explicit_schema=parse, unexpected_field_behavior="ignore")
    table = pa_json.read_json(pa.BufferReader(block), parse_options=options, read_options=pa_json.ReadOptions(block_size=len(block) + 1))
    if table.num_rows != count:  # an empty value adds no row: treat it as a parse failure
        raise pa.ArrowInvalid(f"{count} values gave {table.num_rows} rows")
    return table


def _parses(line: bytes, parse: pa.Schema) -> bool:
    try:
        _read_lines(line, 1, parse)
        return True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False


def _utf8(values: pa.Array) -> pa.Array:
    try:
        return values.cast(pa.string())
    except pa.ArrowInvalid:  # invalid UTF-8 somewhere: replace the bad bytes, as bytes.decode does
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in values.to_pylist()], pa.string())


def _timestamps(millis: pa.Array, kind: pa.DataType) -> pa.Array:
    return millis.cast(pa.timestamp("ms", tz="UTC")).cast(kind)


def _null_if(array: pa.Array, value: Any) -> pa.Array:
    """``array`` with ``value`` (a key's "", an event time's 0: "not set") turned into null."""
    if array.offset:  # pyarrow 15's if_else writes wrong offsets for a slice of a string array: copied whole first
        array = pa.concat_arrays([array])
    return pc.if_else(pc.equal(array, value), pa.scalar(None, array.type), array)
