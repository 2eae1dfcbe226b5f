"""The page's FastAPI app, which the api-server mounts at ``/pulsar`` (see :mod:`.plugin`): ``/``
is the page, ``/overview.json`` the same figures as JSON, and every route asks Airflow's auth
manager first."""

from __future__ import annotations

import asyncio
import dataclasses
from functools import partial
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, Response

from airflow_pulsar.ui import access, connections, history
from airflow_pulsar.ui.cache import RefreshCache
from airflow_pulsar.ui.overview import ConnectionOverview, read_connection
from airflow_pulsar.ui.page import Series, render_page, render_refusal
from airflow_pulsar.ui.recount import CountMemo
from airflow_pulsar.ui.runs import batch_runs

DEFAULT_REFRESH_SECONDS = 10

ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#3182ce" stroke-width="2">'
    '<path d="M3 12h4l3-8 4 16 3-8h4"/></svg>'
)

_overviews: RefreshCache[ConnectionOverview] = RefreshCache()
# Each connection's message counts, reused by its next refreshes while nothing moved.
_counts: dict[str, CountMemo] = {}


def _current_user() -> Any:
    # Airflow's own dependency: the user of the request's token (the UI's cookie or a bearer token).
    from airflow.api_fastapi.core_api.security import get_user

    return get_user


CurrentUser = Annotated[Any, Depends(_current_user())]


async def page_data(user: Any) -> tuple[list[ConnectionOverview], dict[str, Series]]:
    """The overviews of the connections ``user`` may read, with run links the user may follow,
    and their recorded backlog readings."""
    access.require_connection_access(user)
    conn_ids = access.readable_connections(user, await asyncio.to_thread(connections.pulsar_connection_ids))
    namespaces = tuple(connections.watched_namespaces())
    reads = (
        _overviews.get((conn_id, namespaces), partial(read_connection, conn_id, namespaces, _counts.setdefault(conn_id, CountMemo())))
        for conn_id in conn_ids
    )
    overviews = await asyncio.gather(*reads)
    links = await asyncio.to_thread(batch_runs, access.readable_dags(user)) if any(o.batches for o in overviews) else {}
    linked = [
        dataclasses.replace(o, batches=tuple(dataclasses.replace(b, run=links.get(b.batch_id)) for b in o.batches))
        for o in overviews
    ]
    series: dict[str, Series] = {o.conn_id: await asyncio.to_thread(history.series, o.conn_id) for o in linked}
    return linked, series


def create_app() -> FastAPI:
    """The page's app."""
    app = FastAPI(title="Pulsar", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    async def page(user: CurrentUser, refresh: Annotated[int, Query(ge=0, le=3600)] = DEFAULT_REFRESH_SECONDS) -> HTMLResponse:
        try:
            overviews, series = await page_data(user)
        except HTTPException as refused:
            return HTMLResponse(render_refusal(str(refused.detail)), status_code=refused.status_code)
        return HTMLResponse(render_page(overviews, series, refresh))

    @app.get("/overview.json")
    async def overview(user: CurrentUser) -> dict[str, Any]:
        overviews, series = await page_data(user)
        history_of = {
            conn_id: [
                {"topic": t, "subscription": s, "readings": [dataclasses.asdict(p) for p in points]} for (t, s), points in found.items()
            ]
            for conn_id, found in series.items()
        }
        return {"connections": [dataclasses.asdict(o) for o in overviews], "history": history_of}

    @app.get("/icon.svg")
    async def icon() -> Response:
        return Response(ICON, media_type="image/svg+xml")

    return app
