"""Delta Lake and Apache Iceberg on the Spark that runs the ingest job: which release each format
has for a Spark minor, and the session settings that turn each integration on.

Both integrations are built per Spark minor (``delta-spark_4.1_2.13``, ``iceberg-spark-runtime-4.1_2.13``)
and neither loads on another minor. The operator names the release for the minor of the pyspark
whose ``spark-submit`` it runs, unless the user passes ``packages`` or ``jars``, and leaves out
of it what Spark already ships; a minor with no release is refused before anything is submitted.
jvm/lakehouse/pom.xml resolves the same coordinates for the Spark minor that requirements/pins.txt
pins (a unit test holds the three together).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

# Format -> Spark minor -> the Maven coordinates of its Spark integration (Scala 2.13 builds),
# as released on Maven Central. Delta's storage and kernel jars come with delta-spark.
RELEASES: dict[str, dict[str, str]] = {
    "delta": {
        "4.0": "io.delta:delta-spark_4.0_2.13:4.4.0",
        "4.1": "io.delta:delta-spark_4.1_2.13:4.4.0",
    },
    "iceberg": {
        "4.0": "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.11.0",
        "4.1": "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0",
    },
}

# What each format's release depends on that Spark already ships (its own builds of Jackson,
# Hadoop's client, Parquet, logging and compression), as spark-submit ``--exclude-packages``
# takes it: with the default ``packages`` these stay out, so the job's classpath holds the
# integration's own jars only, the same ones jvm/lakehouse/pom.xml resolves for the tests.
# Iceberg's runtime jar bundles what it needs and depends on nothing.
SHIPPED_WITH_SPARK: dict[str, tuple[str, ...]] = {
    "delta": (
        "com.fasterxml.jackson.core:jackson-annotations",
        "com.fasterxml.jackson.core:jackson-core",
        "com.fasterxml.jackson.core:jackson-databind",
        "com.fasterxml.jackson.datatype:jackson-datatype-jdk8",
        "com.github.luben:zstd-jni",
        "com.google.code.findbugs:jsr305",
        "commons-logging:commons-logging",
        "commons-pool:commons-pool",
        "io.airlift:aircompressor",
        "javax.annotation:javax.annotation-api",
        "org.apache.hadoop:hadoop-client-api",
        "org.apache.hadoop:hadoop-client-runtime",
        "org.apache.logging.log4j:log4j-api",
        "org.apache.logging.log4j:log4j-core",
        "org.apache.logging.log4j:log4j-slf4j2-impl",
        "org.apache.parquet:parquet-column",
        "org.apache.parquet:parquet-common",
        "org.apache.parquet:parquet-encoding",
        "org.apache.parquet:parquet-format-structures",
        "org.apache.parquet:parquet-hadoop",
        "org.apache.parquet:parquet-jackson",
        "org.locationtech.jts:jts-core",
        "org.roaringbitmap:RoaringBitmap",
        "org.roaringbitmap:shims",
        "org.slf4j:slf4j-api",
        "org.xerial.snappy:snappy-java",
    ),
}

# Session settings each format needs; a user's own value of a key is kept, and extensions are added to.
EXTENSIONS = {
    "delta": "io.delta.sql.DeltaSparkSessionExtension",
    "iceberg": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
}
_SESSION_CATALOG = "spark.sql.catalog.spark_catalog"
# Delta's catalog serves Delta tables and passes the others to the Hive metastore; Iceberg's
# session catalog keeps Iceberg tables in the Hive metastore Spark itself uses.
SESSION_CATALOGS = {
    "delta": {_SESSION_CATALOG: "org.apache.spark.sql.delta.catalog.DeltaCatalog"},
    "iceberg": {_SESSION_CATALOG: "org.apache.iceberg.spark.SparkSessionCatalog", f"{_SESSION_CATALOG}.type": "hive"},
}
ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
# What Iceberg's Hive catalog needs of a local Derby metastore (the operator's ``metastore_dir``):
# it builds its metastore client from the Hadoop configuration, where Hive's default connection
# pool is BoneCP, which Spark does not ship (Spark's own client switches to DBCP the same way); and
# it commits under a metastore lock by default, whose tables Spark's Derby schema does not have,
# while Hive 2.3.10's metastore (Spark's) also takes Iceberg's lock-free commit.
LOCAL_METASTORE = {
    "iceberg": {
        "spark.hadoop.datanucleus.connectionPoolingType": "DBCP",
        "spark.hadoop.iceberg.engine.hive.lock-enabled": "false",
    },
}


def spark_minor(full_version: str) -> str:
    """``4.1`` of ``4.1.4`` (or of ``4.1.0.dev1``)."""
    parts = full_version.split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        raise ValueError(f"not a Spark version: {full_version!r}")
    return f"{parts[0]}.{parts[1]}"


def submitting_spark_minor() -> str:
    """The minor of the pyspark installed here, whose spark-submit starts the job."""
    try:
        return spark_minor(version("pyspark"))
    except PackageNotFoundError:
        raise RuntimeError("pyspark is not installed: install the provider's spark extra") from None


def packages_for(table_format: str, minor: str) -> str:
    """The spark-submit ``--packages`` for ``table_format`` on Spark ``minor``; ValueError if it has none."""
    releases = RELEASES[table_format]
    if minor not in releases:
        raise ValueError(
            f"format {table_format!r} has no release for Spark {minor} (it has for Spark {', '.join(sorted(releases))}): "
            "run the job on one of those, or pass packages= or jars= naming a build for this Spark"
        )
    return releases[minor]


def default_packages(
    table_format: str, packages: str | None, jars: str | None, conf: dict[str, Any], minor: str | None = None
) -> str | None:
    """What the job's ``packages`` should be: as given, or for ``delta`` and ``iceberg`` without
    any jars or packages named (arguments or ``spark.jars*`` in ``conf``), the format's release for
    Spark ``minor`` (default: :func:`submitting_spark_minor`)."""
    if table_format not in RELEASES or packages or jars or conf.get("spark.jars.packages") or conf.get("spark.jars"):
        return packages
    return packages_for(table_format, minor or submitting_spark_minor())


def default_exclude_packages(table_format: str, packages: str | None, exclude_packages: str | None) -> str | None:
    """What the job's ``exclude_packages`` should be: as given, or, when ``packages`` is the
    format's release for some Spark minor, what that release depends on and Spark already ships
    (:data:`SHIPPED_WITH_SPARK`)."""
    if exclude_packages or table_format not in SHIPPED_WITH_SPARK or packages not in RELEASES[table_format].values():
        return exclude_packages
    return ",".join(SHIPPED_WITH_SPARK[table_format])


def session_conf(table_format: str, conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with what ``table_format`` needs added: its SQL extension and session catalog."""
    if table_format not in EXTENSIONS:
        return dict(conf)
    added = dict(conf)
    extensions = [name.strip() for name in str(added.get("spark.sql.extensions", "")).split(",") if name.strip()]
    if EXTENSIONS[table_format] not in extensions:
        added["spark.sql.extensions"] = ",".join([*extensions, EXTENSIONS[table_format]])
    if _SESSION_CATALOG not in added:
        added.update(SESSION_CATALOGS[table_format])
    return added


def catalog_conf(table: str, properties: dict[str, str]) -> dict[str, str]:
    """The Spark settings of the Iceberg catalog a ``catalog.database.name`` table names, from its
    properties (e.g. ``{"type": "hadoop", "warehouse": "/data/lake"}`` or ``{"type": "hive", "uri": ...}``)."""
    parts = table.split(".")
    if len(parts) != 3:
        raise ValueError(f"table_catalog needs a table named 'catalog.database.name', got {table!r}")
    if not isinstance(properties, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items()):
        raise ValueError(f"table_catalog must be a dict of str to str, got {properties!r}")
    prefix = f"spark.sql.catalog.{parts[0]}"
    return {prefix: ICEBERG_CATALOG, **{f"{prefix}.{key}": value for key, value in properties.items()}}


def with_local_catalog(conf: dict[str, Any], table_format: str, warehouse_dir: str | None, metastore_dir: str | None) -> dict[str, Any]:
    """``conf`` with the Hive catalog on this machine: ``spark.sql.warehouse.dir`` and a Derby
    metastore under ``metastore_dir`` (what ``table_format`` needs of it too). A value ``conf``
    already has is kept; the driver's Java options are added to."""
    added = dict(conf)
    if warehouse_dir:
        added.setdefault("spark.sql.warehouse.dir", warehouse_dir)
    if metastore_dir:
        added = {**LOCAL_METASTORE.get(table_format, {}), **added}
        metastore = Path(metastore_dir)
        derby = f"jdbc:derby:;databaseName={metastore / 'metastore_db'};create=true"
        added.setdefault("spark.hadoop.javax.jdo.option.ConnectionURL", derby)
        options = added.get("spark.driver.extraJavaOptions", "")
        added["spark.driver.extraJavaOptions"] = f"{options} -Dderby.system.home={metastore}".strip()
    return added
