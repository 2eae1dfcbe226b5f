"""The distribution as a user installs it: the wheel built from this tree, its metadata, type hints and legal files."""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# What the wheel is built from (pyproject.toml maps client/ and broker/ to airflow_pulsar.client and
# airflow_pulsar.broker).
SOURCES = ["pyproject.toml", "README.md", "LICENSE", "NOTICE", "airflow_pulsar", "client", "broker"]


def _not_shipped(folder: str, names: list[str]) -> list[str]:
    """Caches, and links: a development checkout may link airflow_pulsar/client to client/, which
    the package-dir mapping replaces."""
    return [name for name in names if name == "__pycache__" or name.endswith(".pyc") or Path(folder, name).is_symlink()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """The wheel setuptools builds from a copy of the tree (no build isolation: nothing is downloaded)."""
    tree = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=_not_shipped)
        else:
            shutil.copy(source, tree / name)
    build = "from setuptools import build_meta; print(build_meta.build_wheel('dist'))"
    result = subprocess.run([sys.executable, "-c", build], cwd=tree, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return zipfile.ZipFile(tree / "dist" / result.stdout.strip().splitlines()[-1])


def _metadata(wheel: zipfile.ZipFile) -> Message:
    name = next(name for name in wheel.namelist() if name.endswith(".dist-info/METADATA"))
    return email.message_from_bytes(wheel.read(name))


def test_both_import_packages_ship_their_type_hints(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert {"airflow_pulsar/py.typed", "airflow_pulsar/client/py.typed"} <= names
    assert "airflow_pulsar/client/producer/producer.py" in names  # the client/ mapping, not a link
    assert "airflow_pulsar/broker/tokens.py" in names  # the broker/ mapping


def test_license_and_notice_travel_with_the_wheel(wheel: zipfile.ZipFile) -> None:
    metadata = _metadata(wheel)
    assert metadata["License-Expression"] == "Apache-2.0"
    assert sorted(metadata.get_all("License-File")) == ["LICENSE", "NOTICE"]
    license_text = next(wheel.read(n) for n in wheel.namelist() if n.endswith("licenses/LICENSE")).decode()
    assert "Apache License\n                           Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    notice = next(wheel.read(n) for n in wheel.namelist() if n.endswith("licenses/NOTICE")).decode()
    assert "Apache Pulsar\n    Copyright 2017-2026 The Apache Software Foundation" in notice
    assert "proto/PulsarApi.proto" in notice


def test_the_protocol_schema_keeps_pulsars_license_header() -> None:
    # Apache License 2.0, section 4: a modified file keeps the original's notices and says it was changed.
    text = (REPO / "proto" / "PulsarApi.proto").read_text()
    assert text.startswith("/**\n * Licensed to the Apache Software Foundation (ASF) under one\n")
    assert "http://www.apache.org/licenses/LICENSE-2.0" in text.split("*/")[0]
    assert "Modified from Apache Pulsar's pulsar-common/src/main/proto/PulsarApi.proto" in text


def test_metadata_has_classifiers_urls_and_the_declared_dependencies(wheel: zipfile.ZipFile) -> None:
    metadata = _metadata(wheel)
    classifiers = set(metadata.get_all("Classifier"))
    assert {"Framework :: Apache Airflow :: Provider", "Typing :: Typed", "Programming Language :: Python :: 3.10"} <= classifiers
    assert not any(classifier.startswith("License ::") for classifier in classifiers)  # the SPDX expression says it
    assert any(url.startswith("Apache Pulsar, https://pulsar.apache.org") for url in metadata.get_all("Project-URL"))
    requires = {line.split(";")[0].replace(" ", "") for line in metadata.get_all("Requires-Dist")}
    assert {"pyjwt<3,>=2.11", "pendulum<4,>=3.0"} <= requires
    assert any(line.startswith("apache-airflow<3.4,>=3.3.0") for line in requires)
