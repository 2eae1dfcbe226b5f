"""Imported by every Airflow component as it starts (through pulsar_fork_plugin.py); makes a
PulsarHook at import and uses it: its client and admin connect, and it opens a producer.

The scheduler imports it before its LocalExecutor forks the worker processes, whose supervisors
fork the task processes: the tasks of ``pulsar_forked_clients`` find these objects, made in the
scheduler (tests/deployment/test_forked_workers.py). A real plugin should not connect at import;
this one does so that the objects cross the forks with live connections and threads. Each process
that makes them leaves its producer's name in AIRFLOW_HOME, for the test to find on the broker.
"""

from __future__ import annotations

import os
from pathlib import Path

from airflow_pulsar.hooks.pulsar import PulsarHook

TOPIC = "persistent://public/default/forked-workers"
MADE_IN_PID = os.getpid()
HOOK = PulsarHook()
PRODUCER = HOOK.create_producer(TOPIC)
HOOK.get_admin().topic_stats(TOPIC)
Path(os.environ["AIRFLOW_HOME"], f"producer-{MADE_IN_PID}.txt").write_text(PRODUCER.producer_name())
