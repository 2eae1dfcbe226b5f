"""Provider metadata read by Airflow's providers manager through the entry point."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    """Describe this provider to Airflow (package name, versions, integrations)."""
    return {
        "package-name": "airflow-pulsar",
        "name": "Apache Pulsar",
        "description": "Apache Pulsar (https://pulsar.apache.org/) integration with a bundled pure-Python client.",
        "versions": ["0.1.0"],
        "integrations": [
            {
                "integration-name": "Apache Pulsar",
                "external-doc-url": "https://pulsar.apache.org/",
                "tags": ["apache"],
            }
        ],
    }
