"""Importing the client (or the broker) in an environment whose dependency is outside the declared
range fails at once, naming the package, the version found and the range, instead of failing on
a connection's reader thread later. The client checks its own dependencies, the broker its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_pulsar.client.dependencies import DISTRIBUTION, IncompatibleDependencyError, Requirement, check, declared_requirements


def _uv() -> str:
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    assert found, "uv is part of the dev dependencies"
    return found


def _install_ahead(target: Path, requirement: str) -> None:
    """A real release of ``requirement`` in ``target``, to put ahead of the environment's own on
    the import path, as a user's pin would be."""
    subprocess.run([_uv(), "pip", "install", "--quiet", "--python", sys.executable, "--target", str(target), requirement], check=True)


def _plant(site: Path, distribution: str, version: str) -> None:
    """The metadata folder an installer leaves for ``distribution`` at ``version`` (for a version
    that was never released, which no installer can bring)."""
    folder = site / f"{distribution}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")


def _import(module: str, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", f"import {module}"], env=env, capture_output=True, text=True, timeout=120)


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("airflow_pulsar.client.dependencies.IncompatibleDependencyError: "), result.stderr
    return last


def test_importing_the_client_with_protobuf_4_names_the_package_version_and_range(tmp_path: Path) -> None:
    _install_ahead(tmp_path / "site", "protobuf==4.25.3")
    last = _last_line(_import("airflow_pulsar.client", tmp_path / "site"))
    assert f"{DISTRIBUTION} supports protobuf<8,>=5.29.1, but this environment has protobuf 4.25.3" in last


def test_importing_the_client_with_a_release_above_the_range_names_it(tmp_path: Path) -> None:
    _plant(tmp_path / "site", "cramjam", "3.0.0")
    last = _last_line(_import("airflow_pulsar.client", tmp_path / "site"))
    assert f"{DISTRIBUTION} supports cramjam<3,>=2.11, but this environment has cramjam 3.0.0" in last
    assert "pip install 'cramjam<3,>=2.11'" in last


def test_the_broker_checks_its_own_dependencies_and_the_client_does_not(tmp_path: Path) -> None:
    # PyJWT signs the broker's tokens; the client never imports it, so its import goes on.
    _install_ahead(tmp_path / "site", "pyjwt==2.10.1")
    client = _import("airflow_pulsar.client", tmp_path / "site")
    assert client.returncode == 0, client.stderr
    last = _last_line(_import("airflow_pulsar.broker", tmp_path / "site"))
    assert f"{DISTRIBUTION} supports pyjwt<3,>=2.11, but this environment has pyjwt 2.10.1" in last


def test_versions_inside_the_ranges_pass_and_extras_are_checked_by_name() -> None:
    check(("protobuf", "httpx"))
    check(("pyspark", "pyarrow"), extra="spark")
    check(("no-such-dependency",))


def test_an_extra_dependency_outside_its_range_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pyspark 3.5.1's metadata ahead on the path (installing a real one costs 300 MB).
    _plant(tmp_path, "pyspark", "3.5.1")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(IncompatibleDependencyError, match=r"supports pyspark<4.4,>=4.0, but this environment has pyspark 3.5.1"):
        check(("pyspark",), extra="spark")
    check(("pyspark",))  # asked for without the extra, it is no requirement of the package


def test_a_pre_release_of_the_upper_bound_is_outside_the_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # PEP 440: <3 excludes 3.0.0rc1; Airflow's pre-releases of the next minor are on PyPI.
    _plant(tmp_path, "pyjwt", "3.0.0rc1")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(IncompatibleDependencyError, match=r"supports pyjwt<3,>=2.11, but this environment has pyjwt 3.0.0rc1"):
        check(("PyJWT",))


def test_a_source_tree_that_is_not_installed_checks_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _plant(tmp_path, "protobuf", "4.25.3")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])  # no metadata of this package anywhere
    assert declared_requirements() == []
    check(("protobuf",))


def test_the_requirement_forms_of_the_metadata_are_read() -> None:
    for text in ('pyspark<4.4,>=4.0; extra == "spark"', "pyspark (<4.4,>=4.0) ; extra=='Spark'"):
        requirement = Requirement.parse(text)
        assert (requirement.name, str(requirement.versions), requirement.extra) == ("pyspark", "<4.4,>=4.0", "spark")
    assert str(Requirement.parse("cramjam[lz4] @ https://example.org/cramjam.whl").versions) == ""
    with pytest.raises(ValueError, match="reads only the marker extra"):
        Requirement.parse('tomli>=1; python_version < "3.11"')
    names = {requirement.name for requirement in declared_requirements()}
    assert {"protobuf", "cramjam", "crc32c", "httpx", "fastavro", "cryptography", "aiohttp", "pyjwt", "pyspark"} <= names
