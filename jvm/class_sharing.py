"""Class-data sharing for the short-lived JVMs the tests start (Spark drivers, Pulsar standalone).

A JVM started with ``-XX:SharedArchiveFile`` maps the classes a dynamic archive holds instead of
loading, parsing and verifying them from the jars: seconds of CPU less per start on a busy 2-core
machine. An archive made from other jars or another JDK build is passed over and the JVM loads its
classes as usual; ``-Xlog`` keeps it from saying so. (A JVM named a missing archive would share no
classes at all, not even the JDK's own, so the option is given only when the archive is there.)

The archives live in the checkout's ``.jvm/`` cache; ``make spark-cds`` and ``make pulsar-cds``
make them with one training run each (``jvm/spark_cds.py``, ``jvm/pulsar_cds.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

JVM_CACHE = Path(__file__).resolve().parent.parent / ".jvm"


def sharing_options(archive: Path) -> list[str]:
    """The options that map ``archive``'s classes, none when it has not been made."""
    if not archive.exists():
        return []
    return [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def dump_archive(archive: Path, train: Callable[[str], None]) -> None:
    """Make ``archive``: ``train`` runs a JVM with the option it is given, which writes the classes
    that JVM loaded when it exits. The file is written beside its place and renamed there once
    whole, so no JVM maps a half-written archive."""
    archive.parent.mkdir(exist_ok=True)
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    try:
        train(f"-XX:ArchiveClassesAtExit={partial}")
        if not partial.exists():
            raise SystemExit(f"the training JVM exited without writing {partial}")
        partial.replace(archive)
    finally:
        partial.unlink(missing_ok=True)
    print(f"CDS archive: {archive} ({archive.stat().st_size // 2**20} MiB)")
