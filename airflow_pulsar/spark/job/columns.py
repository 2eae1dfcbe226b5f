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

import io
import itertools
from collections.abc import Sequence
from typing import Any, Protocol, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from airflow_pulsar.client.consumer import Message, ReceivedEntry

from .entry_messages import EntryMessages
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

    def decode(self, values: Sequence[bytes | None], versions: Sequence[str]) -> dict[str, pa.Array]:
        """The value columns (by name) and ``_corrupt_record`` of the values; ``versions`` holds each
        message's ``schema_version()`` when the decoder is ``versioned``."""
        ...


class JsonValues:
    """JSON object values parsed into the fields of a DDL (``value_format="json"``)."""

    versioned = False

    def __init__(self, fields: pa.Schema) -> None:
        self.fields = fields
        self._parse = json_parse_schema(fields)

    def decode(self, values: Sequence[bytes | None], versions: Sequence[str]) -> dict[str, pa.Array]:
        table, corrupt = decode_json(values, self.fields, self._parse)
        columns = {name: table.column(name).combine_chunks() for name in self.fields.names}
        columns[CORRUPT_RECORD] = corrupt
        return columns


class RowBatchBuilder:
    """Collects the messages of one topic partition and turns them into Arrow record batches of the
    row schema (``arrow_schema``, exactly what Spark expects for the data source's schema).

    Messages come in as whole received entries (:meth:`add_entry`, the range readers' path: no
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
        self._rows = RowColumns()

    def __len__(self) -> int:
        return len(self._rows.indexes)

    def add_entry(self, entry: ReceivedEntry, messages: EntryMessages) -> None:
        """Append the messages of an entry, as :func:`.entry_messages.entry_messages` gives them."""
        rows = self._rows
        count = len(messages.indexes)
        rows.indexes += messages.indexes
        rows.keys += messages.keys
        rows.values += messages.values
        rows.event_times += messages.event_times
        rows.property_counts += messages.property_counts
        rows.property_keys += messages.property_keys
        rows.property_values += messages.property_values
        metadata = entry.metadata
        rows.ledgers += [entry.ledger_id] * count
        rows.entries += [entry.entry_id] * count
        rows.publish_times += [metadata.publish_time] * count
        rows.redeliveries += [entry.redelivery_count] * count
        if self.versioned:
            rows.versions += [metadata.schema_version.decode("latin-1")] * count

    def add_messages(self, messages: Sequence[Message]) -> None:
        """Append messages received one by one (reading each one's ``schema_version()`` too when ``versioned``)."""
        if not messages:
            return
        rows = self._rows
        keys, values, ledgers, entries, indexes, publish_times, event_times, properties, redeliveries = zip(
            *[message.fields() for message in messages], strict=True
        )
        rows.keys += keys
        rows.values += values
        rows.ledgers += ledgers
        rows.entries += entries
        rows.indexes += indexes
        rows.publish_times += publish_times
        rows.event_times += event_times
        rows.redeliveries += redeliveries
        for pairs in properties:
            rows.property_keys += [key for key, _ in pairs]
            rows.property_values += [value for _, value in pairs]
            rows.property_counts.append(len(pairs))
        if self.versioned:
            rows.versions += [message.schema_version() for message in messages]

    def build(self, limit: int | None = None) -> pa.RecordBatch:
        """The first ``limit`` collected rows (None: all) as one record batch; the rest stay collected.

        Columns are converted by pyarrow from the collected lists, in C; no Python loop per row.
        """
        rows = self._rows.cut(len(self) if limit is None else min(limit, len(self)))
        count = len(rows.indexes)
        schema = self.schema
        columns: dict[str, pa.Array] = {"key": _null_if(pa.array(rows.keys, pa.string()), "")}
        if self._decoder is not None:
            columns.update(self._decoder.decode(rows.values, rows.versions))
        elif self.value_format == VALUE_STRING:
            columns["value"] = _utf8(rows.values)
        else:
            columns["value"] = pa.array(rows.values, pa.binary())
        offsets = pa.array([0, *itertools.accumulate(rows.property_counts)], pa.int32())
        properties = pa.MapArray.from_arrays(
            offsets, pa.array(rows.property_keys, pa.string()), pa.array(rows.property_values, pa.string()),
            type=schema.field("properties").type,
        )
        columns.update(
            {
                "topic": pa.repeat(pa.scalar(self.source_topic, pa.string()), count),
                "partition": pa.repeat(pa.scalar(self.partition, pa.int32()), count),
                "message_id": pa.StructArray.from_arrays(
                    [
                        pa.array(rows.ledgers, pa.int64()),
                        pa.array(rows.entries, pa.int64()),
                        pa.array(rows.indexes, pa.int32()),
                    ],
                    fields=list(schema.field("message_id").type),
                ),
                "publish_time": _timestamps(pa.array(rows.publish_times, pa.int64()), schema.field("publish_time").type),
                "event_time": _timestamps(_null_if(pa.array(rows.event_times, pa.int64()), 0), schema.field("event_time").type),
                "properties": properties,
                "redelivery_count": pa.array(rows.redeliveries, pa.int32()),
                BATCH_ID: pa.repeat(pa.scalar(self.batch_id, pa.string()), count),
            }
        )
        return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


class RowColumns:
    """The rows a builder collected, column by column, as Python lists; properties flattened, with
    each row's count of them."""

    __slots__ = (
        "keys", "values", "ledgers", "entries", "indexes", "publish_times", "event_times", "property_counts",
        "property_keys", "property_values", "redeliveries", "versions",
    )
    _PROPERTY_LISTS = ("property_keys", "property_values")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.values: list[bytes | None] = []
        self.ledgers: list[int] = []
        self.entries: list[int] = []
        self.indexes: list[int] = []
        self.publish_times: list[int] = []
        self.event_times: list[int] = []
        self.property_counts: list[int] = []
        self.property_keys: list[str] = []
        self.property_values: list[str] = []
        self.redeliveries: list[int] = []
        #: Each row's schema version, for a versioned decoder only.
        self.versions: list[str] = []

    def cut(self, count: int) -> RowColumns:
        """The first ``count`` rows, taken out of these."""
        head = RowColumns()
        properties = sum(self.property_counts[:count])
        for name in self.__slots__:
            column = getattr(self, name)
            at = properties if name in self._PROPERTY_LISTS else count
            setattr(head, name, column[:at])
            del column[:at]
        return head


def value_fields(schema: pa.Schema) -> pa.Schema:
    """The value's fields of a row schema: those between ``key`` and ``_corrupt_record``."""
    names = schema.names
    first, last = names.index("key") + 1, names.index(CORRUPT_RECORD)
    return pa.schema([schema.field(i) for i in range(first, last)])


def decode_json(values: Sequence[bytes | None], target: pa.Schema, parse: pa.Schema) -> tuple[pa.Table, pa.Array]:
    """Parse JSON object values into the ``target`` fields; (fields, text of the corrupt ones).

    The values are parsed together by pyarrow as newline-delimited JSON: a newline can only be
    whitespace in valid JSON, so it is replaced by a space. If the whole block does not parse,
    each value is tried alone and the ones that fail become corrupt records.
    """
    # A null value is an empty object; a line break inside a value (only whitespace there) becomes
    # a space. Both are rare: looked for in C, and only then handled value by value.
    lines = [b"{}" if value is None else value for value in values] if None in values else cast("Sequence[bytes]", values)
    block = b"\n".join(lines)
    if b"\r" in block or block.count(b"\n") != len(lines) - 1:
        lines = [line.replace(b"\n", b" ").replace(b"\r", b" ") for line in lines]
        block = b"\n".join(lines)
    try:
        table = _read_lines(block, len(lines), parse)
        corrupt = pa.nulls(len(lines), pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        good = [index for index, line in enumerate(lines) if _parses(line, parse)]
        table = _read_lines(b"\n".join([lines[i] for i in good]), len(good), parse)
        rows: list[int | None] = [None] * len(lines)
        for position, index in enumerate(good):
            rows[index] = position
        table = table.take(pa.array(rows, pa.int64()))
        kept = set(good)
        corrupt = pa.array(
            [None if i in kept else lines[i].decode("utf-8", "replace") for i in range(len(lines))], pa.string()
        )
    return table.cast(target), corrupt


def _read_lines(block: bytes, count: int, parse: pa.Schema) -> pa.Table:
    """The ``count`` newline-separated JSON objects of ``block`` as a table."""
    if not count:
        return parse.empty_table()
    options = pa_json.ParseOptions(explicit_schema=parse, unexpected_field_behavior="ignore")
    table = pa_json.read_json(io.BytesIO(block), parse_options=options, read_options=pa_json.ReadOptions(block_size=len(block) + 1))
    if table.num_rows != count:  # an empty value adds no row: treat it as a parse failure
        raise pa.ArrowInvalid(f"{count} values gave {table.num_rows} rows")
    return table


def _parses(line: bytes, parse: pa.Schema) -> bool:
    try:
        _read_lines(line, 1, parse)
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
