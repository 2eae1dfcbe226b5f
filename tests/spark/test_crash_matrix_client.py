"""The ingest's crash matrix on a Spark standalone cluster in client deploy mode (the
driver is spark-submit's JVM, executors run on the workers): at every crash point, each kind of process a death there
can be is killed with SIGKILL, for the table formats
:func:`~tests.support.crash_matrix.cells` gives (every format with CRASH_MATRIX=full), and a rerun leaves each message once and
the backlog at 0 (tests/support/crash_matrix.py). ``make test-crashes`` runs it."""

from __future__ import annotations

import pytest

from jvm.spark_cluster import StandaloneCluster
from tests.support.crash_matrix import CLIENT_MODE, CrashCell, cells
from tests.support.spark_ingest import SEVERAL_JOBS_TIMEOUT

pytestmark = [pytest.mark.crash_matrix, pytest.mark.one_broker, SEVERAL_JOBS_TIMEOUT]


@pytest.mark.parametrize(("point", "kill", "kind"), cells(CLIENT_MODE))
def test_a_rerun_after_a_process_died_at_a_crash_point_leaves_each_message_once(
    point: str, kill: str, kind: str, spark_cluster: StandaloneCluster, crash_cell: CrashCell
) -> None:
    crash_cell.crash_then_rerun(CLIENT_MODE, kind, point, kill, spark_cluster)
