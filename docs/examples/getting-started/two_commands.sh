# The two commands of docs/getting-started.md. A test cannot run `make test` inside itself, so
# tests/integration/test_docs_shell_examples.py checks instead that each line is a target of the
# Makefile that CI runs: `make test` is in .ci/run, and `make demo` runs `python -m
# airflow_pulsar.demo`, which tests/integration/test_demo.py runs.

# [START two commands]
make demo   # creates .venv, installs, starts the broker, produces events, runs the ingestion DAG with Spark
make test   # creates .venv if missing, installs requirements/dev.lock (and a Java 17 runtime if missing), runs the tests
# [END two commands]
