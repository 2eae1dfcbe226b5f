"""Events for the docs' example DAGs; one of them cannot be loaded and goes to the dead-letter topic."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def produce() -> Iterator[str]:
    """Nine good events and a bad one."""
    for number in range(9):
        yield f"event-{number}"
    yield "bad-event"


def load_one(message: Any) -> None:
    """Load one event; a bad one raises, every time."""
    if message.data() == b"bad-event":
        raise ValueError("cannot load bad-event")
    print(f"loaded {message.data().decode()}")
