"""JsonSchema: records as JSON text, declared with their Avro-style definition.

The payload is what the official client writes for the same record, byte for byte: the fields
in declaration order, indented by one space, enums as their values and bytes as UTF-8 text.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import TypeVar

from .base import Schema
from .info import SchemaType
from .record import Record, field_values, require_record_class

__all__ = ["JsonSchema"]

R = TypeVar("R", bound=Record)


def _json_value(value: object) -> object:
    """What ``json.dumps`` writes for the values it cannot write itself."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, Record):
        return field_values(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


class JsonSchema(Schema[R]):
    """Instances of ``record_cls`` as JSON; decoding builds them again (unknown keys are ignored)."""

    _record_cls: type[R]

    def __init__(self, record_cls: type[R]):
        require_record_class(record_cls)
        super().__init__(record_cls, SchemaType.JSON, record_cls.schema(), "JSON")

    def encode(self, obj: R) -> bytes:
        self._validate_object_type(obj)
        return json.dumps(field_values(obj), default=_json_value, indent=True).encode("utf-8")

    def decode(self, data: bytes) -> R:
        return self._record_cls(**json.loads(data))
