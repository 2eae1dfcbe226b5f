"""The table's columns following the rows': a column the rows bring is added, one they lack is null.

When the topic's schema gains a field (a new compatible version), the batch's rows have a column,
or a struct field, that the table does not. Before writing, the job compares the two:

- a new top-level column is added to a parquet, orc, json or csv table (``ALTER TABLE ... ADD
  COLUMNS``; files written before it read as null there), to an Iceberg table likewise (Iceberg's
  schema update), and to a Delta table by the write itself (``mergeSchema``);
- a new field inside a struct (also of an array's elements or a map's values) is added the same
  way to Delta and Iceberg tables; the Hive formats cannot change a column's type, so there it is
  refused, naming the field;
- a column or field the rows lack (a field dropped from the schema) is written as null;
- a column whose type changed otherwise is refused, naming it and both types; the rows may only
  be narrower where Spark widens safely (an INT written to a BIGINT column, FLOAT to DOUBLE).

The rows are then put in the table's order, with its names, for the write.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, NullType, StructField, StructType

from .avro_types import ddl_type, quoted
from .spec import IngestJobSpec, is_table_path

log = logging.getLogger("airflow_pulsar.spark.job")

# A field's place in the table: the column, then struct field names (``element`` / ``value``
# for the items of an array / map), as ALTER TABLE names it.
Path = tuple[str, ...]
# Row types a wider table column takes as they are.
_WIDENING = {("int", "bigint"), ("float", "double"), ("int", "double"), ("bigint", "double")}
# Formats whose catalog table can only gain top-level columns (Spark's Hive tables).
_NESTED_ADDITIONS = ("delta", "iceberg")


@dataclass
class SchemaChange:
    """The table's schema with what the rows bring merged in, and the fields that are new."""

    merged: StructType
    added: list[tuple[Path, DataType]] = field(default_factory=list)


def follow_rows(spark: SparkSession, spec: IngestJobSpec, rows: DataFrame) -> tuple[DataFrame, bool]:
    """Add what the rows bring to the table (unless Delta's write merges it) and align the rows to
    it: (the rows to write, whether the write must merge the schema)."""
    table = spec.plan.table
    current = table_schema(spark, spec)
    if current is None:
        return rows, False
    change = merge(current, rows.schema, table)
    merge_on_write = False
    if change.added:
        log.info("table %s gains %s", table, ", ".join(f"{'.'.join(path)} {ddl_type(kind)}" for path, kind in change.added))
        if spec.table_format == "delta":
            merge_on_write = True
            current = change.merged
        else:
            add_columns(spark, table, spec.table_format, change.added)
            current = table_schema(spark, spec) or change.merged
    return align(rows, current), merge_on_write


def table_schema(spark: SparkSession, spec: IngestJobSpec) -> StructType | None:
    """The table's schema; None while it does not exist (a Delta location before its first write)."""
    table = spec.plan.table
    if spec.table_format == "delta" and is_table_path(table):
        try:
            return spark.read.format("delta").load(table).schema
        except AnalysisException:
            return None
    return spark.table(table).schema if spark.catalog.tableExists(table) else None


def merge(table: StructType, rows: StructType, name: str) -> SchemaChange:
    """The table's schema with the rows' new fields; ValueError for a field whose type changed."""
    change = SchemaChange(StructType([]))
    change.merged = _merge_struct(table, rows, (), name, change)
    return change


def add_columns(spark: SparkSession, table: str, table_format: str, added: list[tuple[Path, DataType]]) -> None:
    """ALTER TABLE ... ADD COLUMNS for the new fields; ValueError for a nested one where the format cannot."""
    nested = [path for path, _ in added if len(path) > 1]
    if nested and table_format not in _NESTED_ADDITIONS:
        shown = ", ".join(".".join(path) for path in nested)
        raise ValueError(
            f"the rows add {shown} inside an existing column of table {table}: a {table_format} table can gain columns "
            "but not change a column's type; write the topic to a delta or iceberg table, or to a new table"
        )
    columns = ", ".join(f"{'.'.join(quoted(part) for part in path)} {ddl_type(kind)}" for path, kind in added)
    spark.sql(f"ALTER TABLE {table} ADD COLUMNS ({columns})")


def align(rows: DataFrame, target: StructType) -> DataFrame:
    """The rows with the target's columns, in its order and with its names: a column the rows lack is null."""
    present = {f.name.lower(): f for f in rows.schema.fields}
    columns = []
    for wanted in target.fields:
        found = present.get(wanted.name.lower())
        if found is None:
            columns.append(F.lit(None).cast(wanted.dataType).alias(wanted.name))
        else:
            columns.append(_aligned(F.col(quoted(found.name)), found.dataType, wanted.dataType).alias(wanted.name))
    return rows.select(columns)


def _merge_struct(table: StructType, rows: StructType, path: Path, name: str, change: SchemaChange) -> StructType:
    given = {f.name.lower(): f for f in rows.fields}
    fields = []
    for column in table.fields:
        row = given.pop(column.name.lower(), None)
        kind = column.dataType if row is None else _merge_type(column.dataType, row.dataType, (*path, column.name), name, change)
        fields.append(StructField(column.name, kind, column.nullable, column.metadata))
    for row in rows.fields:
        if row.name.lower() in given:  # new: not in the table
            change.added.append(((*path, row.name), row.dataType))
            fields.append(StructField(row.name, row.dataType, True))
    return StructType(fields)


def _merge_type(table: DataType, rows: DataType, path: Path, name: str, change: SchemaChange) -> DataType:
    if isinstance(table, StructType) and isinstance(rows, StructType):
        return _merge_struct(table, rows, path, name, change)
    if isinstance(table, ArrayType) and isinstance(rows, ArrayType):
        return ArrayType(_merge_type(table.elementType, rows.elementType, (*path, "element"), name, change), table.containsNull)
    if isinstance(table, MapType) and isinstance(rows, MapType) and _same(table.keyType, rows.keyType):
        return MapType(table.keyType, _merge_type(table.valueType, rows.valueType, (*path, "value"), name, change), table.valueContainsNull)
    if _same(table, rows) or isinstance(rows, NullType) or (rows.simpleString(), table.simpleString()) in _WIDENING:
        return table
    raise ValueError(
        f"column {'.'.join(path)!r} of table {name} is {table.simpleString()}, but this batch's rows have "
        f"{rows.simpleString()}: a column cannot change its type (the topic's schema changed incompatibly); "
        "write to a new table, or change the table yourself"
    )


def _aligned(column: Column, source: DataType, target: DataType) -> Column:
    """``column`` (of type ``source``) as ``target``: struct fields put in the target's order, the missing ones null."""
    if _same(source, target):
        return column
    if isinstance(source, StructType) and isinstance(target, StructType):
        present = {f.name.lower(): f for f in source.fields}
        fields = []
        for wanted in target.fields:
            found = present.get(wanted.name.lower())
            value = (
                F.lit(None).cast(wanted.dataType)
                if found is None
                else _aligned(column.getField(found.name), found.dataType, wanted.dataType)
            )
            fields.append(value.alias(wanted.name))
        return F.when(column.isNotNull(), F.struct(*fields))
    if isinstance(source, ArrayType) and isinstance(target, ArrayType):
        return F.transform(column, lambda item: _aligned(item, source.elementType, target.elementType))
    if isinstance(source, MapType) and isinstance(target, MapType):
        return F.transform_values(column, lambda _, value: _aligned(value, source.valueType, target.valueType))
    return column.cast(target)


def _same(left: DataType, right: DataType) -> bool:
    """Equal types, whatever their nullability and the case of their names."""
    return left.simpleString().lower() == right.simpleString().lower()
