"""Evolving an Avro record under the FORWARD strategy on the embedded broker.

Run with both URLs of a broker: ``python schema_compatibility.py pulsar://127.0.0.1:6650 http://127.0.0.1:8080``.
"""

from __future__ import annotations

import sys

from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.exceptions import IncompatibleSchema
from airflow_pulsar.client.schema import AvroSchema, Integer, Record, String


# [START schema_compatibility]
class User(Record):
    name = String(required=True)


class UserWithAge(Record):
    name = String(required=True)
    age = Integer(required=True)  # a new field without a default


class AgeOnly(Record):
    age = Integer(required=True)  # name dropped: it had no default


UserWithAge.__name__ = AgeOnly.__name__ = "User"  # Avro matches records by name


def main(service_url: str, admin_url: str, namespace: str = "public/forward-example") -> list[str]:
    """Create a namespace with FORWARD, register User, then evolve it; what each producer got."""
    with PulsarAdmin(admin_url) as admin:
        admin.create_namespace(namespace)
        admin.set_namespace_schema_compatibility_strategy(namespace, "FORWARD")
    client = Client(service_url)
    outcomes = []
    try:
        for record in (User, UserWithAge, AgeOnly):
            try:
                client.create_producer(f"persistent://{namespace}/users", schema=AvroSchema(record)).close()
                outcomes.append("accepted")
            except IncompatibleSchema:
                outcomes.append("refused")
    finally:
        client.close()
    # FORWARD: data written with the new schema must be readable with the latest one. A new field
    # passes (readers skip it); dropping a field that has no default does not.
    return outcomes
# [END schema_compatibility]


if __name__ == "__main__":
    print(main(sys.argv[1], sys.argv[2]))
