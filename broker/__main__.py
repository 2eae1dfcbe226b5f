"""``python -m airflow_pulsar.broker``: run the embedded broker (``airflow-pulsar standalone``)."""

import sys

from airflow_pulsar.cli.command_line import run_command, split_debug_flag

from .server import PROG, main

debug, args = split_debug_flag(sys.argv[1:])
sys.exit(run_command(PROG, lambda: main(args), debug=debug))
