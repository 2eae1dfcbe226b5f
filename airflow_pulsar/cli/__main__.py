"""``python -m airflow_pulsar.cli``: the same as the ``airflow-pulsar`` script."""

import sys

from airflow_pulsar.cli import main

sys.exit(main())
