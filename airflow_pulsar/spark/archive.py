"""The job's code as one zip for ``--py-files``, so executors on a cluster import the same modules.

It holds ``airflow_pulsar/__init__.py``, the client package and this package (Python sources
only); their third-party imports (protobuf, cramjam, crc32c, pyarrow) must be installed where
the executors run.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import airflow_pulsar
import airflow_pulsar.client
import airflow_pulsar.spark


def build_job_archive(directory: Path) -> Path:
    """Write ``airflow_pulsar_job.zip`` into ``directory`` and return its path."""
    target = Path(directory) / "airflow_pulsar_job.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(Path(airflow_pulsar.__file__), "airflow_pulsar/__init__.py")
        for package, prefix in ((airflow_pulsar.client, "airflow_pulsar/client"), (airflow_pulsar.spark, "airflow_pulsar/spark")):
            root = Path(package.__file__).parent
            for source in sorted(root.rglob("*.py")):
                archive.write(source, f"{prefix}/{source.relative_to(root).as_posix()}")
    return target
