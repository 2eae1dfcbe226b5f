"""Waiting in tests for what another process does: poll a condition until it holds or time runs out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def wait_until(
    condition: Callable[[], Any], what: str = "the condition", timeout: float = 10.0, interval: float = 0.05
) -> Any:
    """Poll ``condition`` until it returns something truthy, and return that; fail the test naming
    ``what`` (and the last value) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what} (last value {last!r})")
        time.sleep(interval)
