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


def with_tax(message: Any, rate: float) -> tuple[str, str]:
    """An order with its tax added, under the same key: what an exactly-once transform publishes."""
    order = json.loads(message.data())
    order["tax"] = round(order["total"] * rate, 2)
    return message.partition_key(), json.dumps(order)


def with_region(messages: list[Any]) -> list[tuple[str, str, dict[str, str]]]:
    """A batch of orders, each tagged with the region topic it came from."""
    region = {"region": messages[0].topic_name().rsplit("-", 1)[-1]}
    return [(message.partition_key(), message.data().decode(), region) for message in messages]
