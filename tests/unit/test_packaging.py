"""Packaging contracts: neither the client nor the broker imports airflow, and every package folder is shipped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("folder", ["client", "broker"])
def test_never_imports_airflow(folder: str) -> None:
    # A fresh interpreter, so nothing imported by pytest or other tests can hide an import.
    modules = sorted(
        f"airflow_pulsar.{folder}." + ".".join(p.relative_to(ROOT / folder).with_suffix("").parts)
        for p in (ROOT / folder).rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    )
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "leaked = sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.'))\n"
        "print(len(sys.modules)); assert not leaked, leaked\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert len(modules) > 10


def test_every_package_folder_is_declared() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    declared = set(config["packages"])
    found = set()
    for root, prefix in (("airflow_pulsar", "airflow_pulsar"), ("client", "airflow_pulsar.client"), ("broker", "airflow_pulsar.broker")):
        for init in (ROOT / root).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / root).parts
            found.add(".".join((prefix, *parts)))
    assert found == declared


def test_console_script_runs_the_broker_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "airflow_pulsar.cli", "standalone", "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0
    for option in ("--data-dir", "--no-fsync", "--dedup", "--max-message-size", "--http-port"):
        assert option in result.stdout
