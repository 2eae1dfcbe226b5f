"""Who may see what on the page: Airflow's auth manager decides, as for the REST API.

The page shows Pulsar connections (their admin URLs and everything read through them), so a user
must be allowed to read connections at all (else 403), and sees only the connections the auth
manager lets them read; links to runs are given only for DAGs the user may read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import HTTPException, status

NO_CONNECTION_ACCESS = (
    "The Pulsar page shows Airflow connections of type pulsar and what their brokers report; "
    "your role may not read connections. Ask an administrator for read access to connections."
)


def _auth_manager() -> Any:
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager()


def require_connection_access(user: Any) -> None:
    """403 with :data:`NO_CONNECTION_ACCESS` unless ``user`` may read connections."""
    if not _auth_manager().is_authorized_connection(method="GET", user=user):
        raise HTTPException(status.HTTP_403_FORBIDDEN, NO_CONNECTION_ACCESS)


def readable_connections(user: Any, conn_ids: Iterable[str]) -> list[str]:
    """Those of ``conn_ids`` that ``user`` may read."""
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails

    manager = _auth_manager()
    return [
        conn_id for conn_id in conn_ids
        if manager.is_authorized_connection(method="GET", user=user, details=ConnectionDetails(conn_id=conn_id))
    ]  # fmt: skip


def readable_dags(user: Any) -> set[str]:
    """The DAG ids ``user`` may read (for the links to runs)."""
    return set(_auth_manager().get_authorized_dag_ids(user=user, method="GET"))
