"""Imports ``pulsar_fork_state`` in every Airflow component as it starts, as a user's plugin or
local settings import a library of theirs.

Airflow imports each file of the plugins folder afresh in every process that loads plugins, a
task process included, so the state lives in a package the plugins folder's ``.airflowignore``
hides from the plugin loader: it is imported once, by the scheduler, and the processes forked from
the scheduler share that import.
"""

import pulsar_fork_state  # noqa: F401
