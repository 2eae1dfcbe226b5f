"""``airflow-pulsar permissions list|grant|revoke`` against the module's broker, run as a user runs them.

Grants are kept and listed whether or not the broker enforces them (Apache Pulsar's
``authorizationEnabled``, our ``--authorization``); enforcement is tests/interop/test_permissions.py's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from airflow_pulsar.client.admin import PulsarAdmin


def permissions(broker: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PULSAR_ADMIN_URL": broker.web_url}
    command = [sys.executable, "-m", "airflow_pulsar.cli", "permissions", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def succeeded(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_grant_list_and_revoke_on_a_namespace_and_a_topic(broker: Any, topic_name: str) -> None:
    namespace = f"public/{topic_name}"
    topic = f"persistent://{namespace}/orders"
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_namespace(namespace)
        admin.create_topic(topic)
    granted = permissions(broker, "grant", "--namespace", namespace, "--role", "loader", "--actions", "produce, consume")
    assert succeeded(granted) == f"granted produce, consume on {namespace} to loader"
    succeeded(permissions(broker, "grant", "--topic", topic, "--role", "auditor", "--actions", "consume"))
    assert succeeded(permissions(broker, "list", "--namespace", namespace)) == "loader: produce, consume"
    listing = succeeded(permissions(broker, "list", "--topic", topic)).splitlines()
    assert listing == ["auditor: consume", "loader: produce, consume"]

    revoked = permissions(broker, "revoke", "--topic", topic, "--role", "auditor")
    assert succeeded(revoked) == f"revoked the permissions of auditor on {topic}"
    succeeded(permissions(broker, "revoke", "--namespace", namespace, "--role", "loader"))
    assert succeeded(permissions(broker, "list", "--topic", topic)) == f"no role has permissions on {topic}"
    with PulsarAdmin(broker.web_url) as admin:
        assert admin.namespace_permissions(namespace) == {}


def test_grant_and_revoke_the_roles_of_a_subscription(broker: Any, topic_name: str) -> None:
    namespace = f"public/{topic_name}"
    with PulsarAdmin(broker.web_url) as admin:
        admin.create_namespace(namespace)
    granted = permissions(broker, "grant", "--namespace", namespace, "--subscription", "ingest", "--roles", "loader,ops")
    assert succeeded(granted) == f"only loader, ops may consume subscription ingest in {namespace}"
    assert succeeded(permissions(broker, "list", "--namespace", namespace, "--subscriptions")) == "ingest: loader, ops"
    succeeded(permissions(broker, "revoke", "--namespace", namespace, "--subscription", "ingest", "--role", "ops"))
    assert succeeded(permissions(broker, "list", "--namespace", namespace, "--subscriptions")) == "ingest: loader"
    missing = permissions(broker, "grant", "--namespace", namespace, "--subscription", "ingest", "--role", "x", "--actions", "produce")
    assert missing.returncode == 1 and "give --roles" in missing.stderr and "Traceback" not in missing.stderr
