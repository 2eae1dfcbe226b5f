"""Provider metadata read by Airflow's providers manager through the entry point.

The connection form is declared here (``conn-fields`` and ``ui-field-behaviour``), as Airflow 3.2+
prefers: the UI reads it without importing the hook. ``PulsarHook`` builds its (deprecated)
``get_ui_field_behaviour`` answer from the same constants.
Keep this module free of heavy imports: Airflow imports it in every process that lists providers.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

HOOK_CLASS_NAME = "airflow_pulsar.hooks.pulsar.PulsarHook"

# The ``pulsar`` asset URI scheme: Airflow normalises such URIs with the handler, creates assets
# with the factory and hands them to OpenLineage through the converter.
_ASSET_MODULE = "airflow_pulsar.assets.pulsar"
PULSAR_ASSET_URIS: list[dict[str, Any]] = [
    {
        "schemes": ["pulsar"],
        "handler": f"{_ASSET_MODULE}.sanitize_uri",
        "factory": f"{_ASSET_MODULE}.create_asset",
        "to_openlineage_converter": f"{_ASSET_MODULE}.convert_asset_to_openlineage",
    }
]

# Extra fields of a ``pulsar`` connection, stored unprefixed in Connection.extra.
PULSAR_CONN_FIELDS: dict[str, dict[str, Any]] = {
    "admin_url": {
        "label": "Admin URL",
        "description": (
            "Admin REST URL; default http://{host}:8080, or https://{host}:8443 with TLS "
            "(the host itself when it is an http:// or https:// service URL)."
        ),
        "schema": {"type": ["string", "null"]},
    },
    "use_tls": {
        "label": "Use TLS",
        "description": "Connect with pulsar+ssl:// (default port 6651); implied by a pulsar+ssl:// or https:// host.",
        "schema": {"type": ["boolean", "null"], "default": False},
    },
    "tls_trust_certs_file_path": {
        "label": "TLS trust certs path",
        "description": "PEM file of CA certificates trusted for the broker's certificate.",
        "schema": {"type": ["string", "null"]},
    },
    "tls_allow_insecure_connection": {
        "label": "TLS allow insecure connection",
        "description": "Accept any broker certificate (testing only).",
        "schema": {"type": ["boolean", "null"], "default": False},
    },
    "tls_validate_hostname": {
        "label": "TLS validate hostname",
        "description": "Check that the broker certificate matches the host name.",
        "schema": {"type": ["boolean", "null"], "default": True},
    },
    "auth_method": {
        "label": "Authentication",
        "description": (
            "token: the password is a JWT (the default when a password is set); basic: login and password; "
            "tls: the client certificate below; oauth2: client credentials from the OAuth2 fields below "
            "(client id and secret as login and password, or a credentials file)."
        ),
        "schema": {"type": ["string", "null"], "enum": [None, "token", "basic", "tls", "oauth2"]},
    },
    "tls_certificate_file_path": {
        "label": "TLS client certificate path",
        "description": "PEM certificate the client presents (mutual TLS, and the credentials of tls authentication).",
        "schema": {"type": ["string", "null"]},
    },
    "tls_private_key_file_path": {
        "label": "TLS client key path",
        "description": "PEM private key of the client certificate.",
        "schema": {"type": ["string", "null"]},
    },
    "oauth2_issuer_url": {
        "label": "OAuth2 issuer URL",
        "description": "The token issuer (its /.well-known/openid-configuration names the token endpoint).",
        "schema": {"type": ["string", "null"]},
    },
    "oauth2_private_key": {
        "label": "OAuth2 credentials file",
        "description": "Path or file: URL of a JSON file with client_id and client_secret (instead of login and password).",
        "schema": {"type": ["string", "null"]},
    },
    "oauth2_audience": {
        "label": "OAuth2 audience",
        "description": "The audience asked for, e.g. urn:pulsar:cluster.",
        "schema": {"type": ["string", "null"]},
    },
    "oauth2_scope": {
        "label": "OAuth2 scope",
        "description": "The scope asked for (optional).",
        "schema": {"type": ["string", "null"]},
    },
    "operation_timeout_seconds": {
        "label": "Operation timeout (seconds)",
        "description": "Timeout of lookups, producer/consumer creation and other broker operations.",
        "schema": {"type": ["number", "null"], "default": 30, "minimum": 0},
    },
    "memory_limit_bytes": {
        "label": "Memory limit (bytes)",
        "description": "Client-wide limit on memory held by pending outgoing messages.",
        "schema": {"type": ["integer", "null"], "default": 64 * 1024 * 1024, "minimum": 0},
    },
}

PULSAR_UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["schema"],
    "relabeling": {
        "host": "Broker host (or service URL)",
        "port": "Broker port",
        "login": "User (basic) or client id (OAuth2)",
        "password": "Token, password or client secret",
    },
    "placeholders": {
        "host": "localhost, pulsar://broker-1:6650,broker-2:6650 or http://broker-1:8080",
        "port": "6650 (6651 with TLS)",
        "login": "only for basic or OAuth2 authentication",
        "password": "a JWT for token authentication (optional)",
    },
}


def get_provider_info() -> dict[str, Any]:
    """Describe this provider to Airflow (package name, versions, integrations, hooks, connection types)."""
    return {
        "package-name": "airflow-pulsar",
        "name": "Apache Pulsar",
        "description": "Apache Pulsar (https://pulsar.apache.org/) integration with a bundled pure-Python client.",
        "versions": [version("airflow-pulsar")],  # pyproject.toml's, from the installed metadata
        "integrations": [
            {
                "integration-name": "Apache Pulsar",
                "external-doc-url": "https://pulsar.apache.org/",
                "tags": ["apache"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Apache Pulsar",
                "python-modules": ["airflow_pulsar.hooks.pulsar"],
            }
        ],
        "operators": [
            {
                "integration-name": "Apache Pulsar",
                "python-modules": [
                    "airflow_pulsar.operators.produce",
                    "airflow_pulsar.operators.consume",
                    "airflow_pulsar.operators.pulsar_to_table",
                    "airflow_pulsar.operators.subscriptions",
                    "airflow_pulsar.operators.topics",
                    "airflow_pulsar.operators.transform",
                    "airflow_pulsar.operators.run_messages",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": "Apache Pulsar",
                "python-modules": ["airflow_pulsar.sensors.backlog", "airflow_pulsar.sensors.await_message"],
            }
        ],
        "triggers": [
            {
                "integration-name": "Apache Pulsar",
                "python-modules": [
                    "airflow_pulsar.triggers.backlog",
                    "airflow_pulsar.triggers.await_message",
                    "airflow_pulsar.triggers.message_event",
                    "airflow_pulsar.triggers.message_queue",
                ],
            }
        ],
        "queues": ["airflow_pulsar.queues.pulsar.PulsarMessageQueueProvider"],
        "asset-uris": PULSAR_ASSET_URIS,
        # The name Airflow 2 read; Airflow 3 still accepts it and prefers "asset-uris".
        "dataset-uris": PULSAR_ASSET_URIS,
        "connection-types": [
            {
                "hook-class-name": HOOK_CLASS_NAME,
                "hook-name": "Apache Pulsar",
                "connection-type": "pulsar",
                "ui-field-behaviour": PULSAR_UI_FIELD_BEHAVIOUR,
                "conn-fields": PULSAR_CONN_FIELDS,
            }
        ],
    }
