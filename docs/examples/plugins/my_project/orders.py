"""Orders for the docs' example DAGs: what the producer sends, and what consumers do with them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

ORDERS = 10_000


def rows() -> Iterator[tuple[str, str]]:
    """Ten thousand orders, keyed by customer, as JSON text."""
    for number in range(ORDERS):
        yield f"customer-{number % 7}", json.dumps({"order": number, "total": number % 100})


def load(messages: list[Any]) -> None:
    """A batch of orders, loaded somewhere; here, summed and printed."""
    total = sum(json.loads(message.data())["total"] for message in messages)
    print(f"loaded {len(messages)} orders worth {total}")


def is_order(message: Any, number: int) -> bool:
    """Whether ``message`` is order ``number``."""
    return json.loads(message.data())["order"] == number
