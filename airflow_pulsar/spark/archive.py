"""The job's code as one zip, so that the driver and executors on a cluster import the same modules.

It holds ``airflow_pulsar/__init__.py``, the client package, ``airflow_pulsar/spark/__init__.py``
and :mod:`airflow_pulsar.spark.job` (Python sources only), and the job's entry point as its
``__main__.py``; never :mod:`airflow_pulsar.spark.planning`, which stays in the Airflow worker.
Their third-party imports (protobuf, cramjam, crc32c, pyarrow) must be installed where the job runs.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import airflow_pulsar
import airflow_pulsar.client
import airflow_pulsar.spark
import airflow_pulsar.spark.job

ARCHIVE_NAME = "airflow_pulsar_job.zip"


def build_job_archive(directory: Path, name: str = ARCHIVE_NAME) -> Path:
    """Write the archive as ``name`` into ``directory`` and return its path."""
    target = Path(directory) / name
    job = Path(airflow_pulsar.spark.job.__file__).parent
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(Path(airflow_pulsar.__file__), "airflow_pulsar/__init__.py")
        archive.write(Path(airflow_pulsar.spark.__file__), "airflow_pulsar/spark/__init__.py")
        archive.write(job / "__main__.py", "__main__.py")
        for root, prefix in ((Path(airflow_pulsar.client.__file__).parent, "airflow_pulsar/client"), (job, "airflow_pulsar/spark/job")):
            for source in sorted(root.rglob("*.py")):
                archive.write(source, f"{prefix}/{source.relative_to(root).as_posix()}")
    return target
