"""The Airflow plugin that adds the Pulsar page: registered through the ``airflow.plugins`` entry
point, which Airflow 3 loads in every component whatever ``[core] lazy_discover_providers`` says
(a provider's ``plugins`` in its provider info are loaded only with that option off)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_pulsar.ui.app import URL_PREFIX, create_app


class PulsarPlugin(AirflowPlugin):
    """The Pulsar page: a FastAPI app the api-server mounts, shown in the UI's navigation."""

    name = "pulsar"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Pulsar"}]
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
