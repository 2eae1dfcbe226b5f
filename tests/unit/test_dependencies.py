"""Importing the client in an environment whose protobuf is outside the declared range fails at
once, naming the package, the version found and the range, instead of failing on a connection's
reader thread later."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_pulsar.client.dependencies import DISTRIBUTION, IncompatibleDependencyError, check


def _uv() -> str:
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    assert found, "uv is part of the dev dependencies"
    return found


def test_importing_the_client_with_protobuf_4_names_the_package_version_and_range(tmp_path: Path) -> None:
    # A real protobuf 4 ahead of the environment's own on the import path, as a user's pin would be.
    target = tmp_path / "site"
    subprocess.run(
        [_uv(), "pip", "install", "--quiet", "--python", sys.executable, "--target", str(target), "protobuf==4.25.3"],
        check=True,
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", "import airflow_pulsar.client"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("airflow_pulsar.client.dependencies.IncompatibleDependencyError: "), result.stderr
    assert f"{DISTRIBUTION} supports protobuf<8,>=5.29.1, but this environment has protobuf 4.25.3" in last


def test_versions_inside_the_ranges_pass_and_extras_are_checked_by_name() -> None:
    check(("protobuf", "httpx"))
    check(("pyspark", "pyarrow"), extra="spark")
    check(("no-such-dependency",))


def test_an_extra_dependency_outside_its_range_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # The version lookup answers 3.5.1 for pyspark (installing a real one costs 300 MB).
    real_version = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "3.5.1" if name == "pyspark" else real_version(name))
    with pytest.raises(IncompatibleDependencyError, match=r"supports pyspark<4.4,>=4.0, but this environment has pyspark 3.5.1"):
        check(("pyspark",), extra="spark")
