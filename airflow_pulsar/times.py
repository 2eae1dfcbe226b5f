"""Times handed to Airflow: Pulsar's epoch milliseconds as pendulum datetimes in UTC.

Pulsar stamps messages in milliseconds since the epoch; Airflow's own times are pendulum
datetimes. XCom values and trigger events are JSON, so a time crosses as ISO 8601 text (next to
Pulsar's milliseconds where those are kept), which ``pendulum.parse`` turns back into a datetime.
"""

from __future__ import annotations

import pendulum


def utc_datetime(epoch_millis: int) -> pendulum.DateTime:
    """The UTC datetime of a Pulsar timestamp (milliseconds since the epoch)."""
    return pendulum.from_timestamp(epoch_millis / 1000, tz="UTC")


def iso_time(epoch_millis: int | None) -> str | None:
    """ISO 8601 text (UTC, to the millisecond) of a Pulsar timestamp; None for None or 0, which
    Pulsar uses for "not set" (a message without an event time)."""
    if not epoch_millis:
        return None
    return utc_datetime(epoch_millis).isoformat(timespec="milliseconds")
