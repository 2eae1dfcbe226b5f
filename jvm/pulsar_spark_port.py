"""Port StreamNative's pulsar-spark connector sources (Spark 3.1, Scala 2.12) to Spark 4.1 and Scala 2.13.

Reads the sources `make connector-jar` unpacked from Maven Central and writes the batch read path
(``spark.read.format("pulsar")``) to the directory scalac compiles. Usage::

    python jvm/pulsar_spark_port.py SOURCES PORTED
"""

from __future__ import annotations

import argparse
import shutil
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path("org/apache/spark/sql/pulsar")

# The files of the batch read path; the streaming source and every writer are left out.
BATCH_READ = (
    "package.scala",
    "AdminUtils.scala",
    "CachedPulsarClient.scala",
    "JSONParser.scala",
    "JsonUtils.scala",
    "PulsarConfigUpdater.scala",
    "PulsarConfigurationUtils.scala",
    "PulsarDeserializer.scala",
    "PulsarMetadataReader.scala",
    "PulsarOffset.scala",
    "PulsarOptions.scala",
    "PulsarProvider.scala",
    "PulsarRelation.scala",
    "PulsarSourceRDD.scala",
    "PulsarSources.scala",
    "SchemaUtils.scala",
)


class PortError(RuntimeError):
    """A rule no longer matches the sources (another connector release?)."""


@dataclass(frozen=True)
class Replace:
    """Replace ``old`` by ``new`` in ``file``, where ``old`` occurs exactly ``count`` times."""

    file: str
    old: str
    new: str
    count: int = 1

    def apply(self, text: str) -> str:
        found = text.count(self.old)
        if found != self.count:
            raise PortError(f"{self.file}: {self.old!r} occurs {found} times, expected {self.count}")
        return text.replace(self.old, self.new)


@dataclass(frozen=True)
class Drop:
    """Drop the member of ``file`` that starts on a line containing ``start`` and contains ``having``.

    A member is its first line, the deeper-indented (or blank) lines after it and a closing brace at
    its own indentation: exactly one member must match.
    """

    file: str
    start: str
    having: str = ""

    def apply(self, text: str) -> str:
        lines = text.splitlines(keepends=True)
        spans = [_member(lines, index) for index, line in enumerate(lines) if self.start in line]
        spans = [(begin, end) for begin, end in spans if self.having in "".join(lines[begin:end])]
        if len(spans) != 1:
            raise PortError(f"{self.file}: {len(spans)} members start with {self.start!r}, expected 1")
        begin, end = spans[0]
        return "".join(lines[:begin] + lines[end:])


def _member(lines: list[str], begin: int) -> tuple[int, int]:
    indent, end = _indent(lines[begin]), begin + 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    if end < len(lines) and _indent(lines[end]) == indent and lines[end].lstrip().startswith("}"):
        end += 1
    return begin, end


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


# Scala 2.13: a mutable Buffer is no longer a Seq (now immutable).
SCALA_2_13 = (
    Replace("PulsarMetadataReader.scala", ".matches())\n", ".matches()).toSeq\n"),
    Replace("SchemaUtils.scala", "StructType(mainSchema)", "StructType(mainSchema.toSeq)"),
    Replace("SchemaUtils.scala", "StructType(fields)", "StructType(fields.toSeq)", count=2),
)

# Spark 4.1: renamed and moved APIs.
SPARK_4_1 = (
    # JSONOptions' timestamp pattern is split in a read and a write one; the write one is a String.
    Replace("JSONParser.scala", "options.timestampFormat,", "options.timestampFormatInWrite,", count=2),
    # A bad record's partial results are rows now, not an Option.
    Replace("JSONParser.scala", "() => None,", "() => Array.empty[InternalRow],", count=2),
    # The DataFrame of internal rows is made by the classic session.
    Replace(
        "PulsarRelation.scala",
        "sqlContext.internalCreateDataFrame(",
        "sqlContext.sparkSession.asInstanceOf[org.apache.spark.sql.classic.SparkSession].internalCreateDataFrame(",
    ),
)

# Pulsar client 4.x: SchemaInfo is an interface (SchemaInfoImpl has the setters); Jackson's
# annotations are no longer relocated.
PULSAR_4 = (
    Replace("SchemaUtils.scala", "val si = new SchemaInfo()", "val si = new SchemaInfoImpl()"),
    Replace("SchemaUtils.scala", "si = new SchemaInfo()", "val info = new SchemaInfoImpl()\n    si = info"),
    *(
        Replace("SchemaUtils.scala", f"si.{setter}", f"info.{setter}")
        for setter in ("setSchema(ba)", "setSchema(new Array", "setName(in", "setProperties(in", "setType(SchemaType.valueOf(in")
    ),
    Replace(
        "SchemaUtils.scala",
        "import org.apache.pulsar.common.schema.",
        "import org.apache.pulsar.client.impl.schema.SchemaInfoImpl\nimport org.apache.pulsar.common.schema.",
    ),
    Replace("PulsarConfigurationUtils.scala", "org.apache.pulsar.shade.com.fasterxml.jackson.", "com.fasterxml.jackson."),
)

# Scala's runtime reflection fails on the Pulsar 4.x configuration classes' annotations ("illegal
# cyclic reference involving class InterfaceAudience"): their option names come from Java's.
JAVA_REFLECTION = (
    Drop("PulsarConfigurationUtils.scala", "private def nonIgnoredFields["),
    Replace(
        "PulsarConfigurationUtils.scala",
        "  private def insensitive2Sensitive[T: TypeTag]",
        """  private def nonIgnoredFields[T: scala.reflect.ClassTag]: Seq[String] =
    implicitly[scala.reflect.ClassTag[T]].runtimeClass.getDeclaredFields.toSeq
      .filterNot(f => java.lang.reflect.Modifier.isStatic(f.getModifiers))
      .filterNot(_.isAnnotationPresent(classOf[JsonIgnore]))
      .map(_.getName)

  private def insensitive2Sensitive[T: scala.reflect.ClassTag]""",
    ),
)

# The batch read path only: the provider's streaming source, streaming sink and batch writer go,
# with the offset log and the offset conversions only streaming uses (with those overloads of
# SpecificPulsarOffset.apply gone, Scala 2.13 infers the type of its callers' `.toMap` again).
BATCH_ONLY = (
    Replace("PulsarProvider.scala", "    with StreamSourceProvider\n", ""),
    Replace("PulsarProvider.scala", "    with StreamSinkProvider\n", ""),
    Replace("PulsarProvider.scala", "    with CreatableRelationProvider\n", ""),
    Drop("PulsarProvider.scala", "override def sourceSchema("),
    Drop("PulsarProvider.scala", "override def createSource("),
    Drop("PulsarProvider.scala", "override def createSink("),
    Drop("PulsarProvider.scala", "override def createRelation(", having="mode: SaveMode"),
    Drop("PulsarSources.scala", "class PulsarSourceInitialOffsetWriter("),
    Drop("PulsarOffset.scala", "def getTopicOffsets("),
    Drop("PulsarOffset.scala", "def apply(offset: SerializedOffset)"),
    Drop("PulsarOffset.scala", "def apply(offsetTuples: "),
)

RULES: tuple[Replace | Drop, ...] = SCALA_2_13 + SPARK_4_1 + PULSAR_4 + JAVA_REFLECTION + BATCH_ONLY


def port(sources: Path, ported: Path) -> None:
    """Write the ported batch read path of ``sources`` to ``ported`` (replaced)."""
    shutil.rmtree(ported, ignore_errors=True)
    (ported / PACKAGE).mkdir(parents=True)
    for name in BATCH_READ:
        text = (sources / PACKAGE / name).read_text()
        for rule in RULES:
            if rule.file == name:
                text = rule.apply(text)
        (ported / PACKAGE / name).write_text(text)
    services = Path("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister")
    (ported / services).parent.mkdir(parents=True)
    shutil.copyfile(sources / services, ported / services)


def main() -> None:
    """Port the sources given on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", type=Path)
    parser.add_argument("ported", type=Path)
    args = parser.parse_args()
    port(args.sources, args.ported)


if __name__ == "__main__":
    main()
