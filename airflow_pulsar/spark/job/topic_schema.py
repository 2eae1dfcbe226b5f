"""The schema the ingested topics registered, which gives the table its typed columns (``value_format="schema"``).

The operator reads each topic's newest schema from the admin API when it submits a batch
(:func:`registered_schema`) and passes it in the job's spec; its record's fields become the
value's columns (:mod:`.avro_types`). Messages written with an older version of the schema are
read with that version on the executors and resolved to this one (:mod:`.registry_values`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .avro_types import Avro, logical, parse_definition, union_branches, value_ddl, widened

AVRO = "AVRO"
JSON = "JSON"
# Registry schema types whose definition is an Avro record: Pulsar describes JSON schemas so too.
RECORD_TYPES = (AVRO, JSON)


class SchemaRegistry(Protocol):
    """The admin client, as far as reading a topic's schema goes."""

    def get_schema(self, topic: str, version: int | None = None) -> dict[str, Any]: ...


@dataclass(frozen=True)
class TopicSchema:
    """A version of a topic's schema: its type (``AVRO`` or ``JSON``), record definition (JSON text) and version."""

    kind: str
    definition: str
    version: int
    record: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in RECORD_TYPES:
            raise ValueError(f"typed columns come from an AVRO or JSON schema, not {self.kind!r}")
        object.__setattr__(self, "record", parse_definition(self.definition))
        if self.kind == JSON:
            _check_json(self.record, "")

    def value_ddl(self) -> str:
        """The value's columns, as a DDL field list."""
        return value_ddl(self.record)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "definition": self.definition, "version": self.version}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TopicSchema:
        return cls(str(data["kind"]), str(data["definition"]), int(data["version"]))


def registered_schema(registry: SchemaRegistry, topics: Sequence[str]) -> TopicSchema:
    """The newest schema of the topics (of the first, when several registered the same columns).

    ValueError names a topic without a schema, one whose schema is not an AVRO or JSON record,
    and topics whose schemas give different columns.
    """
    # Imported here, where the operator reads the registry: the Spark job's executors import this
    # module and need no HTTP client (the admin package brings httpx, a third of a second each).
    from airflow_pulsar.client.admin import AdminNotFoundError

    found: list[tuple[str, TopicSchema]] = []
    for topic in topics:
        try:
            document = registry.get_schema(topic)
        except AdminNotFoundError:
            raise ValueError(
                f"value_format 'schema' takes the columns from the topic's schema, but topic {topic!r} has none registered; "
                "produce with an AVRO or JSON schema, or use value_format 'json' with value_schema"
            ) from None
        kind = str(document.get("type", "")).upper()
        if kind not in RECORD_TYPES:
            raise ValueError(
                f"topic {topic!r} has a {kind or 'typeless'} schema; value_format 'schema' reads AVRO and JSON schemas "
                "(use value_format 'bytes' or 'string' for this topic)"
            )
        try:
            schema = TopicSchema(kind, str(document.get("data", "")), int(document.get("version", 0)))
        except ValueError as error:
            raise ValueError(
                f"the {kind} schema of topic {topic!r} (version {document.get('version')}) cannot give columns: {error}"
            ) from None
        found.append((topic, schema))
    first_topic, first = found[0]
    for topic, schema in found[1:]:
        if schema.kind != first.kind or schema.value_ddl() != first.value_ddl():
            raise ValueError(
                f"topics {first_topic!r} and {topic!r} have different schemas ({first.kind} {first.value_ddl()} and "
                f"{schema.kind} {schema.value_ddl()}): one table takes topics of one schema"
            )
    return first


def _check_json(avro: Avro, path: str) -> None:
    """Refuse what JSON text cannot be read into: maps (pyarrow's JSON reader makes no maps) and
    unions of several types (JSON does not say which branch a value is)."""
    if isinstance(avro, list):
        if len(union_branches(avro)) > 1 and widened(avro) is None:
            raise ValueError(f"field {path!r} is a union of several types, which a JSON value does not tell apart")
        for branch in union_branches(avro):
            _check_json(branch, path)
    elif isinstance(avro, dict) and logical(avro) is None:
        if avro["type"] == "map":
            raise ValueError(f"field {path!r} is a map, which JSON values cannot be read into; declare a record")
        if avro["type"] == "record":
            for field in avro["fields"]:
                _check_json(field["type"], f"{path}.{field['name']}".lstrip("."))
        elif avro["type"] == "array":
            _check_json(avro["items"], f"{path}[]")
