"""The first DAG of the docs' getting-started page, run as shown: the page includes
docs/examples/dags/first_orders.py whole, this copies that file into the DAGs folder of a fresh
AIRFLOW_HOME, and bash runs the commands the page includes from
docs/examples/getting-started/first_dag.sh: the embedded broker started in the background, the
``pulsar_default`` connection given by ``AIRFLOW_CONN_PULSAR_DEFAULT``, ``airflow db migrate`` and
``airflow dags test``.

The broker is the script's rather than the ``broker`` fixture's: the page's steps start it, and
one run of those steps is what this checks.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from airflow_pulsar.client.admin import PulsarAdmin
from tests.support.dag_runs import xcoms_in_database as xcoms
from tests.support.ports import free_port

DOCS = Path(__file__).resolve().parents[2] / "docs"
FIRST_DAG = DOCS / "examples" / "dags" / "first_orders.py"
RUN_FIRST_DAG = DOCS / "examples" / "getting-started" / "first_dag.sh"
AIRFLOW = Path(sys.executable).with_name("airflow")


def test_the_readme_shows_the_same_dag() -> None:
    """The README repeats the first DAG: its first ``python`` block is the file, byte for byte."""
    readme = (DOCS.parent / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, re.DOTALL)
    assert block is not None, "README.md has no python code block"
    assert block.group(1) == FIRST_DAG.read_text()


def test_the_getting_started_page_shows_the_whole_file() -> None:
    """The page includes the file whole (no lines picked), so what runs below is what a reader sees."""
    page = (DOCS / "getting-started.md").read_text()
    include = re.search(r"```\{literalinclude\} examples/dags/first_orders.py\n(.*?)```", page, re.DOTALL)
    assert include is not None, "getting-started.md does not include examples/dags/first_orders.py"
    options = [line for line in include.group(1).splitlines() if line.strip()]
    assert all(option.startswith(":language:") for option in options), options


def test_the_first_dag_runs_as_shown(tmp_path: Path) -> None:
    home = tmp_path / "airflow"
    (home / "dags").mkdir(parents=True)
    shutil.copy(FIRST_DAG, home / "dags" / "first_orders.py")
    port, http_port = free_port(), free_port()
    env = {
        # A newcomer's shell: nothing of this test process's own Airflow settings leaks in.
        **{key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")},
        "PATH": f"{AIRFLOW.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # The page's defaults are 6650 and 8080; free ports here, and a data folder of this test's own.
        "PULSAR_PORT": str(port),
        "PULSAR_HTTP_PORT": str(http_port),
        "PULSAR_DATA_DIR": str(tmp_path / "pulsar-data"),
    }
    log = tmp_path / "run.log"
    # The script leaves the broker running in the background, as the page does: its own session, stopped below.
    with log.open("w") as out:
        shell = subprocess.Popen(
            ["bash", RUN_FIRST_DAG], cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        code = shell.wait(timeout=600)
        output = log.read_text()
        assert code == 0, f"{RUN_FIRST_DAG.name} failed:\n{output[-4000:]}"
        assert "state=success" in output, output[-4000:]

        results = xcoms(home / "airflow.db", "first_orders")
        assert results["produce"]["messages"] == 10
        assert results["produce"]["topic"] == "first-orders"
        assert results["subscribe"]["created"] is True
        assert results["wait_for_orders"]["messages"] == 10
        assert results["consume"]["messages"] == results["consume"]["acknowledged"] == 10
        assert 'order from customer-0: {"order": 0}' in output  # the function ran on each message
        with PulsarAdmin(f"http://127.0.0.1:{http_port}") as admin:
            assert admin.backlog("first-orders", "order-reader").msg_backlog == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGTERM)
