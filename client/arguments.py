"""Argument checks: a bad argument raises ``ValueError`` naming it, as the official wrapper does.

The official ``pulsar`` package checks each argument's type before it reaches the C++ core and
raises ``ValueError("Argument <name> is expected to be ...")``; ``pulsar.InvalidConfiguration`` is
kept for a configuration the client refuses at run time. These helpers keep that split, so code
catching ``ValueError`` around a constructor works unchanged with either client.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

E = TypeVar("E", bound=enum.IntEnum)

__all__ = ["check", "check_type", "check_type_or_none", "is_int", "to_enum"]


def is_int(value: Any) -> bool:
    """An int that is not a bool (``True`` is an int to Python, never to a Pulsar setting)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check(ok: bool, name: str, expected: str, value: Any) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``ok``; ``expected`` says what it must be."""
    if not ok:
        raise ValueError(f"Argument {name} must be {expected}, got {value!r}")


def check_type(kind: type | tuple[type, ...], value: Any, name: str) -> None:
    """Raise ``ValueError`` unless ``value`` is a ``kind`` (an int never passes as a bool, nor a bool as an int)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds and int in kinds)
    if not ok:
        names = " or ".join(k.__name__ for k in kinds)
        raise ValueError(f"Argument {name} is expected to be of type '{names}' and not '{type(value).__name__}'")


def check_type_or_none(kind: type | tuple[type, ...], value: Any, name: str) -> None:
    """As :func:`check_type`, letting ``None`` through."""
    if value is not None:
        check_type(kind, value, name)


def to_enum(kind: type[E], value: Any, name: str) -> E:
    """``value`` as a member of ``kind``; the official package's enum members (same numbers) are
    accepted too, so settings written for it carry over."""
    number = getattr(value, "value", value)
    if is_int(number):
        try:
            return kind(number)
        except ValueError:
            pass
    raise ValueError(f"Argument {name} is expected to be a {kind.__name__}, got {value!r}")
