"""``python -m airflow_pulsar.client.standalone``: run the embedded broker (``airflow-pulsar standalone``)."""

import sys

from .command_line import run_command, split_debug_flag
from .server import PROG, main

debug, args = split_debug_flag(sys.argv[1:])
sys.exit(run_command(PROG, lambda: main(args), debug=debug))
