"""The Airflow connections of type ``pulsar``: those in the metadata database and those given as
``AIRFLOW_CONN_*`` environment variables (other secrets backends cannot be listed; a connection
kept only there can be named in ``[pulsar] ui_connections``)."""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

_ENV_PREFIX = "AIRFLOW_CONN_"


def pulsar_connection_ids() -> list[str]:
    """Every ``pulsar`` connection id found, sorted."""
    from airflow.configuration import conf
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_pulsar.hooks.pulsar import PulsarHook

    with create_session() as session:
        found = set(session.scalars(select(Connection.conn_id).where(Connection.conn_type == PulsarHook.conn_type)))
    named = [name.strip() for name in conf.get("pulsar", "ui_connections", fallback="").split(",") if name.strip()]
    for conn_id in [key[len(_ENV_PREFIX):].lower() for key in os.environ if key.startswith(_ENV_PREFIX)] + named:
        if conn_id in found:
            continue
        try:
            conn_type = PulsarHook.get_connection(conn_id).conn_type
        except Exception as exc:  # noqa: BLE001 - an unreadable variable is not a page failure
            log.warning("Cannot read connection %s: %s", conn_id, exc)
            continue
        if conn_type == PulsarHook.conn_type or conn_id in named:
            found.add(conn_id)
    return sorted(found)


def watched_namespaces() -> list[str]:
    """The namespaces whose topics the page lists: ``[pulsar] ui_namespaces``, default public/default."""
    from airflow.configuration import conf

    text = conf.get("pulsar", "ui_namespaces", fallback="public/default")
    return [name.strip() for name in text.split(",") if name.strip()] or ["public/default"]
