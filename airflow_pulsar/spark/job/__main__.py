"""The job's entry point: ``spark-submit .../airflow_pulsar/spark/job/__main__.py --spec SPEC``
(``IngestJobSpec.to_argument``, or plain JSON).

The job archive holds this file as its own ``__main__.py`` too, so that ``python
airflow_pulsar_job.zip --spec SPEC`` runs the job from the archive alone (how a driver launched
on a standalone cluster's worker runs it).
"""

from __future__ import annotations

import sys

# Absolute: spark-submit and Python run this file as a script.
from airflow_pulsar.spark.job.write import main

if __name__ == "__main__":
    sys.exit(main())
