"""How far a batch may acknowledge on a topic written in transactions: each partition's max read
position.

Brokers deliver nothing at or after the first message of an open transaction, and never deliver
transaction markers or aborted messages. The newest entry a reader can be given (the broker's last
message id) may therefore be followed by markers and aborted messages before the max read position;
a batch that takes everything up to that entry also acknowledges those, so they do not stay in the
subscription's backlog. Read before the partitions' last message ids: whatever lies between the
two was already settled (aborted, or a marker) when the max read position was read, so no message
a consumer could receive is acknowledged unread.
"""

from __future__ import annotations

import logging

from airflow_pulsar.client.admin import AdminConnectionError, AdminError, AdminServerError, PulsarAdmin

from ..job.plan import Position

log = logging.getLogger(__name__)


def max_read_positions(admin: PulsarAdmin, topics: list[str]) -> dict[str, Position]:
    """The max read position of each partition topic of ``topics``; none where the broker runs no
    transaction coordinators (it answers 503), or where it cannot be read."""
    positions: dict[str, Position] = {}
    for topic in topics:
        try:
            stats = admin.transaction_buffer_stats(topic)
        except (AdminServerError, AdminConnectionError):  # no coordinators (503), or no admin API: the last message id is the end
            return positions
        except AdminError as exc:
            log.warning("No max read position of %s (%s): its batch ends at its last message.", topic, exc)
            continue
        try:
            positions[topic] = Position.parse(stats["maxReadPosition"])
        except (KeyError, ValueError):
            log.warning("Unreadable transaction buffer stats of %s: %r", topic, stats)
    return positions
