"""Schema compatibility strategies on the module's broker: a namespace of its own per test, its
``schemaCompatibilityStrategy`` set through the admin API, then producers of evolving Avro records
made one after the other; each is accepted or refused. The same calls give the same outcome on our
broker and on Apache Pulsar (the expected outcomes are Pulsar's, which follow Avro's schema
resolution rules), with the official client and with ours (its admin setting the strategy)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import httpx
import pulsar
import pytest
from pulsar import schema as official_schema

from airflow_pulsar.client import Client
from airflow_pulsar.client import schema as our_schema
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.exceptions import IncompatibleSchema

pytestmark = pytest.mark.interop


def _record(module: Any, **fields: Any) -> type:
    """A record class named ``User`` (every version keeps the name, as Avro matches records by it)."""
    return type("User", (module.Record,), dict(fields))


def _versions(module: Any) -> dict[str, type]:
    """The record versions of the matrix, built from ``module`` (official or ours)."""
    name = {"name": module.String(required=True)}
    email = {"email": module.String(required=True)}
    return {
        "name_only": _record(module, **name),
        "base": _record(module, **name, **email),
        # A new field without a default: old readers skip it (FORWARD); new readers of old data lack it.
        "add_required": _record(module, **name, **email, age=module.Integer(required=True)),
        # A new optional field with a default (null): readable both ways.
        "add_defaulted": _record(module, **name, **email, age=module.Integer(required_default=True)),
        # email with a default: readers of data without it take the default.
        "email_default": _record(module, **name, email=module.String(required=True, default="", required_default=True)),
        # email: string -> bytes, a promotion Avro allows both ways; string -> int, none.
        "promote": _record(module, **name, email=module.Bytes(required=True)),
        "retype": _record(module, **name, email=module.Integer(required=True)),
        # The official Record's defaults: optional fields (null or the type), without a default value.
        "optional": _record(module, name=module.String(), email=module.String()),
        "optional_add_required": _record(module, name=module.String(), email=module.String(), age=module.Integer(required=True)),
        # Every field optional with a default (null).
        "all_defaults": _record(module, name=module.String(required_default=True), email=module.String(required_default=True)),
    }


_OFFICIAL = _versions(official_schema)
_OURS = _versions(our_schema)

# (strategy, the versions produced in order) -> whether each producer after the first is accepted
# (Pulsar's answers; the first version is always registered).
MATRIX: list[tuple[str, list[str], list[bool]]] = [
    ("BACKWARD", ["base", "add_required"], [False]),
    ("BACKWARD", ["base", "add_defaulted"], [True]),
    ("BACKWARD", ["base", "name_only"], [True]),
    ("FORWARD", ["base", "add_required"], [True]),
    ("FORWARD", ["base", "add_defaulted"], [True]),
    ("FORWARD", ["base", "name_only"], [False]),
    ("FORWARD", ["optional", "optional_add_required"], [True]),
    ("FORWARD", ["optional", "all_defaults"], [True]),
    ("FORWARD", ["base", "all_defaults"], [False]),  # the old string field cannot read the new null
    ("FORWARD", ["optional", "optional_add_required", "all_defaults"], [True, False]),
    ("FULL", ["base", "add_required"], [False]),
    ("FULL", ["base", "add_defaulted"], [True]),
    ("FULL", ["base", "name_only"], [False]),
    ("FULL", ["base", "promote"], [True]),
    ("FULL", ["base", "retype"], [False]),
    ("FULL", ["optional", "all_defaults"], [True]),
    ("ALWAYS_COMPATIBLE", ["base", "retype"], [True]),
    ("ALWAYS_INCOMPATIBLE", ["base", "add_defaulted"], [False]),
    # The transitive strategies check every version, the others the latest only.
    ("BACKWARD", ["name_only", "email_default", "base"], [True, True]),
    ("BACKWARD_TRANSITIVE", ["name_only", "email_default", "base"], [True, False]),
    ("FORWARD", ["base", "email_default", "name_only"], [True, True]),
    ("FORWARD_TRANSITIVE", ["base", "email_default", "name_only"], [True, False]),
    ("FULL", ["name_only", "email_default", "base"], [True, True]),
    ("FULL_TRANSITIVE", ["name_only", "email_default", "base"], [True, False]),
]


def _ids() -> list[str]:
    return ["-".join([strategy, *versions]) for strategy, versions, _ in MATRIX]


@pytest.fixture
def namespace(broker: Any, topic_name: str) -> str:
    """A namespace of the test's own in ``public``, so the strategy set stays with it."""
    name = "public/" + re.sub(r"[^\w-]", "-", topic_name)[-60:]
    response = httpx.put(f"{broker.web_url}/admin/v2/namespaces/{name}", timeout=30)
    assert response.status_code == 204, response.text
    return name


def set_strategy(broker: Any, namespace: str, strategy: str) -> None:
    response = httpx.put(f"{broker.web_url}/admin/v2/namespaces/{namespace}/schemaCompatibilityStrategy", json=strategy, timeout=30)
    assert response.status_code == 204, response.text


@pytest.mark.parametrize(("strategy", "versions", "accepted"), MATRIX, ids=_ids())
def test_official_producers_under_a_namespace_strategy(
    broker: Any, official: pulsar.Client, namespace: str, strategy: str, versions: list[str], accepted: list[bool]
) -> None:
    set_strategy(broker, namespace, strategy)
    topic = f"persistent://{namespace}/users"
    outcomes = []
    for index, version in enumerate(versions):
        try:
            official.create_producer(topic, schema=official_schema.AvroSchema(_OFFICIAL[version])).close()
            outcomes.append(True)
        except pulsar.IncompatibleSchema:
            outcomes.append(False)
        assert index or outcomes == [True]  # the first version is always registered
    assert outcomes[1:] == accepted


@pytest.mark.parametrize(("strategy", "versions", "accepted"), MATRIX, ids=_ids())
def test_our_producers_under_a_namespace_strategy(
    broker: Any, namespace: str, strategy: str, versions: list[str], accepted: list[bool]
) -> None:
    with PulsarAdmin(broker.web_url, timeout_seconds=30) as admin:
        admin.set_namespace_schema_compatibility_strategy(namespace, strategy)
        assert admin.namespace_schema_compatibility_strategy(namespace) == strategy
    topic = f"persistent://{namespace}/users"
    client = Client(broker.service_url, operation_timeout_seconds=10)
    try:
        outcomes = []
        for version in versions:
            try:
                client.create_producer(topic, schema=our_schema.AvroSchema(_OURS[version])).close()
                outcomes.append(True)
            except IncompatibleSchema:
                outcomes.append(False)
    finally:
        client.close()
    assert outcomes == [True, *accepted]


def test_the_documented_example(broker: Any, namespace: str) -> None:
    """docs/examples/broker/schema_compatibility.py does what the broker page says."""
    example = runpy.run_path(str(Path(__file__).parents[2] / "docs" / "examples" / "broker" / "schema_compatibility.py"))
    assert example["main"](broker.service_url, broker.web_url, namespace + "-example") == ["accepted", "accepted", "refused"]
