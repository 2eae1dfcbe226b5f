"""User functions the test DAGs name by dotted path, in Airflow's plugins folder: every Airflow component (the
triggerer too) puts that folder on its import path."""

from __future__ import annotations

import time
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


def record_batch_until(messages: list[Any], out: str, bad: str) -> None:
    """Record a batch, but fail on a batch holding the value ``bad`` (recording none of it)."""
    if any(message.data().decode() == bad for message in messages):
        raise ValueError(f"refusing a batch with {bad}")
    record_batch(messages, out)


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


def positions(count: str, marker: str | None = None, slow_after: str | None = None) -> Iterator[str]:
    """``count`` unkeyed messages ``m0, m1, ...``. Given ``marker`` and ``slow_after``: once that many
    are yielded, create the ``marker`` file and yield the rest slowly (2 ms each), so a test can see
    the task is sending and kill it."""
    for i in range(int(count)):
        if marker and slow_after is not None and i >= int(slow_after):
            if i == int(slow_after):
                Path(marker).touch()
            time.sleep(0.002)
        yield f"m{i}"


def failing_once(count: str, marker: str, fail_after: str) -> Iterator[str]:
    """``count`` messages ``m0, m1, ...``, except on the first call (no ``marker`` file yet), which
    creates the marker and fails after yielding ``fail_after`` of them."""
    first_try = not Path(marker).exists()
    Path(marker).touch()
    for i in range(int(count)):
        if first_try and i == int(fail_after):
            raise RuntimeError(f"failing after {fail_after} messages, as told")
        yield f"m{i}"


def with_oversized(count: str, at: str) -> Iterator[str]:
    """``count`` messages ``m0, m1, ...``, the one at position ``at`` too big for any broker (6 MiB)."""
    for i in range(int(count)):
        yield "x" * (6 << 20) if i == int(at) else f"m{i}"


# The produce operator's delivery callback appends here: dag.test() runs the task in the test's process.
DELIVERIES: list[tuple[str, str]] = []


def note_delivery(result: Any, message_id: Any) -> None:
    """A delivery callback: keep the result's name and the message id as text."""
    DELIVERIES.append((result.name, str(message_id)))
