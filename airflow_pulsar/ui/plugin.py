"""The Airflow plugin that adds the Pulsar page: registered through the ``airflow.plugins`` entry
point, which Airflow 3 loads in every component whatever ``[core] lazy_discover_providers`` says
(a provider's ``plugins`` in its provider info are loaded only with that option off).

Every component imports its plugins (the scheduler, the triggerer, task processes), and only the
api-server serves the page: the app is built on its first request, so that the others never
import the page's modules (FastAPI, Airflow's API security, the admin client: over a second of CPU).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/pulsar"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class PageApp:
    """The ASGI app the api-server mounts at :data:`URL_PREFIX`: the page's FastAPI app
    (:func:`airflow_pulsar.ui.app.create_app`), built on the first request."""

    def __init__(self) -> None:
        self._app: Callable[[Scope, Receive, Send], Awaitable[None]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            from airflow_pulsar.ui.app import create_app

            self._app = create_app()
        await self._app(scope, receive, send)


class PulsarPlugin(AirflowPlugin):
    """The Pulsar page: a FastAPI app the api-server mounts, shown in the UI's navigation."""

    name = "pulsar"
    fastapi_apps = [{"app": PageApp(), "url_prefix": URL_PREFIX, "name": "Pulsar"}]
    external_views = [
        {
            "name": "Pulsar",
            "href": f"{URL_PREFIX}/",
            "url_route": "pulsar",
            "destination": "nav",
            "nav_top_level": True,
            "icon": f"{URL_PREFIX}/icon.svg",
        }
    ]
