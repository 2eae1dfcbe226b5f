"""An Airflow deployment as users run one: scheduler, triggerer, dag-processor and api-server as
separate processes (LocalExecutor) on the module's broker, with dags/ as the DAGs folder.

Everything binds to 127.0.0.1 on ports chosen at run time, lives in a temporary AIRFLOW_HOME,
and is stopped by process group at the end. Tests drive it through the REST API, as a user's
tooling would, with a token from the simple auth manager.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.client.admin import AdminNotFoundError, PulsarAdmin
from airflow_pulsar.examples.shop_events import ALERTS_TOPIC, TOPIC
from tests.support.airflow_deployment import AirflowDeployment
from tests.support.ports import free_port

PROJECT_DAGS = Path(__file__).resolve().parents[2] / "dags"


def _forget_example_topics(web_url: str) -> None:
    """The example DAGs' topics start empty: the session's Apache Pulsar is shared by the modules
    of this test process, and other tiers run the same examples."""
    with PulsarAdmin(web_url) as admin:
        for topic, partitioned in ((TOPIC, True), (ALERTS_TOPIC, False)):
            try:
                if partitioned:
                    admin.delete_partitioned_topic(topic, force=True)
                else:
                    admin.delete_topic(topic, force=True)
            except AdminNotFoundError:
                pass


@contextmanager
def airflow_deployment(
    broker: Any,
    home: Path,
    dags_folder: Path,
    plugins_folder: Path | None = None,
    users: dict[str, str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> Iterator[AirflowDeployment]:
    """Airflow's four components on ``broker`` with ``dags_folder`` (and ``plugins_folder``, which
    every component imports from as it starts), in ``home``; stopped at the end. The simple auth
    manager knows ``tester`` (admin) and ``users`` (name to role; their passwords are in
    ``home/passwords.json``); ``extra_env`` adds to every component's environment."""
    port = free_port()
    roles = {"tester": "admin", **(users or {})}
    passwords = {name: secrets.token_urlsafe(16) for name in roles}
    password = passwords["tester"]
    (home / "passwords.json").write_text(json.dumps(passwords))
    base_url = f"http://127.0.0.1:{port}"
    env = {
        # Nothing of this test process's own Airflow settings leaks in, and no PYTHONPATH: each
        # component imports what an installation gives it.
        **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k != "PYTHONPATH"},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__API__BASE_URL": base_url,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
        "AIRFLOW__API__WORKERS": "1",
        # One secret for the tokens that every component signs and checks.
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{name}:{role}" for name, role in roles.items()),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW_PULSAR_EXAMPLES_DIR": str(home / "examples"),
        "AIRFLOW_CONN_PULSAR_DEFAULT": json.dumps(
            {"conn_type": "pulsar", "host": broker.service_url, "extra": {"admin_url": broker.web_url}}
        ),
        **(extra_env or {}),
    }
    if plugins_folder is not None:
        env["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(plugins_folder)
    airflow = AirflowDeployment(home, env, port, password)
    try:
        yield airflow.start()
    finally:
        airflow.stop()


@pytest.fixture(scope="module")
def deployment(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowDeployment]:
    """Airflow's four components on the module's broker with dags/ as the DAGs folder; stopped,
    and the examples' topics deleted, at the end."""
    _forget_example_topics(broker.web_url)
    try:
        with airflow_deployment(broker, tmp_path_factory.mktemp("airflow-deployment"), PROJECT_DAGS) as airflow:
            yield airflow
    finally:
        _forget_example_topics(broker.web_url)
