"""User functions the test DAGs name by dotted path (this folder is on sys.path as the DAGs folder)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any


def numbered(count: str, prefix: str = "m") -> Iterator[tuple[str, str, dict[str, str]]]:
    """``count`` messages ``(key, value, properties)``; ``count`` arrives as rendered template text."""
    for i in range(int(count)):
        yield f"k{i}", f"{prefix}{i}", {"i": str(i)}


def record(message: Any, out: str) -> None:
    """Append the message's value to the file ``out``, one per line."""
    with Path(out).open("a") as file:
        file.write(message.data().decode() + "\n")


def record_batch(messages: list[Any], out: str) -> None:
    """Append every value of a batch to ``out``."""
    for message in messages:
        record(message, out)


def record_until(message: Any, out: str, bad: str) -> None:
    """Record the message, but fail on the value ``bad`` (after recording the ones before it)."""
    if message.data().decode() == bad:
        raise ValueError(f"refusing {bad}")
    record(message, out)


def order_number(message: Any, wanted: str) -> dict[str, Any] | None:
    """Match ``order-<wanted>`` and return its number and key."""
    value = message.data().decode()
    if value != f"order-{wanted}":
        return None
    return {"order": int(wanted), "key": message.partition_key()}


def explode(message: Any) -> bool:
    """Always fail."""
    raise RuntimeError(f"cannot judge {message.data()!r}")


def is_alert(message: Any, level: str = "alert") -> bool:
    """Match messages whose ``level`` property is ``level``; fail on messages with no level at all."""
    properties = message.properties()
    if "level" not in properties:
        raise KeyError("message has no level property")
    return properties["level"] == level
