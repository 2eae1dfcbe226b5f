"""The command-line examples the docs include (docs/examples/cli/*.sh), run with bash as shown, the
``airflow-pulsar`` of this environment first on the PATH: the quick checks against the broker under
test, the token commands in an empty folder."""

from __future__ import annotations

import contextlib
from pathlib import Path

from airflow_pulsar.client.admin import AdminConflictError, AdminNotFoundError, PulsarAdmin
from tests.support.doc_scripts import EXAMPLES as DOC_EXAMPLES
from tests.support.doc_scripts import run_script

EXAMPLES = DOC_EXAMPLES / "cli"


def test_every_script_is_included_by_a_page() -> None:
    pages = "".join(page.read_text() for page in EXAMPLES.parents[1].glob("*.md"))
    for script in EXAMPLES.glob("*.sh"):
        assert f"examples/cli/{script.name}" in pages, f"no page includes {script.name}"


def test_the_quick_checks_run(broker, tmp_path: Path) -> None:
    created = broker.admin("PUT", "/admin/v2/tenants/acme", json={"adminRoles": [], "allowedClusters": ["standalone"]})
    assert created.status_code in (204, 409), created.text  # 409: made by an earlier run on this broker
    with PulsarAdmin(broker.web_url) as admin:
        with contextlib.suppress(AdminConflictError):
            admin.create_namespace("acme/orders")
        # The client examples make an unpartitioned "events" on the broker this module shares with them.
        with contextlib.suppress(AdminNotFoundError):
            if admin.partition_count("events"):
                admin.delete_partitioned_topic("events", force=True)
            else:
                admin.delete_topic("events", force=True)
    output = run_script(EXAMPLES / "commands.sh", tmp_path, PULSAR_SERVICE_URL=broker.service_url, PULSAR_ADMIN_URL=broker.web_url)
    assert "audit" in output and "hello" in output and "world" in output, output[-3000:]
    with PulsarAdmin(broker.web_url) as admin:
        assert admin.partition_count("events") == 4
        assert admin.namespace_permissions("acme/orders")["loader"] == ["produce"]


def test_the_token_commands_run(tmp_path: Path) -> None:
    output = run_script(EXAMPLES / "tokens.sh", tmp_path)
    assert output.count("etl") >= 2, output
    assert (tmp_path / "secret.key").stat().st_mode & 0o777 == 0o600
