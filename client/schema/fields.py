"""The field types a :class:`~.record.Record` declares, as the official ``pulsar.schema`` has them.

A field knows its Avro type, the Python types it accepts, its default, and whether it is
``required`` (a non-required field may be None, so its Avro type is a union with ``"null"``
first) and ``required_default`` (its default goes into the schema). Setting a record's field
runs :meth:`Field.validate_type`, which raises ``TypeError`` naming the field.

Containers (:class:`Array`, :class:`Map`) hold other fields or record instances: anything that
answers :class:`FieldType`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Array",
    "AvroType",
    "Boolean",
    "Bytes",
    "CustomEnum",
    "Double",
    "Field",
    "FieldType",
    "Float",
    "Integer",
    "Long",
    "Map",
    "Null",
    "PythonType",
    "String",
]

# An Avro type as a JSON value: a type name, or a record, enum, array or map definition.
AvroType = str | dict[str, Any] | list[Any]
# What ``isinstance`` takes: the Python type(s) a field accepts.
PythonType = type | tuple[type, ...]


@runtime_checkable
class FieldType(Protocol):
    """What a record or container asks of a member: a :class:`Field` or a record instance."""

    def type(self) -> str: ...

    def python_type(self) -> PythonType: ...

    def schema_info(self, defined_names: set[str]) -> AvroType: ...

    def validate_type(self, name: str, val: Any) -> Any: ...

    def default(self) -> Any: ...

    def required_default(self) -> bool: ...

    def is_required(self) -> bool: ...


def _type_name(python_type: PythonType) -> str:
    """A readable name for an error message: ``str`` or ``(str, bytes)``."""
    if isinstance(python_type, tuple):
        return "(" + ", ".join(t.__name__ for t in python_type) + ")"
    return python_type.__name__


def _invalid_type(name: str, val: object, expected: PythonType) -> TypeError:
    return TypeError(f"Field '{name}' expects {_type_name(expected)}, got {type(val).__name__}: {val!r}")


class FieldOptions:
    """What a field is declared with, shared by the field types and by a record used as a field."""

    _default: Any
    _required: bool
    _required_default: bool

    def default(self) -> Any:
        """The value of the field when none is given."""
        return self._default

    def required_default(self) -> bool:
        """Whether the schema states this field's default."""
        return self._required_default

    def is_required(self) -> bool:
        """Whether the field may not be None (its Avro type is then not a union with null)."""
        return self._required


class Field(FieldOptions, ABC):
    """Base of the field types: a default (checked like any value), ``required`` and ``required_default``."""

    def __init__(self, default: Any = None, required: bool = False, required_default: bool = False):
        if default is not None:
            default = self.validate_type("default", default)
        self._default = default
        self._required = required
        self._required_default = required_default

    @abstractmethod
    def type(self) -> str:
        """The Avro type name."""

    @abstractmethod
    def python_type(self) -> PythonType:
        """The Python type(s) a value of this field may have."""

    def validate_type(self, name: str, val: Any) -> Any:
        """The value to store for ``val`` in the field ``name``: None becomes the default unless the field
        is required; a value of another type raises ``TypeError``."""
        if val is None and not self._required:
            return self.default()
        if not isinstance(val, self.python_type()):
            raise _invalid_type(name, val, self.python_type())
        return val

    def schema(self) -> AvroType:
        """This field's Avro type on its own."""
        return self.schema_info(set())

    def schema_info(self, defined_names: set[str]) -> AvroType:
        """This field's Avro type inside a schema where ``defined_names`` are already defined."""
        return self.type()


class Null(Field):
    """A field that is always None."""

    def type(self) -> str:
        return "null"

    def python_type(self) -> PythonType:
        return type(None)

    def validate_type(self, name: str, val: Any) -> Any:
        if val is not None:
            raise _invalid_type(name, val, type(None))
        return val


class Boolean(Field):
    """A bool; False when not given."""

    def type(self) -> str:
        return "boolean"

    def python_type(self) -> PythonType:
        return bool

    def default(self) -> Any:
        return False if self._default is None else self._default


class Integer(Field):
    """A 32-bit Avro int."""

    def type(self) -> str:
        return "int"

    def python_type(self) -> PythonType:
        return int


class Long(Field):
    """A 64-bit Avro long."""

    def type(self) -> str:
        return "long"

    def python_type(self) -> PythonType:
        return int


class Float(Field):
    """A 32-bit float; ints are accepted."""

    def type(self) -> str:
        return "float"

    def python_type(self) -> PythonType:
        return float, int


class Double(Field):
    """A 64-bit float; ints are accepted."""

    def type(self) -> str:
        return "double"

    def python_type(self) -> PythonType:
        return float, int


class Bytes(Field):
    """Bytes; a str is stored UTF-8 encoded."""

    def type(self) -> str:
        return "bytes"

    def python_type(self) -> PythonType:
        return bytes, str

    def validate_type(self, name: str, val: Any) -> Any:
        # None stays None (not the default), as in the official client.
        if val is None and not self._required:
            return None
        if isinstance(val, str):
            return val.encode()
        return super().validate_type(name, val)


class String(Field):
    """A str; bytes are stored UTF-8 decoded."""

    def type(self) -> str:
        return "string"

    def python_type(self) -> PythonType:
        return str, bytes

    def validate_type(self, name: str, val: Any) -> Any:
        val = super().validate_type(name, val)
        return val.decode() if isinstance(val, bytes) else val


class CustomEnum(Field):
    """A member of a Python ``Enum``, given as the member, its name or its int value.

    Avro carries the member's name, JSON its value. A str that is not a member's name is also
    looked up as a value, so JSON a str-valued enum was written with reads back.
    """

    def __init__(self, enum_type: type[Enum], default: Any = None, required: bool = False, required_default: bool = False):
        if not (isinstance(enum_type, type) and issubclass(enum_type, Enum)):
            raise TypeError(f"{enum_type!r} is not an Enum type")
        self.enum_type = enum_type
        self.values = {member.value: member for member in enum_type}
        super().__init__(default, required, required_default)

    def type(self) -> str:
        return "enum"

    def python_type(self) -> PythonType:
        return self.enum_type

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        if type(val) is str:
            member = self.enum_type.__members__.get(val, self.values.get(val))
        elif type(val) is int:
            member = self.values.get(val)
        elif isinstance(val, self.enum_type):
            return val
        else:
            raise _invalid_type(name, val, self.enum_type)
        if member is None:
            raise TypeError(f"Field '{name}': {val!r} is not one of {list(self.enum_type.__members__)}")
        return member

    def schema_info(self, defined_names: set[str]) -> AvroType:
        # An enum is defined once per schema; later uses refer to it by name.
        name = self.enum_type.__name__
        if name in defined_names:
            return name
        defined_names.add(name)
        return {"type": "enum", "name": name, "symbols": [member.name for member in self.enum_type]}


def _member(kind: str, member: FieldType) -> FieldType:
    if isinstance(member, type) or not isinstance(member, FieldType):
        raise TypeError(f"{kind} takes a field or a record instance (e.g. String() or MyRecord()), not {member!r}")
    return member


class Array(Field):
    """A list whose items are all of one field type or record class."""

    def __init__(self, array_type: FieldType, default: Any = None, required: bool = False, required_default: bool = False):
        self.array_type = _member("Array", array_type)
        super().__init__(default=default, required=required, required_default=required_default)

    def type(self) -> str:
        return "array"

    def python_type(self) -> PythonType:
        return list

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        super().validate_type(name, val)
        item_type = self.array_type.python_type()
        for item in val:
            if not isinstance(item, item_type):
                raise TypeError(f"Array field '{name}' holds {item!r}; its items must be {_type_name(item_type)}")
        return val

    def schema_info(self, defined_names: set[str]) -> AvroType:
        return {"type": "array", "items": self.array_type.schema_info(defined_names)}


class Map(Field):
    """A dict from str to values of one field type or record class."""

    def __init__(self, value_type: FieldType, default: Any = None, required: bool = False, required_default: bool = False):
        self.value_type = _member("Map", value_type)
        super().__init__(default=default, required=required, required_default=required_default)

    def type(self) -> str:
        return "map"

    def python_type(self) -> PythonType:
        return dict

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None:
            return None
        super().validate_type(name, val)
        value_type = self.value_type.python_type()
        for key, value in val.items():
            if type(key) is not str:
                raise TypeError(f"Map field '{name}' has the key {key!r}; its keys must be str")
            if not isinstance(value, value_type):
                raise TypeError(f"Map field '{name}' holds {value!r} at {key!r}; its values must be {_type_name(value_type)}")
        return val

    def schema_info(self, defined_names: set[str]) -> AvroType:
        return {"type": "map", "values": self.value_type.schema_info(defined_names)}
