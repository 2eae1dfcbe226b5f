"""Which package may import what: the client stands alone, the broker uses only the client's
protocol, schema, naming and exception modules, and the Airflow side uses only the client's public
surface. Imports at any scope count, type-only ones included."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import airflow_pulsar.client
from tests.support.import_statements import ImportStatement, import_statements, source_modules

ROOT = Path(__file__).resolve().parents[2]
# Source folder -> the import package it is installed as (pyproject.toml's package-dir).
PACKAGES = {"client": "airflow_pulsar.client", "broker": "airflow_pulsar.broker", "airflow_pulsar": "airflow_pulsar"}

# The client modules the Airflow side may import, besides the names of the client's __all__.
PUBLIC_CLIENT_MODULES = frozenset(
    f"airflow_pulsar.client{suffix}" for suffix in ("", ".admin", ".asyncio", ".schema", ".topic_name", ".exceptions", ".entries", ".forks")
)
# What the broker shares with the client: the wire format (transaction ids included), schemas,
# topic names, errors, key hashes, the installed-version check; and the command-line parsing of the CLI.
BROKER_MAY_IMPORT = tuple(
    f"airflow_pulsar.{name}"
    for name in (
        "client.protocol", "client.schema", "client.topic_name", "client.exceptions", "client.hashing", "client.dependencies",
        "client.transaction.ids",
    )
) + ("airflow_pulsar.cli.command_line",)
# The Airflow-side modules that start the embedded broker: the CLI's commands and the demo.
BROKER_USERS = ("airflow_pulsar.cli", "airflow_pulsar.demo")
# What ships to Spark executors (spark/archive.py): the job, the client, and nothing of Airflow.
SPARK_JOB = "airflow_pulsar.spark.job"


def tree_imports(root: Path) -> Iterator[ImportStatement]:
    """The imports of every hand-written module of the packages in ``root``."""
    for module in source_modules({package: root / folder for folder, package in PACKAGES.items()}).values():
        yield from import_statements(module)


def within(module: str, *packages: str) -> bool:
    """Whether ``module`` is one of ``packages`` or inside one."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def breaches(found: Iterator[ImportStatement], client_all: frozenset[str]) -> list[str]:
    """Each import that crosses a boundary, with the rule it breaks."""
    wrong = []
    for imp in found:
        target, importer = imp.module, imp.importer
        if within(importer, "airflow_pulsar.client"):
            if within(target, "airflow", "airflow_pulsar") and not within(target, "airflow_pulsar.client"):
                wrong.append(f"{imp}: the client imports neither Airflow nor the rest of airflow_pulsar")
        elif within(importer, "airflow_pulsar.broker"):
            if within(target, "airflow") or within(target, "airflow_pulsar") and not within(
                target, "airflow_pulsar.broker", *BROKER_MAY_IMPORT
            ):
                wrong.append(f"{imp}: the broker imports only the client's protocol, schema, naming and exception modules")
        else:
            if within(importer, SPARK_JOB) and within(target, "airflow", "airflow_pulsar") and not within(
                target, SPARK_JOB, "airflow_pulsar.client", "airflow_pulsar.spark"
            ):
                wrong.append(f"{imp}: the Spark job ships with the client alone")
            if within(target, "airflow_pulsar.broker") and not within(importer, *BROKER_USERS):
                wrong.append(f"{imp}: only the CLI and the demo start the broker")
            if within(target, "airflow_pulsar.client"):
                if target not in PUBLIC_CLIENT_MODULES:
                    wrong.append(f"{imp}: {target} is not part of the client's public surface")
                elif target == "airflow_pulsar.client":
                    submodules = {m.rsplit(".", 1)[1] for m in PUBLIC_CLIENT_MODULES if m != target}
                    private = [n for n in imp.names if n not in client_all and n not in submodules]
                    if private:
                        wrong.append(f"{imp}: {', '.join(private)} not in the client's __all__")
    return wrong


def test_every_import_keeps_to_its_package_boundary() -> None:
    assert breaches(tree_imports(ROOT), frozenset(airflow_pulsar.client.__all__)) == []


@pytest.mark.parametrize("name", sorted(PUBLIC_CLIENT_MODULES))
def test_the_public_client_modules_exist(name: str) -> None:
    assert importlib.import_module(name).__doc__


BREACHES = {
    "airflow_pulsar/operators/x.py": ("from airflow_pulsar.client.protocol import wire", "not part of the client's public surface"),
    "airflow_pulsar/sensors/x.py": ("from airflow_pulsar.client import _private", "_private not in the client's __all__"),
    "airflow_pulsar/hooks/x.py": ("from airflow_pulsar.broker import server", "only the CLI and the demo start the broker"),
    "airflow_pulsar/spark/job/x.py": ("from airflow_pulsar.hooks.pulsar import PulsarHook", "ships with the client alone"),
    "client/producer/x.py": ("from ...broker import server", "neither Airflow nor the rest"),
    "client/x.py": ("import airflow.sdk", "neither Airflow nor the rest"),
    "broker/x.py": ("from airflow_pulsar.client.producer import Producer", "only the client's protocol"),
    "broker/y.py": ("from airflow_pulsar.client import Client", "only the client's protocol"),
}


@pytest.mark.parametrize("relative", sorted(BREACHES))
def test_a_breach_is_found(tmp_path: Path, relative: str) -> None:
    statement, rule = BREACHES[relative]
    for folder in PACKAGES:
        (tmp_path / folder).mkdir()
    module = tmp_path / relative
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_text(f"def f():\n    {statement}\n")  # any scope counts
    found = breaches(tree_imports(tmp_path), frozenset({"Client"}))
    assert len(found) == 1 and rule in found[0], found


def test_relative_imports_resolve_from_modules_and_packages(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "__init__.py").write_text("from . import c\nfrom ..d import e\n")
    (tmp_path / "a" / "b" / "c.py").write_text("from . import f\nfrom .g import h\n")
    got = {str(i) for m in source_modules({"pkg": tmp_path / "a"}).values() for i in import_statements(m)}
    assert got == {
        "pkg.b:1: from pkg.b import c",
        "pkg.b:2: from pkg.d import e",
        "pkg.b.c:1: from pkg.b import f",
        "pkg.b.c:2: from pkg.b.g import h",
    }
