"""Pulsar's epoch milliseconds as the pendulum times and ISO 8601 text handed to Airflow."""

from __future__ import annotations

import pendulum

from airflow_pulsar.times import iso_time, utc_datetime


def test_milliseconds_become_utc_datetimes_and_back() -> None:
    moment = utc_datetime(1_700_000_000_123)
    assert moment == pendulum.datetime(2023, 11, 14, 22, 13, 20, 123000, tz="UTC")
    assert iso_time(1_700_000_000_123) == "2023-11-14T22:13:20.123+00:00"
    assert round(pendulum.parse(iso_time(1_700_000_000_123)).timestamp() * 1000) == 1_700_000_000_123


def test_unset_times_stay_none() -> None:
    # Pulsar writes 0 for a message without an event time.
    assert iso_time(0) is None and iso_time(None) is None
