# One-command setup: `make test` and `make demo` create .venv and install what they need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# The broker-backed tiers are mostly waiting on I/O: two workers keep both cores busy.
PYTEST_WORKERS ?= 2

# Apache Pulsar's jars (jvm/pom.xml), resolved by Maven into the checkout's git-ignored cache.
JVM_CACHE := .jvm
PULSAR_CLASSPATH := $(JVM_CACHE)/pulsar.classpath
# Delta Lake's and Apache Iceberg's Spark jars (jvm/lakehouse/pom.xml), one comma-separated list
# per format, which the tests and the demo pass to the ingest operator as `jars`.
LAKEHOUSE_JARS := $(JVM_CACHE)/lakehouse-delta.jars $(JVM_CACHE)/lakehouse-iceberg.jars
MVN := mvn -B -q -Dmaven.repo.local=$(CURDIR)/$(JVM_CACHE)/m2
NEED_MVN := command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; }

.PHONY: install test test-crashes fault-run demo bench docs docs-check docs-tools browser proto java clean pulsar pulsar-jars lakehouse-jars connector-jar spark-cds pulsar-cds lock lint ruff mypy test-ranges test-lowest test-highest range-envs range-env-lowest range-env-highest

UV := $(VENV)/bin/uv
# Exact versions of everything the development environment and CI install (`make lock`).
LOCK := requirements/dev.lock

# Installed with their bytecode: an environment may set PYTHONDONTWRITEBYTECODE (this machine's
# does), and then every new Python process (an Airflow component or task, a Spark worker, a
# broker) would compile what it imports from source again: about 5 s of CPU for Airflow alone.
UV_INSTALL = $(UV) pip install --compile-bytecode --quiet

$(STAMP): pyproject.toml $(LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { echo "Python >= 3.10 is required"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	test -x $(UV) || $(PY) -m pip install --quiet uv
	$(UV_INSTALL) --python $(PY) -r $(LOCK)
	$(call whole_pyspark,$(PY),$(LOCK))
	$(UV) pip install --python $(PY) --quiet --no-deps -e .
	touch $(STAMP)

# The Spark provider (6.x) depends on pyspark-client, which installs into the same `pyspark`
# package as pyspark: write pyspark's own files last so that they are whole. Uninstall, then
# install from uv's cache (--reinstall-package would rebuild pyspark's sdist, 1 GB each time).
whole_pyspark = $(UV) pip uninstall --python $(1) --quiet pyspark && \
	$(UV_INSTALL) --python $(1) --no-deps "$$(grep -o '^pyspark==[^ ;]*' $(2))"

# Recompile the lock from pyproject.toml's ranges and requirements/pins.txt.
lock: | $(VENV)
	$(UV) pip compile --quiet --universal --python-version 3.10 pyproject.toml \
		--extra spark --extra dev --extra docs --extra proto --constraint requirements/pins.txt -o $(LOCK)

$(VENV):
	$(PYTHON) -m venv $(VENV) && $(PY) -m pip install --quiet uv

# Both ends of every declared range, each in a throwaway environment, on the embedded broker: the
# unit and broker tiers, the interop files that touch each dependency (protobuf in every frame,
# fastavro in the schemas, cryptography in encryption, httpx in the admin client) and the Spark
# ingestion tier (pyspark, pyarrow, Airflow). Left to the main suite: the rest of interop, the Spark
# cluster test and the auth-method ingests (on the standalone cluster too, and each run's log read
# from captured output), the crash-point tests and the 100k-message run, which exercise behaviour and scale
# rather than versions (the DAG run in test_ingest_dag takes the same read and write path), and the
# Delta and Iceberg tests (the zombie tests among them), whose jars are built for the pinned Spark minor only, and the
# typed-column ingests (their Avro decoding and table evolution run here as unit tests); and the
# generated-code and wheel checks, which need the development environment's protoc and setuptools.
# The uv cache is shared with the main environment.
RANGE_TIERS ?= tests/unit tests/broker \
	tests/interop/test_interop_round_trip.py tests/interop/test_schema_interop.py \
	tests/interop/test_encryption.py tests/interop/test_producer_interop.py tests/interop/test_admin.py \
	tests/spark --ignore=tests/spark/test_ingest_cluster.py -k "not crashes and not ingests_100k" \
	--ignore=tests/spark/test_ingest_lakehouse.py --ignore=tests/spark/test_ingest_lakehouse_cluster.py \
	--ignore=tests/spark/test_ingest_typed.py --ignore=tests/spark/test_ingest_zombies.py --ignore=tests/spark/test_ingest_auth.py
test-ranges: test-lowest test-highest

# An environment alone (.ci/run builds both while `make test` runs, which already built $(STAMP)),
# then its tests; `make test-lowest` builds its environment first, always afresh.
RANGE_ENVS := range-env-lowest range-env-highest
range-envs: $(RANGE_ENVS)
range-env-lowest: RESOLUTION := lowest-direct
range-env-highest: RESOLUTION := highest
$(RANGE_ENVS): range-env-%: $(STAMP)
	rm -rf .venv-$*
	$(UV) venv --quiet --python $(PY) .venv-$*
	$(UV) pip compile --quiet pyproject.toml --extra spark --extra dev --resolution $(RESOLUTION) \
		--constraint requirements/$*.txt -o .venv-$*/requirements.txt
	$(UV_INSTALL) --python .venv-$*/bin/python -r .venv-$*/requirements.txt
	$(call whole_pyspark,.venv-$*/bin/python,.venv-$*/requirements.txt)
	$(UV) pip install --python .venv-$*/bin/python --quiet --no-deps -e .
	@echo "$* environment:" $$(grep -oE '^(protobuf|pyspark|apache-airflow|pyarrow|httpx|pandas|aiohttp)==[^ ;]*' .venv-$*/requirements.txt)

test-lowest test-highest: test-%: range-env-%
	.venv-$*/bin/python -m pytest -n $(PYTEST_WORKERS) --brokers embedded \
		--ignore=tests/unit/test_proto_generated.py --ignore=tests/unit/test_distribution.py $(RANGE_TIERS)

install: $(STAMP) java pulsar-jars lakehouse-jars

pulsar-jars: $(PULSAR_CLASSPATH)

$(PULSAR_CLASSPATH): jvm/pom.xml
	@mkdir -p $(JVM_CACHE)
	@$(NEED_MVN)
	$(MVN) -f jvm/pom.xml dependency:build-classpath -Dmdep.outputFile=$(CURDIR)/$(PULSAR_CLASSPATH)

lakehouse-jars: $(LAKEHOUSE_JARS)

# The class-data-sharing archive of a Spark driver of this environment, which the tests' Spark JVMs
# map their classes from (about 5 s of CPU less each; jvm/spark_cds.py). One local Spark run makes it.
SPARK_CDS := $(JVM_CACHE)/spark-driver.jsa
spark-cds: $(SPARK_CDS)

$(SPARK_CDS): $(STAMP) jvm/spark_cds.py jvm/class_sharing.py | java
	$(PY) -m jvm.spark_cds

# The same for Apache Pulsar standalone (jvm/pulsar_cds.py): one standalone trained and stopped.
PULSAR_CDS := $(JVM_CACHE)/pulsar.jsa
pulsar-cds: $(PULSAR_CDS)

$(PULSAR_CDS): $(PULSAR_CLASSPATH) jvm/pulsar_cds.py jvm/class_sharing.py | $(STAMP) java
	$(PY) -m jvm.pulsar_cds

$(JVM_CACHE)/lakehouse-%.jars: jvm/lakehouse/pom.xml
	@mkdir -p $(JVM_CACHE)
	@$(NEED_MVN)
	$(MVN) -f jvm/lakehouse/pom.xml -P $* dependency:build-classpath -Dmdep.outputFile=$(CURDIR)/$@

# StreamNative's pulsar-spark connector, the JVM data source bench/spark_connector.py compares our
# ingest with: its sources from Maven Central, ported to Spark 4.1 by jvm/pulsar_spark_port.py and
# compiled afresh in the git-ignored cache (jvm/pulsar-spark-connector/pom.xml); then one
# comma-separated list of its jar and the Pulsar client's. Only `make bench` builds it.
CONNECTOR_JARS := $(JVM_CACHE)/pulsar-spark-connector.jars
CONNECTOR_BUILD := $(CURDIR)/$(JVM_CACHE)/pulsar-spark-connector
CONNECTOR_MVN = $(MVN) -f jvm/pulsar-spark-connector/pom.xml -Dconnector.build=$(CONNECTOR_BUILD)
connector-jar: $(CONNECTOR_JARS)

$(CONNECTOR_JARS): jvm/pulsar-spark-connector/pom.xml jvm/pulsar_spark_port.py
	@mkdir -p $(JVM_CACHE)
	@$(NEED_MVN)
	rm -rf $(CONNECTOR_BUILD)
	$(CONNECTOR_MVN) initialize
	$(PYTHON) jvm/pulsar_spark_port.py $(CONNECTOR_BUILD)/connector-sources $(CONNECTOR_BUILD)/ported-sources
	$(CONNECTOR_MVN) package dependency:build-classpath -Dmdep.outputFile=$(CONNECTOR_BUILD)/dependencies.jars
	echo "$(CONNECTOR_BUILD)/pulsar-spark-connector-port-1.jar,$$(cat $(CONNECTOR_BUILD)/dependencies.jars)" > $@

# Apache Pulsar standalone in the foreground, on free ports; prints its URLs.
pulsar: install
	$(PY) -m jvm.apache_pulsar

# Spark needs Java 17 or newer; install Debian's JRE when it is missing or too old.
java:
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then \
		echo "installing a Java 17 runtime (found: $${v:-none})"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; \
	fi

# loadgroup: one worker runs the cluster tier, so one cluster starts (tests/conftest.py groups it).
# The slowest tests are listed at the end, to keep the suite's wall time in view.
test: install $(SPARK_CDS) $(PULSAR_CDS)
	$(PY) -m compileall -q client broker airflow_pulsar dags  # the project's own bytecode, as above
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=30 $(PYTEST_ARGS)

# The ingest's crash matrix (tests/spark/test_crash_matrix_*.py, marked crash_matrix, which `make
# test` leaves out): every crash point and process killed on each Spark master, the table formats
# rotated across the masters, the zombie tests' further pause points, and the lakehouse and cluster reruns after a crash: 38 tests, 25 minutes on a
# busy two-core machine (a local cell alone, 23 s on an idle one); CI runs it after `make test`; `make test-crashes CRASH_MATRIX=full` runs every format everywhere (most of
# an hour). On the embedded broker, as the commit protocol and not the broker is their subject. The
# cells go to the workers one by one (each worker starts its own cluster for the standalone
# modules), which shares them out more evenly than whole modules.
test-crashes: install $(SPARK_CDS)
	$(PY) -m compileall -q client broker airflow_pulsar dags
	CRASH_MATRIX=$(CRASH_MATRIX) $(PY) -m pytest -n $(PYTEST_WORKERS) --brokers embedded -m crash_matrix --durations=20 tests/spark $(PYTEST_ARGS)

# Seeded fault runs (tests/reliability/test_fault_schedules.py), a tier `make test` leaves out: for
# each seed a schedule of broker and client kills, restarts, cuts, stalls and partitions, on both
# brokers. SEEDS=4,5,6 (or FAULT_SEEDS) picks the seeds (a failure names its seed), FAULT_SECONDS each schedule's length.
FAULT_SEEDS ?= 1,2,5
SEEDS ?= $(FAULT_SEEDS)
FAULT_SECONDS ?= 40
fault-run: install $(PULSAR_CDS)
	FAULT_SEEDS=$(SEEDS) FAULT_SECONDS=$(FAULT_SECONDS) $(PY) -m pytest -m fault_run -n $(PYTEST_WORKERS) \
		--dist loadgroup --no-loadscope-reorder -rA $(PYTEST_ARGS) tests/reliability/test_fault_schedules.py

demo: install
	$(PY) -m airflow_pulsar.demo $(if $(BROKER),--broker $(BROKER)) $(if $(FORMAT),--format $(FORMAT))

# Quick mode by default; FULL=1 for the longer, steadier run.
bench: install connector-jar
	$(PY) bench/suite.py $(if $(FULL),--full)

# The documentation site (docs/) as HTML in the git-ignored build/docs/html. Every warning is an
# error (-W, all reported first: --keep-going) and every cross-reference must resolve (-n). -E reads
# every page afresh, so a warning of an unchanged page is not hidden by the last build's cache.
# Graphviz draws the diagrams from docs/diagrams/*.dot at build time.
DOCS_HTML := build/docs/html
NEED_DOT := command -v dot >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz; }
docs: $(STAMP)
	@$(NEED_DOT)
	$(VENV)/bin/sphinx-build -E -W --keep-going -n -q -b html docs $(DOCS_HTML)
	@echo "docs: $(DOCS_HTML)/index.html"

# Debian's Chromium and its driver, which tests/support/browser.py drives through Playwright (no
# browser download).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }

# The built site in a headless browser: navigation, search, and every internal link and image.
docs-check: docs browser
	DOCS_HTML=$(DOCS_HTML) $(PY) -m pytest -p no:cacheprovider tests/docs/test_site.py

# Style and correctness checks of every Python file (rules in pyproject.toml's [tool.ruff]), then
# the type check of client/, broker/ and airflow_pulsar/ ([tool.mypy]). Prerequisites, not a sub-make, so
# `make -o .venv/.installed lint` holds for both.
lint: ruff mypy

ruff: $(STAMP)
	$(VENV)/bin/ruff check .

# mypy checks client/, broker/ and airflow_pulsar/ as the one package airflow_pulsar. The installed
# mapping of client/ and broker/ to airflow_pulsar.client and airflow_pulsar.broker (package-dir) is
# an import hook that mypy cannot see, so mypy reads a tree of relative symlinks in the git-ignored
# .cache/typecheck: airflow_pulsar/'s entries plus airflow_pulsar/client -> client/ and
# airflow_pulsar/broker -> broker/, and jvm -> jvm/ (the demo's launchers). Findings are printed
# with the checkout's own paths.
# FILES="client/auth.py airflow_pulsar/hooks" reports on those files and folders only.
TYPECHECK_TREE := .cache/typecheck
TYPECHECK_PKG := $(TYPECHECK_TREE)/airflow_pulsar
FILES ?=
in_typecheck_tree = $(patsubst broker%,$(TYPECHECK_PKG)/broker%,$(patsubst client%,$(TYPECHECK_PKG)/client%,$(patsubst airflow_pulsar%,$(TYPECHECK_PKG)%,$(1))))

# Links are only added (or dropped when their target is gone), so runs side by side share the tree.
mypy: $(STAMP)
	@mkdir -p $(TYPECHECK_PKG)
	@[ -L $(TYPECHECK_TREE)/jvm ] || ln -sn ../../jvm $(TYPECHECK_TREE)/jvm
	@cd $(TYPECHECK_PKG) && find . -maxdepth 1 -type l ! -exec test -e {} \; -delete && \
		for entry in ../../../airflow_pulsar/* ../../../client ../../../broker; do \
			name=$${entry##*/}; \
			[ "$$name" = __pycache__ ] || ln -sn "$$entry" "$$name" 2>/dev/null || [ -L "$$name" ]; \
		done
	@out=$$($(VENV)/bin/mypy $(if $(FILES),--follow-imports=silent $(call in_typecheck_tree,$(FILES)),-p airflow_pulsar) 2>&1); \
		status=$$?; \
		printf '%s\n' "$$out" | sed -e 's#^$(TYPECHECK_PKG)/client/#client/#' -e 's#^$(TYPECHECK_PKG)/broker/#broker/#' -e 's#^$(TYPECHECK_PKG)/#airflow_pulsar/#'; \
		exit $$status

# The protobuf module users import, then its type stubs (mypy-protobuf, a dev dependency).
proto: $(STAMP)
	$(PY) proto/generate.py
	$(PY) -m grpc_tools.protoc --proto_path=proto --plugin=protoc-gen-mypy=$(VENV)/bin/protoc-gen-mypy \
		--mypy_out=client/protocol proto/PulsarApi.proto

clean:
	rm -rf $(VENV) .venv-lowest .venv-highest $(JVM_CACHE) build *.egg-info
