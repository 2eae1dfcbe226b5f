"""The Delta Lake and Apache Iceberg jars that ``make lakehouse-jars`` resolves from
jvm/lakehouse/pom.xml into the checkout's ``.jvm/`` cache, one comma-separated list per format,
which the demo and the tests pass to the ingest operator as ``jars``."""

from __future__ import annotations

from jvm.class_sharing import JVM_CACHE

#: Where spark-submit resolves ``--packages`` (``spark.jars.ivy``) when a test leaves the choice
#: of the format's jars to the operator: in the checkout's cache, not the user's home.
IVY_CACHE = JVM_CACHE / "ivy"


class LakehouseJarsMissing(RuntimeError):
    """The format's jar list is not in the checkout's cache: run ``make lakehouse-jars``."""


def lakehouse_jars(table_format: str) -> str | None:
    """The format's comma-separated jar list; None for parquet, which Spark writes by itself."""
    if table_format == "parquet":
        return None
    listing = JVM_CACHE / f"lakehouse-{table_format}.jars"
    if not listing.is_file():
        raise LakehouseJarsMissing(f"{listing} is missing: run `make lakehouse-jars` (part of `make install`)")
    return listing.read_text().strip()
