"""The schemas of plain payloads: bytes as they are, and UTF-8 text."""

from __future__ import annotations

from .base import Schema
from .info import SchemaType

__all__ = ["BytesSchema", "StringSchema"]


class BytesSchema(Schema[bytes]):
    """Payloads as they are: the default schema, never declared to the broker."""

    def __init__(self) -> None:
        super().__init__(bytes, SchemaType.BYTES, None, "BYTES")

    def encode(self, data: bytes) -> bytes:
        self._validate_object_type(data)
        return data

    def decode(self, data: bytes) -> bytes:
        return data

    def __str__(self) -> str:
        return "BytesSchema"


class StringSchema(Schema[str]):
    """Text, sent UTF-8 encoded."""

    def __init__(self) -> None:
        super().__init__(str, SchemaType.STRING, None, "STRING")

    def encode(self, obj: str) -> bytes:
        self._validate_object_type(obj)
        return obj.encode("utf-8")

    def decode(self, data: bytes) -> str:
        return data.decode("utf-8")

    def __str__(self) -> str:
        return "StringSchema"
