"""JVM options for the short-lived JVMs the tests start: Spark drivers and executors, spark-submit
and Spark's daemons. On a busy 2-core machine they start about twice as fast with the C1 compiler
only and the serial collector; none of them runs long enough to gain from C2."""

from __future__ import annotations

QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# The environment that gives the JVM spark-submit starts (in client mode, the driver) those options,
# for Spark runs whose configuration a test does not write: the example DAGs, the demo, and the
# standalone client that submits a cluster-mode driver.
SPARK_SUBMIT_ENV = {"SPARK_SUBMIT_OPTS": QUICK_JVM_OPTIONS}
