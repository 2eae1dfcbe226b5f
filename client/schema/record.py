"""Record: a class whose field-typed attributes declare an Avro record, as in the official ``pulsar.schema``.

::

    class Point(Record):
        x = Integer(required=True)
        y = Integer(required=True)
        label = String(default="origin", required_default=True)

The class body's field instances become the record's fields in declaration order (an ``Enum``
class in the body becomes a :class:`~.fields.CustomEnum` field, a record class a nested record
field); only the class's own body counts, not its bases', as in the official client.
``Point.schema()`` is the Avro schema dict the official client generates for the same class,
key for key and in the same order, so the JSON definitions of both are byte-identical.
``_avro_namespace`` and ``_sorted_fields`` on the class set the namespace and sort the fields.

Instances take their fields as keyword arguments (nested records may be given as dicts, as the
decoders produce them) and check every assignment: a value of the wrong type raises
``TypeError`` naming the field, an undeclared attribute ``AttributeError``.
"""

from __future__ import annotations

import copy
from enum import Enum
from typing import Any, ClassVar

from .fields import Array, AvroType, CustomEnum, Field, FieldOptions, FieldType, Map, PythonType

__all__ = ["Record", "RecordMeta", "field_values", "require_record_class"]

# Set on every instance before its fields, in this order: ``str(record)`` shows them, as the
# official client's does.
_RESERVED = ("_required_default", "_default", "_required")


class RecordMeta(type):
    """Collects a record class's fields from its class body."""

    _fields: dict[str, FieldType]

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> RecordMeta:
        cls = super().__new__(mcs, name, bases, namespace)
        if any(isinstance(base, RecordMeta) for base in bases):  # not Record itself, which has none
            cls._fields = _declared_fields(namespace)
        return cls


def _declared_fields(namespace: dict[str, Any]) -> dict[str, FieldType]:
    fields: dict[str, FieldType] = {}
    for name, value in namespace.items():
        if isinstance(value, type) and issubclass(value, Enum):
            value = CustomEnum(value)
        elif isinstance(value, RecordMeta):
            value = value()
        if isinstance(value, (Field, Record)):
            fields[name] = value
    return fields


class Record(FieldOptions, metaclass=RecordMeta):
    """Base of user-declared records; an instance is also the field type of a nested record.

    As a nested field, ``default``, ``required`` and ``required_default`` mean what they mean
    for any :class:`~.fields.Field`. Equality compares the declared fields; records are not hashable.
    """

    _avro_namespace: ClassVar[str | None] = None
    _sorted_fields: ClassVar[bool] = False
    _fields: ClassVar[dict[str, FieldType]] = {}
    # What the record is as a nested field (FieldOptions) is set on every instance (see _RESERVED).

    # *args is accepted, and ignored, so the signature is the official one; so are keyword
    # arguments naming no declared field, as the official Record drops them.
    def __init__(self, default: Any = None, required_default: bool = False, required: bool = False, *args: Any, **kwargs: Any):
        for key, flag in zip(_RESERVED, (required_default, default, required), strict=True):
            object.__setattr__(self, key, flag)
        for name, field in self._fields.items():
            if name in kwargs:
                setattr(self, name, _from_plain(field, kwargs[name]))
            elif isinstance(field, Record):
                setattr(self, name, copy.deepcopy(field))
            else:
                # Field defaults were checked when the field was declared; each record gets its own copy.
                object.__setattr__(self, name, copy.deepcopy(field.default()))

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The Avro schema of this record class."""
        schema = cls.schema_info(set())
        assert isinstance(schema, dict)  # a fresh name set always yields the full definition
        return schema

    @classmethod
    def schema_info(cls, defined_names: set[str]) -> AvroType:
        """This record's Avro schema inside one where ``defined_names`` are already defined: the full
        definition the first time, its (namespaced) name after."""
        full_name = cls.__name__ if cls._avro_namespace is None else f"{cls._avro_namespace}.{cls.__name__}"
        if full_name in defined_names:
            return full_name
        defined_names.add(full_name)
        schema: dict[str, Any] = {"type": "record", "name": cls.__name__}
        if cls._avro_namespace is not None:
            schema["namespace"] = cls._avro_namespace
        names = sorted(cls._fields) if cls._sorted_fields else list(cls._fields)
        schema["fields"] = [_field_schema(name, cls._fields[name], defined_names) for name in names]
        return schema

    def __setattr__(self, key: str, value: Any) -> None:
        if key in _RESERVED:
            object.__setattr__(self, key, value)
            return
        field = self._fields.get(key)
        if field is None:
            # The official message, then the record's own words.
            raise AttributeError(f"Cannot set undeclared field {key} on record: {type(self).__name__} has no field {key!r}")
        object.__setattr__(self, key, field.validate_type(key, value))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        missing = object()
        return all(getattr(self, name) == getattr(other, name, missing) for name in self._fields)

    # Mutable and compared by value: not hashable (the official class is not either).
    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return str(self.__dict__)

    def type(self) -> str:
        """The record's name, as a nested field's type."""
        return type(self).__name__

    def python_type(self) -> PythonType:
        """The record class: what a nested field of this record accepts."""
        return type(self)

    def validate_type(self, name: str, val: Any) -> Any:
        """The value to store in the nested-record field ``name``: None becomes the default unless the
        field is required; anything but an instance of this record class raises ``TypeError``."""
        if val is None and not self.is_required():
            return self.default()
        if not isinstance(val, type(self)):
            raise TypeError(f"Field '{name}' expects a {type(self).__name__} record, got {type(val).__name__}: {val!r}")
        return val


def field_values(record: Record) -> dict[str, Any]:
    """The record's field values by name, in declaration order."""
    return {name: getattr(record, name) for name in record._fields}


def require_record_class(record_cls: object) -> None:
    """Raise ``TypeError`` unless ``record_cls`` is a :class:`Record` subclass (what a schema of records takes)."""
    if not (isinstance(record_cls, type) and issubclass(record_cls, Record)):
        raise TypeError(f"record_cls must be a Record subclass, not {record_cls!r}")


def _field_schema(name: str, field: FieldType, defined_names: set[str]) -> dict[str, Any]:
    avro_type = field.schema_info(defined_names)
    entry: dict[str, Any] = {"name": name}
    if field.required_default():
        default = field.default()
        entry["default"] = default.name if isinstance(default, Enum) else default
    entry["type"] = avro_type if field.is_required() else ["null", avro_type]
    return entry


def _from_plain(field: FieldType, value: Any) -> Any:
    """``value`` with nested records given as dicts (as the decoders return them) built into records."""
    if isinstance(field, Record) and isinstance(value, dict):
        return type(field)(**value)
    if isinstance(field, Array) and isinstance(value, list) and _holds_records(field.array_type):
        return [_from_plain(field.array_type, item) for item in value]
    if isinstance(field, Map) and isinstance(value, dict) and _holds_records(field.value_type):
        return {key: _from_plain(field.value_type, item) for key, item in value.items()}
    return value


def _holds_records(member: FieldType) -> bool:
    return isinstance(member, (Record, Array, Map))
