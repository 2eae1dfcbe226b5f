"""Admin REST client for Pulsar's ``/admin/v2`` API, sync (:class:`PulsarAdmin`) and async
(:class:`AsyncPulsarAdmin`), over httpx.

The paths, request bodies, response decoding and error handling live once, in a sans-IO layer:
every operation (modules ``operations``, ``backlog``) is a generator that yields
:class:`AdminCall` descriptions (``calls``) and receives their decoded results (``backlog``
yields two calls, ``message_backlog`` a few per partition, the partitions side by side, the
others one). An ``Exchange`` turns calls into ``httpx.Request`` objects, follows Pulsar's 307
redirects to the owning broker, decodes responses and raises errors (``errors``); a
``Scheduler`` runs the sub-operations an operation waits on together (``concurrently``), with at
most ``max_concurrent_requests`` calls in flight. Each public
method is declared once, from its operation (``base``); the two clients (``sync``,
``aio``) only move requests and responses through their httpx client, so they cannot drift
apart.

Only Pulsar's own paths and JSON field names are used, so this works against the standalone broker
and a real Pulsar cluster alike::

    with PulsarAdmin("http://localhost:8080") as admin:
        admin.create_partitioned_topic("orders", 4)
        print(admin.message_backlog("orders", "ingest").messages)

Credentials come from ``authentication.http_headers()`` on every request (so refreshed tokens are
picked up) and never appear in errors, reprs or logs.
"""

from __future__ import annotations

from ..message_count import MessageBacklog, PartitionMessageBacklog, Position
from .aio import AsyncPulsarAdmin
from .backlog import PartitionBacklog, SubscriptionBacklog
from .base import DEFAULT_MAX_CONCURRENT_REQUESTS
from .calls import AdminCall, Operation, PeekedMessage
from .errors import (
    AdminAuthenticationError,
    AdminAuthorizationError,
    AdminConflictError,
    AdminConnectionError,
    AdminError,
    AdminNotFoundError,
    AdminPreconditionFailedError,
    AdminServerError,
    AdminTimeoutError,
)
from .permissions import AuthAction
from .sync import PulsarAdmin

__all__ = [
    "DEFAULT_MAX_CONCURRENT_REQUESTS",
    "AdminAuthenticationError",
    "AdminAuthorizationError",
    "AdminCall",
    "AdminConflictError",
    "AdminConnectionError",
    "AdminError",
    "AdminNotFoundError",
    "AdminPreconditionFailedError",
    "AdminServerError",
    "AdminTimeoutError",
    "AsyncPulsarAdmin",
    "AuthAction",
    "MessageBacklog",
    "Operation",
    "PartitionBacklog",
    "PartitionMessageBacklog",
    "PeekedMessage",
    "Position",
    "PulsarAdmin",
    "SubscriptionBacklog",
]
