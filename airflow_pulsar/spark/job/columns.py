"""The rows an ingest batch writes: their schema, and Arrow record batches built from messages.

Every row is one message::

    key STRING, value BINARY | value STRING | <the JSON fields>, _corrupt_record STRING,
    topic STRING, partition INT,
    message_id STRUCT<ledger_id BIGINT, entry_id BIGINT, batch_index INT>,
    publish_time TIMESTAMP, event_time TIMESTAMP, properties MAP<STRING, STRING>,
    redelivery_count INT, batch_id STRING

With JSON values the value's fields (given as a DDL string) take the place of ``value``, and a
message that does not parse as a JSON object of those fields keeps its text in
``_corrupt_record`` (Spark's name for it) with the fields left null. ``batch_id`` comes last: it
is the table's partition column.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from airflow_pulsar.client.consumer import MessageFields

from .spec import VALUE_BYTES, VALUE_JSON, VALUE_STRING, check_value_schema

CORRUPT_RECORD = "_corrupt_record"
BATCH_ID = "batch_id"
MESSAGE_ID_DDL = "STRUCT<ledger_id: BIGINT, entry_id: BIGINT, batch_index: INT>"
_META_DDL = (
    f"topic STRING, partition INT, message_id {MESSAGE_ID_DDL}, publish_time TIMESTAMP, "
    f"event_time TIMESTAMP, properties MAP<STRING, STRING>, redelivery_count INT, {BATCH_ID} STRING"
)


def row_ddl(value_format: str, value_schema: str | None = None) -> str:
    """The DDL of the rows for a value format (JSON: with the value's fields in place of ``value``)."""
    if value_format == VALUE_BYTES:
        value = "value BINARY"
    elif value_format == VALUE_STRING:
        value = "value STRING"
    elif value_format == VALUE_JSON:
        check_value_schema(value_schema or "")
        value = f"{value_schema}, {CORRUPT_RECORD} STRING"
    else:
        raise ValueError(f"unknown value format {value_format!r}")
    return f"key STRING, {value}, {_META_DDL}"


def json_parse_schema(target: pa.Schema) -> pa.Schema:
    """The schema pyarrow's JSON reader parses with: dates are read as text and cast afterwards.

    Raises ValueError for types the reader cannot produce (maps)."""
    return pa.schema([pa.field(f.name, _parse_type(f.type, f.name), f.nullable) for f in target])


def _parse_type(kind: pa.DataType, name: str) -> pa.DataType:
    if pa.types.is_date(kind):
        return pa.string()
    if pa.types.is_map(kind):
        raise ValueError(f"JSON field {name!r}: MAP types cannot be decoded from JSON; declare a STRUCT")
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _parse_type(f.type, f"{name}.{f.name}"), f.nullable) for f in kind])
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(pa.field(kind.value_field.name, _parse_type(kind.value_type, name), kind.value_field.nullable))
    return kind


class RowBatchBuilder:
    """Collects messages of one topic partition and turns them into an Arrow record batch of the
    row schema (``arrow_schema``, exactly what Spark expects for the data source's schema)."""

    def __init__(self, arrow_schema: pa.Schema, value_format: str, source_topic: str, partition: int, batch_id: str):
        self.schema = arrow_schema
        self.value_format = value_format
        self.source_topic = source_topic
        self.partition = partition
        self.batch_id = batch_id
        self._value_fields = _value_fields(arrow_schema) if value_format == VALUE_JSON else None
        self._json_parse = json_parse_schema(self._value_fields) if self._value_fields is not None else None
        self._reset()

    def _reset(self) -> None:
        self._rows: list[MessageFields] = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, fields: MessageFields) -> None:
        """Append one message, given as its ``Message.fields()``."""
        self._rows.append(fields)

    def build(self) -> pa.RecordBatch:
        """The collected rows as one record batch; the builder starts empty again.

        Columns are converted by pyarrow from the transposed rows, in C; no Python loop per row.
        """
        count = len(self._rows)
        # Each field of MessageFields across the rows, by name.
        field = dict(zip(MessageFields._fields, zip(*self._rows, strict=True), strict=True))
        keys, values, properties = field["partition_key"], field["value"], field["properties"]
        self._reset()
        schema = self.schema
        columns: dict[str, pa.Array] = {"key": _null_if(pa.array(keys, pa.string()), "")}
        if self._value_fields is not None:
            columns.update(self._json_columns(values))
        elif self.value_format == VALUE_STRING:
            columns["value"] = _utf8(values)
        else:
            columns["value"] = pa.array(values, pa.binary())
        columns.update(
            {
                "topic": pa.repeat(pa.scalar(self.source_topic, pa.string()), count),
                "partition": pa.repeat(pa.scalar(self.partition, pa.int32()), count),
                "message_id": pa.StructArray.from_arrays(
                    [
                        pa.array(field["ledger_id"], pa.int64()),
                        pa.array(field["entry_id"], pa.int64()),
                        pa.array(field["batch_index"], pa.int32()),
                    ],
                    fields=list(schema.field("message_id").type),
                ),
                "publish_time": _timestamps(pa.array(field["publish_time"], pa.int64()), schema.field("publish_time").type),
                "event_time": _timestamps(_null_if(pa.array(field["event_time"], pa.int64()), 0), schema.field("event_time").type),
                "properties": pa.array(properties, schema.field("properties").type),
                "redelivery_count": pa.array(field["redelivery_count"], pa.int32()),
                BATCH_ID: pa.repeat(pa.scalar(self.batch_id, pa.string()), count),
            }
        )
        return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)

    def _json_columns(self, values: Sequence[bytes | None]) -> dict[str, pa.Array]:
        assert self._value_fields is not None and self._json_parse is not None
        table, corrupt = decode_json(values, self._value_fields, self._json_parse)
        columns = {name: table.column(name).combine_chunks() for name in self._value_fields.names}
        columns[CORRUPT_RECORD] = corrupt
        return columns


def _value_fields(schema: pa.Schema) -> pa.Schema:
    names = schema.names
    first, last = names.index("key") + 1, names.index(CORRUPT_RECORD)
    return pa.schema([schema.field(i) for i in range(first, last)])


def decode_json(values: Sequence[bytes | None], target: pa.Schema, parse: pa.Schema) -> tuple[pa.Table, pa.Array]:
    """Parse JSON object values into the ``target`` fields; (fields, text of the corrupt ones).

    The values are parsed together by pyarrow as newline-delimited JSON: a newline can only be
    whitespace in valid JSON, so it is replaced by a space. If the whole block does not parse,
    each value is tried alone and the ones that fail become corrupt records.
    """
    lines = [b"{}" if value is None else value.replace(b"\n", b" ").replace(b"\r", b" ") for value in values]
    try:
        table = _read_lines(lines, parse)
        corrupt = pa.nulls(len(lines), pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        good = [index for index, line in enumerate(lines) if _parses(line, parse)]
        table = _read_lines([lines[i] for i in good], parse)
        rows: list[int | None] = [None] * len(lines)
        for position, index in enumerate(good):
            rows[index] = position
        table = table.take(pa.array(rows, pa.int64()))
        kept = set(good)
        corrupt = pa.array(
            [None if i in kept else lines[i].decode("utf-8", "replace") for i in range(len(lines))], pa.string()
        )
    return table.cast(target), corrupt


def _read_lines(lines: list[bytes], parse: pa.Schema) -> pa.Table:
    if not lines:
        return parse.empty_table()
    options = pa_json.ParseOptions(explicit_schema=parse, unexpected_field_behavior="ignore")
    block = b"\n".join(lines)
    table = pa_json.read_json(io.BytesIO(block), parse_options=options, read_options=pa_json.ReadOptions(block_size=len(block) + 1))
    if table.num_rows != len(lines):  # an empty value adds no row: treat it as a parse failure
        raise pa.ArrowInvalid(f"{len(lines)} values gave {table.num_rows} rows")
    return table


def _parses(line: bytes, parse: pa.Schema) -> bool:
    try:
        _read_lines([line], parse)
        return True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False


def _utf8(values: Sequence[bytes | None]) -> pa.Array:
    array = pa.array(values, pa.binary())
    try:
        return array.cast(pa.string())
    except pa.ArrowInvalid:  # invalid UTF-8 somewhere: replace the bad bytes, as bytes.decode does
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in values], pa.string())


def _timestamps(millis: pa.Array, kind: pa.DataType) -> pa.Array:
    return millis.cast(pa.timestamp("ms", tz="UTC")).cast(kind)


def _null_if(array: pa.Array, value: Any) -> pa.Array:
    """``array`` with ``value`` (a key's "", an event time's 0: "not set") turned into null."""
    return pc.if_else(pc.equal(array, value), pa.scalar(None, array.type), array)
