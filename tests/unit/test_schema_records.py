"""Records and their fields against the official ``pulsar.schema`` as oracle.

Each record shape is declared once, as a function of the schema module, and built from both the
official module and ours: the Avro schema dicts (and their JSON text, where key order shows),
``str()``, equality, construction from dicts and the exception a bad value raises must agree. The
deliberate differences (where the official module crashes later or accepts a value it cannot
encode) are tested at the end, each named.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import Enum
from types import ModuleType
from typing import Any

import pulsar.schema as official
import pytest

import airflow_pulsar.client.schema as ours


class Color(Enum):
    RED = 1
    GREEN = 2


class Size(Enum):
    SMALL = "s"
    LARGE = "l"


def primitives(m: ModuleType) -> type:
    class Primitives(m.Record):
        s = m.String()
        i = m.Integer()
        lo = m.Long()
        f = m.Float()
        d = m.Double()
        b = m.Boolean()
        by = m.Bytes()

    return Primitives


def required_and_defaults(m: ModuleType) -> type:
    class Defaults(m.Record):
        name = m.String(required=True)
        count = m.Integer(default=3, required_default=True)
        ratio = m.Double(default=0.5, required=True, required_default=True)
        flag = m.Boolean(default=True, required_default=True)
        note = m.String(required_default=True)
        color = m.CustomEnum(Color, default=Color.GREEN, required_default=True)
        tags = m.Array(m.String(), default=["a"], required_default=True)
        nothing = m.Null(required=True)

    return Defaults


def containers(m: ModuleType) -> type:
    class Containers(m.Record):
        words = m.Array(m.String())
        grid = m.Array(m.Array(m.Integer()))
        scores = m.Map(m.Double(), required=True)
        nested = m.Map(m.Array(m.Long()))

    return Containers


def nested(m: ModuleType) -> type:
    class Point(m.Record):
        _avro_namespace = "geo"
        x = m.Integer(required=True)
        y = m.Integer(required=True)

    class Shape(m.Record):
        center = Point()
        corner = Point(required=True)
        path = m.Array(Point())
        named = m.Map(Point())
        color = Color
        again = m.CustomEnum(Color)

    return Shape


def sorted_fields(m: ModuleType) -> type:
    class Inner(m.Record):
        v = m.String()

    class Sorted(m.Record):
        _sorted_fields = True
        zeta = m.Integer()
        alpha = m.String()
        middle = Inner

    return Sorted


SHAPES: list[Callable[[ModuleType], type]] = [primitives, required_and_defaults, containers, nested, sorted_fields]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.__name__)
def test_schema_dict_and_its_json_equal_the_official(shape: Callable[[ModuleType], type]) -> None:
    theirs, mine = shape(official), shape(ours)
    assert mine.schema() == theirs.schema()
    assert json.dumps(mine.schema(), indent=True) == json.dumps(theirs.schema(), indent=True)


def test_a_record_or_enum_used_twice_is_defined_once_then_named() -> None:
    schema = nested(ours).schema()
    types = {f["name"]: f["type"] for f in schema["fields"]}
    assert types["center"][1]["name"] == "Point" and types["center"][1]["namespace"] == "geo"
    assert types["corner"] == "geo.Point"
    assert types["path"] == ["null", {"type": "array", "items": "geo.Point"}]
    assert types["color"][1] == {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
    assert types["again"] == ["null", "Color"]


SAMPLE_VALUES = {
    primitives: dict(s="text", i=-5, lo=2**40, f=1.5, d=2, b=True, by=b"\x00\x01"),
    required_and_defaults: dict(name="n", note="x", color="RED", tags=["p", "q"]),
    containers: dict(words=["a"], grid=[[1, 2], []], scores={"a": 1.0}, nested={"k": [1]}),
    nested: dict(center={"x": 1, "y": 2}, corner={"x": 3, "y": 4}, path=[{"x": 5, "y": 6}], named={"p": {"x": 7, "y": 8}}, color=2),
    sorted_fields: dict(zeta=1, alpha="a", middle={"v": "w"}),
}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.__name__)
def test_instances_show_and_compare_as_the_official(shape: Callable[[ModuleType], type]) -> None:
    theirs, mine = shape(official), shape(ours)
    values = SAMPLE_VALUES[shape]
    a, b = mine(**values), mine(**values)
    assert a == b and not (a != b)
    if shape is primitives:  # nested records show as object reprs, which differ by address
        assert str(a) == str(theirs(**values))
    assert list(vars(a)) == list(vars(theirs(**values)))
    assert a != mine()


def test_fields_take_their_defaults_and_nested_records_their_template() -> None:
    theirs, mine = required_and_defaults(official)(), required_and_defaults(ours)()
    assert str(mine) == str(theirs)
    shape_cls = nested(ours)
    template = shape_cls.__dict__["corner"]
    corner = shape_cls().corner
    assert type(corner) is type(template) and corner == template and corner is not template


def test_str_lists_the_flags_then_the_fields() -> None:
    record = primitives(ours)(s="x")
    assert str(record).startswith("{'_required_default': False, '_default': None, '_required': False, 's': 'x'")


def test_dicts_build_nested_records_in_fields_arrays_and_maps() -> None:
    shape = nested(ours)(**SAMPLE_VALUES[nested])
    point = type(shape.center)
    assert shape.center == point(x=1, y=2)
    assert shape.path == [point(x=5, y=6)]
    assert shape.named == {"p": point(x=7, y=8)}
    assert shape.color is Color.GREEN


def test_unknown_keyword_arguments_are_ignored_as_by_the_official() -> None:
    # Decoding relies on it: a newer writer's extra fields do not break an older reader.
    assert primitives(ours)(s="a", extra=1) == primitives(ours)(s="a")
    assert str(primitives(ours)(s="a", extra=1)) == str(primitives(official)(s="a", extra=1))


def test_fields_of_base_classes_are_not_inherited_as_by_the_official() -> None:
    def derived(m: ModuleType) -> type:
        class Base(m.Record):
            a = m.String()

        class Derived(Base):
            b = m.Integer()

        return Derived

    assert derived(ours).schema() == derived(official).schema()


def test_setting_a_field_to_none_gives_its_default_unless_required() -> None:
    record = required_and_defaults(ours)(name="n")
    record.count = None
    assert record.count == 3
    with pytest.raises(TypeError, match="'name'"):
        record.name = None


# (field name, bad value) on the record of each shape: the official raises the same exception type.
BAD_VALUES = [
    (primitives, "s", 5),
    (primitives, "i", "1"),
    (primitives, "lo", 1.5),
    (primitives, "f", "x"),
    (primitives, "d", [1]),
    (primitives, "b", 1),
    (required_and_defaults, "name", None),
    (required_and_defaults, "color", "BLUE"),
    (required_and_defaults, "color", 7),
    (required_and_defaults, "color", 1.0),
    (required_and_defaults, "tags", "a"),
    (required_and_defaults, "tags", ["a", 1]),
    (required_and_defaults, "nothing", 0),
    (containers, "scores", {1: 1.0}),
    (containers, "scores", {"a": "x"}),
    (containers, "grid", [1]),
    (nested, "center", 5),
    (nested, "center", primitives(ours)()),
    (nested, "path", [5]),
]


def _value_id(value: object) -> str:
    """A test id that is the same in every process (no object address in it)."""
    name = getattr(value, "__name__", None)
    if name is not None:
        return name
    text = repr(value)
    return type(value).__name__ if " at 0x" in text else text


@pytest.mark.parametrize(("shape", "field", "value"), BAD_VALUES, ids=_value_id)
def test_a_bad_value_raises_what_the_official_raises_naming_the_field(shape: Callable[[ModuleType], type], field: str, value: Any) -> None:
    theirs, mine = shape(official), shape(ours)
    with pytest.raises(Exception) as expected:
        theirs(**{field: value})
    with pytest.raises(type(expected.value), match=f"'{field}'"):
        mine(**{field: value})
    record = mine()
    with pytest.raises(type(expected.value), match=f"'{field}'"):
        setattr(record, field, value)


def test_an_undeclared_attribute_raises_attribute_error_as_the_official() -> None:
    with pytest.raises(AttributeError):
        primitives(official)().nope = 1
    with pytest.raises(AttributeError, match="'nope'"):
        primitives(ours)().nope = 1


def test_a_bad_default_raises_when_the_field_is_declared() -> None:
    with pytest.raises(TypeError, match="'default'"):
        ours.Integer(default="1")
    with pytest.raises(TypeError):
        official.Integer(default="1")


def test_field_level_schema_methods() -> None:
    assert ours.String().schema() == official.String().schema() == "string"
    assert ours.Array(ours.Integer()).schema() == official.Array(official.Integer()).schema()
    assert ours.Map(ours.Bytes()).schema() == official.Map(official.Bytes()).schema()
    assert ours.CustomEnum(Color).schema() == official.CustomEnum(Color).schema()
    assert nested(ours)().type() == "Shape" and nested(ours)().python_type().__name__ == "Shape"


# Deliberate differences: each where the official module accepts what it cannot encode, or fails later.


def test_bytes_field_refuses_non_bytes_where_the_official_accepts_anything() -> None:
    assert primitives(official)(by=5).by == 5
    with pytest.raises(TypeError, match="'by'"):
        primitives(ours)(by=5)
    assert primitives(ours)(by="é").by == "é".encode()


def test_an_array_of_enums_declares_the_enum_where_the_official_writes_a_bare_enum() -> None:
    assert official.Array(official.CustomEnum(Color)).schema() == {"type": "array", "items": "enum"}  # not valid Avro
    assert ours.Array(ours.CustomEnum(Color)).schema() == {
        "type": "array",
        "items": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]},
    }


def test_an_enum_reads_a_string_value_as_well_as_a_name() -> None:
    field = ours.CustomEnum(Size)
    assert field.validate_type("size", "LARGE") is Size.LARGE
    assert field.validate_type("size", "l") is Size.LARGE  # what JSON carries
    with pytest.raises(TypeError):
        official.CustomEnum(Size).validate_type("size", "l")


def test_containers_take_field_instances_only() -> None:
    with pytest.raises(TypeError):
        ours.Array(ours.String)  # a class, not an instance
    with pytest.raises(TypeError):
        ours.Map(primitives(ours))
    with pytest.raises(TypeError):
        ours.CustomEnum(int)


def test_defaults_and_nested_templates_are_not_shared_between_instances() -> None:
    defaults = required_and_defaults(ours)
    first, second = defaults(), defaults()
    first.tags.append("b")
    assert second.tags == ["a"]
    shape = nested(ours)
    a, b = shape(), shape()
    a.corner.x = 9
    assert b.corner.x is None


def test_comparing_with_a_non_record_is_false_not_an_error() -> None:
    assert primitives(ours)() != 5
    with pytest.raises(AttributeError):
        primitives(official)() == 5  # noqa: B015
