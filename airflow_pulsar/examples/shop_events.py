"""Functions the example DAGs call by dotted path: a web shop's event stream, its tally, its alerts.

They live in the provider's package rather than next to the DAG files because the asset watcher's
filter, ``is_alert``, runs in Airflow's triggerer, which imports from installed packages and the
plugins folder but not from the DAGs folder. Operators name them as
``"airflow_pulsar.examples.shop_events.generate"`` and so on. Nothing here opens a connection when
imported.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TOPIC = "persistent://public/default/shop-events"
ALERTS_TOPIC = "persistent://public/default/shop-alerts"
PARTITIONS = 4

COUNTRIES = ("DE", "FR", "NL", "PL", "SE", "ES", "IT")
PRODUCTS = {"kettle": 39.0, "lamp": 24.5, "desk": 249.0, "chair": 129.0, "mug": 8.9, "monitor": 319.0}
EVENT_TYPES = ("page_view", "page_view", "page_view", "add_to_cart", "add_to_cart", "order_placed")
# The columns of an event, for the ingestion DAG's JSON value schema (Spark DDL).
EVENT_SCHEMA = (
    "event_type STRING, user_id STRING, country STRING, ts BIGINT, product STRING, quantity INT, amount DOUBLE"
)
# An order at or above this total also goes to the alerts topic, for the asset-driven DAG.
LARGE_ORDER_EUR = 500.0


def _event(rng: random.Random, now_ms: int) -> dict[str, Any]:
    kind = rng.choice(EVENT_TYPES)
    event: dict[str, Any] = {
        "event_type": kind,
        "user_id": f"user-{rng.randrange(500):03d}",
        "country": rng.choice(COUNTRIES),
        "ts": now_ms - rng.randrange(60_000),
    }
    if kind != "page_view":
        product = rng.choice(list(PRODUCTS))
        quantity = rng.randint(1, 4)
        event.update(product=product, quantity=quantity, amount=round(PRODUCTS[product] * quantity, 2))
    return event


def generate(
    count: int = 1000, seed: int | str | None = None, at_ms: int | None = None
) -> Iterator[tuple[str, str, dict[str, str]]]:
    """``count`` shop events as ``(user id, JSON, properties)``: keyed by user so a user's events stay in order.

    The same ``seed`` and ``at_ms`` (the time the events lead up to, default now) give the same
    events, so two tasks of one run can publish the events and the alerts derived from them.
    """
    rng = random.Random(seed)
    now_ms = int(time.time() * 1000) if at_ms is None else int(at_ms)
    for _ in range(int(count)):
        event = _event(rng, now_ms)
        yield event["user_id"], json.dumps(event), {"event_type": event["event_type"]}


def large_orders(
    count: int = 1000, seed: int | str | None = None, at_ms: int | None = None
) -> Iterator[tuple[str, str, dict[str, str]]]:
    """Alerts for the large orders (amount >= LARGE_ORDER_EUR) among the events :func:`generate`
    makes from the same arguments."""
    for user, value, _ in generate(count, seed, at_ms):
        event = json.loads(value)
        if event.get("event_type") == "order_placed" and event["amount"] >= LARGE_ORDER_EUR:
            yield user, value, {"severity": "high", "reason": "large_order"}


def ensure_topic(subscriptions: tuple[str, ...] = ()) -> int:
    """Create ``shop-events`` with its partitions, and the given subscriptions from the earliest
    message, unless they exist; return the partition count. Safe to run any number of times."""
    from airflow_pulsar.client import InitialPosition
    from airflow_pulsar.client.admin import AdminConflictError
    from airflow_pulsar.hooks.pulsar import PulsarHook

    with PulsarHook() as hook:
        admin = hook.get_admin()
        partitions = admin.partition_count(TOPIC)
        if not partitions:
            admin.create_partitioned_topic(TOPIC, PARTITIONS)
            partitions = PARTITIONS
        existing = set(admin.list_subscriptions(TOPIC))
        for subscription in subscriptions:
            if subscription not in existing:
                try:
                    admin.create_subscription(TOPIC, subscription, InitialPosition.Earliest)
                except AdminConflictError:  # made meanwhile by another run
                    pass
    return partitions


def example_dir() -> Path:
    """Where the examples keep their output: $AIRFLOW_PULSAR_EXAMPLES_DIR, else under AIRFLOW_HOME.

    Only a path: DAG files call this while they are parsed, so it creates nothing.
    """
    default = Path(os.environ.get("AIRFLOW_HOME", Path.home() / "airflow")) / "pulsar-examples"
    return Path(os.environ.get("AIRFLOW_PULSAR_EXAMPLES_DIR", default))


TABLE_FORMAT_ENV = "AIRFLOW_PULSAR_EXAMPLES_TABLE_FORMAT"
TABLE_FORMATS = ("parquet", "delta", "iceberg")


def example_table_format() -> str:
    """The format of the ingestion example's table: $AIRFLOW_PULSAR_EXAMPLES_TABLE_FORMAT, else
    parquet (``make demo FORMAT=delta`` sets it). ValueError naming the variable for another value."""
    chosen = os.environ.get(TABLE_FORMAT_ENV) or "parquet"
    if chosen not in TABLE_FORMATS:
        raise ValueError(f"{TABLE_FORMAT_ENV}={chosen!r}: the ingestion example writes one of {', '.join(TABLE_FORMATS)}")
    return chosen


def tally_orders(messages: list[Any], database: str | None = None) -> None:
    """Add each batch's orders to a per-country revenue table (SQLite), in one transaction.

    Raising here makes the consume operator negatively acknowledge the batch, so a message is
    counted only when its batch commits (and, acknowledged after, counted again only if the
    task dies between the commit and the acknowledgement: at least once, as consumers are).
    """
    orders = [json.loads(m.data()) for m in messages]
    orders = [o for o in orders if o.get("event_type") == "order_placed"]
    path = database or str(example_dir() / "orders.db")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE IF NOT EXISTS revenue (country TEXT PRIMARY KEY, orders INTEGER, amount REAL)")
        for order in orders:
            db.execute(
                "INSERT INTO revenue VALUES (?, 1, ?) ON CONFLICT(country) DO UPDATE SET "
                "orders = orders + 1, amount = amount + excluded.amount",
                (order["country"], order["amount"]),
            )


def is_alert(message: Any, severity: str = "high") -> bool:
    """Whether a message on the alerts topic has the given severity (the asset watcher's filter)."""
    return message.properties().get("severity") == severity
