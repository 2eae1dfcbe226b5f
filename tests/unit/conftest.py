"""Fixtures of the unit tests that drive a partition producer or consumer without a broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_pulsar.client.timer import Timer
from tests.support.scripted_connection import FakeServices


@pytest.fixture
def timer() -> Iterator[Timer]:
    """A client timer of the test's own, closed after it."""
    made = Timer("test-timer")
    yield made
    made.close()


@pytest.fixture
def services(timer: Timer) -> FakeServices:
    """The client's services on scripted connections (see ``scripted_connection``)."""
    return FakeServices(timer)
