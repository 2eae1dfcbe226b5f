"""The alert filter of the docs' event-driven example: it runs in Airflow's triggerer."""

from __future__ import annotations

from typing import Any


def is_critical(message: Any) -> bool:
    """Whether the alert is critical: its ``severity`` property says so."""
    return message.properties().get("severity") == "critical"
