"""Our public surface against the official ``pulsar`` package, name for name and parameter for parameter.

Every public name the official ``pulsar``, ``pulsar.schema`` and ``pulsar.asyncio`` modules define
must exist here; for a Python class its ``__init__`` and public methods must take the same
parameters, in the same order, of the same kinds, with the same defaults; for a class of the C++
core (no Python signatures) its public methods must exist, and an enum must have its members with
their numbers. Extra parameters of ours may follow the official ones, with defaults. What is left
out is listed below, each list saying why.
"""

from __future__ import annotations

import importlib
import inspect
import types
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

OFFICIAL_MODULES = {
    "pulsar": "airflow_pulsar.client",
    "pulsar.schema": "airflow_pulsar.client.schema",
    "pulsar.asyncio": "airflow_pulsar.client.asyncio",
}

# Not offered, by decision (see docs/client.md, "Differences from the official client").
EXCLUDED = {
    # Pulsar Functions: the runtime of functions deployed on a cluster, not client API.
    "pulsar.Function",
    "pulsar.Context",
    "pulsar.SerDe",
    "pulsar.IdentitySerDe",
    "pulsar.PickleSerDe",
    # Athenz authentication (a C++ plugin with no pure-Python counterpart wanted).
    "pulsar.AuthenticationAthenz",
    # The base class loads a C++ authentication plugin from a shared library: no such thing here.
    "pulsar.Authentication.__init__",
    # Constructors that wrap an object of the C++ core: the client builds these, users never do.
    "pulsar.EncryptionContext.__init__",
    "pulsar.EncryptionKey.__init__",
    "pulsar.TableView.__init__",
    "pulsar.asyncio.Producer.__init__",
    "pulsar.asyncio.Consumer.__init__",
    "pulsar.asyncio.Reader.__init__",
}

# Defaults that differ on purpose (each is in docs/client.md's list of differences).
DELIBERATE_DEFAULTS = {
    "pulsar.Client.__init__(tls_validate_hostname)",  # hostname verification on by default
    "pulsar.Client.create_producer(batching_enabled)",  # None: on unless chunking is on
    "pulsar.Client.create_producer(schema)",  # None stands for BytesSchema()
    "pulsar.Client.subscribe(schema)",
    "pulsar.Client.create_reader(schema)",
    "pulsar.Client.create_table_view(schema)",
}


def _official_names(module: types.ModuleType) -> Iterator[tuple[str, Any]]:
    """Public names the official package defines (not what it imports, such as ``typing.List``)."""
    for name in sorted(dir(module)):
        value = getattr(module, name)
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if str(getattr(value, "__module__", "")).split(".")[0] in ("pulsar", "_pulsar"):
            yield name, value


def _is_core_enum(value: Any) -> bool:
    return isinstance(value, type) and hasattr(value, "__members__") and not issubclass(value, BaseException)


def _is_core_class(value: Any) -> bool:
    return isinstance(value, type) and value.__module__ == "_pulsar"


def _normal_default(value: Any) -> Any:
    if hasattr(value, "name") and hasattr(value, "value"):  # an enum member, ours or the core's
        return (value.name, int(value.value))
    if value is inspect.Parameter.empty or value is None or isinstance(value, (int, float, str, bytes)):
        return value
    return type(value).__name__


def _signature_problems(label: str, official: Any, ours: Any) -> list[str]:
    try:
        theirs = list(inspect.signature(official).parameters.values())
    except (TypeError, ValueError):
        return []  # no Python signature to compare
    mine = list(inspect.signature(ours).parameters.values())
    problems = []
    for index, parameter in enumerate(theirs):
        where = f"{label}({parameter.name})"
        if where in EXCLUDED:
            continue
        if index >= len(mine) or (mine[index].name, mine[index].kind) != (parameter.name, parameter.kind):
            found = [(p.name, p.kind.name) for p in mine]
            problems.append(f"{label}: parameter {index} should be {parameter.name} ({parameter.kind.name}); ours: {found}")
            break
        if where not in DELIBERATE_DEFAULTS and _normal_default(mine[index].default) != _normal_default(parameter.default):
            problems.append(f"{where}: default {parameter.default!r}, ours {mine[index].default!r}")
    for extra in mine[len(theirs):]:
        if extra.default is inspect.Parameter.empty and extra.kind not in (extra.VAR_POSITIONAL, extra.VAR_KEYWORD):
            problems.append(f"{label}: our extra parameter {extra.name} has no default")
    return problems


def _class_problems(label: str, official: type, ours: Any) -> list[str]:
    if not isinstance(ours, type):
        return [f"{label}: ours is not a class"]
    if _is_core_enum(official):
        return [
            f"{label}.{member}: missing or not {int(value)}"
            for member, value in official.__members__.items()  # type: ignore[attr-defined]
            if not hasattr(ours, member) or int(getattr(ours, member).value) != int(value)
        ]
    problems = []
    members = vars(official)
    if "__init__" in members and f"{label}.__init__" not in EXCLUDED:
        problems += _signature_problems(f"{label}.__init__", official.__init__, ours.__init__)
    for name, value in members.items():
        member = f"{label}.{name}"
        if name.startswith("_") or member in EXCLUDED or _is_core_class(official) and not callable(value):
            continue
        if not hasattr(ours, name):
            problems.append(f"{member}: missing")
        elif isinstance(value, (types.FunctionType, staticmethod, classmethod)) and not _is_core_class(official):
            problems += _signature_problems(member, getattr(official, name), getattr(ours, name))
    return problems


def _module_problems(official_name: str) -> list[str]:
    if official_name in EXCLUDED:
        return []
    official = importlib.import_module(official_name)
    try:
        ours = importlib.import_module(OFFICIAL_MODULES[official_name])
    except ImportError:
        return [f"{official_name}: no module {OFFICIAL_MODULES[official_name]}"]
    problems = []
    for name, value in _official_names(official):
        label = f"{official_name}.{name}"
        if label in EXCLUDED:
            continue
        if not hasattr(ours, name):
            problems.append(f"{label}: missing")
        elif isinstance(value, type):
            problems += _class_problems(label, value, getattr(ours, name))
        elif callable(value):
            problems += _signature_problems(label, value, getattr(ours, name))
    return problems


@pytest.mark.parametrize("official_name", sorted(OFFICIAL_MODULES))
def test_every_official_name_and_parameter_is_ours(official_name: str) -> None:
    assert pulsar.__version__ == "3.13.0", "the lists above were made against pulsar-client 3.13.0"
    problems = _module_problems(official_name)
    assert not problems, "\n".join(problems)


def test_the_comparison_catches_a_moved_parameter() -> None:
    """The walk itself can fail: a parameter out of place, a changed default and a missing name are reported."""

    class Official:
        def __init__(self, url: str, auth: object = None, timeout: int = 30) -> None: ...

        def send(self, content: bytes) -> None: ...

    class Ours:
        def __init__(self, url: str, timeout: int = 30, auth: object = None) -> None: ...

    class OursDefault:
        def __init__(self, url: str, auth: object = None, timeout: int = 10) -> None: ...

        def send(self, content: bytes) -> None: ...

    assert any("should be auth" in p for p in _class_problems("x.C", Official, Ours))
    assert any("x.C.send: missing" in p for p in _class_problems("x.C", Official, Ours))
    assert _class_problems("x.C", Official, OursDefault) == ["x.C.__init__(timeout): default 30, ours 10"]
