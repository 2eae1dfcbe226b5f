"""The Delta and Iceberg releases the operator names per Spark minor agree with the Spark the
development environment pins (requirements/pins.txt) and with the jars jvm/lakehouse/pom.xml
resolves for the tests and the demo; a minor without a release is refused, saying so."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from importlib.metadata import version
from pathlib import Path

import pytest

from airflow_pulsar.spark.table_formats import (
    EXTENSIONS,
    RELEASES,
    SHIPPED_WITH_SPARK,
    catalog_conf,
    default_exclude_packages,
    default_packages,
    packages_for,
    session_conf,
    spark_minor,
)

ROOT = Path(__file__).resolve().parents[2]
POM = "{http://maven.apache.org/POM/4.0.0}"


def pinned_spark_minor() -> str:
    pin = re.search(r"^pyspark==(\S+)", (ROOT / "requirements" / "pins.txt").read_text(), re.MULTILINE)
    assert pin, "requirements/pins.txt pins no pyspark"
    return spark_minor(pin.group(1))


def pom_coordinates() -> dict[str, str]:
    """Profile id -> the coordinates of its first dependency, properties substituted."""
    root = ET.parse(ROOT / "jvm" / "lakehouse" / "pom.xml").getroot()
    properties = {child.tag.removeprefix(POM): child.text or "" for child in root.find(f"{POM}properties") or []}

    def text(element: ET.Element, tag: str) -> str:
        value = element.findtext(f"{POM}{tag}") or ""
        return re.sub(r"\$\{([^}]+)\}", lambda m: properties[m.group(1)], value)

    coordinates = {}
    for profile in root.iter(f"{POM}profile"):
        dependency = profile.find(f"{POM}dependencies/{POM}dependency")
        assert dependency is not None
        coordinates[text(profile, "id")] = ":".join(text(dependency, tag) for tag in ("groupId", "artifactId", "version"))
    return coordinates


def test_the_pinned_spark_has_a_release_of_each_format_and_the_pom_resolves_it() -> None:
    minor = pinned_spark_minor()
    assert pom_coordinates() == {table_format: packages_for(table_format, minor) for table_format in RELEASES}


def test_each_release_is_built_for_the_spark_minor_it_is_listed_under() -> None:
    for table_format, releases in RELEASES.items():
        for minor, coordinates in releases.items():
            assert f"-{minor}_2.13:" in coordinates or f"_{minor}_2.13:" in coordinates, (table_format, minor, coordinates)


@pytest.mark.parametrize("table_format", sorted(RELEASES))
def test_a_spark_minor_without_a_release_is_refused_naming_it(table_format: str) -> None:
    with pytest.raises(ValueError, match=rf"format '{table_format}' has no release for Spark 4\.3 .*Spark 4\.0, 4\.1"):
        packages_for(table_format, "4.3")


def test_the_release_for_the_installed_spark_unless_jars_or_packages_are_named() -> None:
    pinned = pinned_spark_minor()
    assert default_packages("delta", None, None, {}, minor=pinned) == RELEASES["delta"][pinned]
    assert default_packages("iceberg", None, None, {"spark.ui.enabled": "false"}, minor=pinned) == RELEASES["iceberg"][pinned]
    # Without a minor: the installed pyspark's, whose spark-submit runs the job.
    installed = spark_minor(version("pyspark"))
    if installed in RELEASES["delta"]:
        assert default_packages("delta", None, None, {}) == RELEASES["delta"][installed]
    else:
        with pytest.raises(ValueError, match=f"no release for Spark {installed}"):
            default_packages("delta", None, None, {})
    assert default_packages("delta", None, "/jars/delta.jar", {}) is None
    assert default_packages("delta", "com.example:own:1", None, {}) == "com.example:own:1"
    assert default_packages("iceberg", None, None, {"spark.jars": "/jars/iceberg.jar"}) is None
    assert default_packages("parquet", None, None, {}) is None
    with pytest.raises(ValueError, match="format 'iceberg' has no release for Spark 4.3"):
        default_packages("iceberg", None, None, {}, minor="4.3")


def test_the_default_release_leaves_out_what_spark_ships_unless_exclusions_are_named() -> None:
    shipped = ",".join(SHIPPED_WITH_SPARK["delta"])
    for coordinates in RELEASES["delta"].values():
        assert default_exclude_packages("delta", coordinates, None) == shipped
    assert default_exclude_packages("delta", RELEASES["delta"]["4.1"], "com.example:mine") == "com.example:mine"
    # A build the user names is theirs to trim; Iceberg's runtime jar depends on nothing.
    assert default_exclude_packages("delta", "com.example:own-delta:1", None) is None
    assert default_exclude_packages("iceberg", RELEASES["iceberg"]["4.1"], None) is None
    assert default_exclude_packages("parquet", None, None) is None


def test_what_the_default_packages_leave_out_is_what_the_pom_leaves_out() -> None:
    """spark-submit --packages and the pom's resolution give the job the same jars: every artifact
    left out of the default packages is of a group the pom excludes, and only those."""
    root = ET.parse(ROOT / "jvm" / "lakehouse" / "pom.xml").getroot()
    groups = set((root.findtext(f".//{POM}excludeGroupIds") or "").split(","))
    excluded = {artifact.split(":")[0] for artifact in SHIPPED_WITH_SPARK["delta"]}
    assert excluded <= groups
    # The pom's other groups are ones spark-submit's resolution of Delta does not bring anyway
    # (Spark's own modules, Scala, Jackson's Scala module).
    assert groups - excluded <= {"org.apache.spark", "org.scala-lang", "org.scala-lang.modules", "com.fasterxml.jackson.module"}


def test_spark_minor_of_versions_and_bad_ones() -> None:
    assert spark_minor("4.1.4") == "4.1" and spark_minor("4.0.0.dev1") == "4.0"
    with pytest.raises(ValueError, match="not a Spark version"):
        spark_minor("four")


def test_the_session_conf_adds_the_extension_and_keeps_the_users_settings() -> None:
    conf = session_conf("delta", {"spark.sql.extensions": "com.example.Ext", "spark.ui.enabled": "false"})
    assert conf["spark.sql.extensions"] == f"com.example.Ext,{EXTENSIONS['delta']}"
    assert conf["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert session_conf("delta", conf) == conf  # added once
    own = session_conf("iceberg", {"spark.sql.catalog.spark_catalog": "com.example.Catalog"})
    assert own["spark.sql.catalog.spark_catalog"] == "com.example.Catalog" and "spark.sql.catalog.spark_catalog.type" not in own
    assert session_conf("parquet", {"a": "b"}) == {"a": "b"}


def test_an_iceberg_catalog_from_its_properties() -> None:
    assert catalog_conf("lake.db.events", {"type": "hadoop", "warehouse": "/data"}) == {
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "hadoop",
        "spark.sql.catalog.lake.warehouse": "/data",
    }
    with pytest.raises(ValueError, match="'catalog.database.name'"):
        catalog_conf("db.events", {"type": "hadoop"})
    with pytest.raises(ValueError, match="dict of str to str"):
        catalog_conf("lake.db.events", {"type": 1})  # type: ignore[dict-item]
