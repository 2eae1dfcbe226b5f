"""``python -m airflow_pulsar.client.standalone``: run the embedded broker."""

import sys

from .server import main

sys.exit(main())
