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
MVN := mvn -B -q -Dmaven.repo.local=$(CURDIR)/$(JVM_CACHE)/m2

.PHONY: install test demo bench proto java clean pulsar pulsar-jars

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { echo "Python >= 3.10 is required"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip uv
	$(VENV)/bin/uv pip install --python $(PY) --quiet -e '.[spark,dev]'
	touch $(STAMP)

install: $(STAMP) java pulsar-jars

pulsar-jars: $(PULSAR_CLASSPATH)

$(PULSAR_CLASSPATH): jvm/pom.xml
	@mkdir -p $(JVM_CACHE)
	@command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; }
	$(MVN) -f jvm/pom.xml dependency:build-classpath -Dmdep.outputFile=$(CURDIR)/$(PULSAR_CLASSPATH)

# Apache Pulsar standalone in the foreground, on free ports; prints its URLs.
pulsar: install
	$(PY) jvm/apache_pulsar.py

# Spark needs Java 17 or newer; install Debian's JRE when it is missing or too old.
java:
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then \
		echo "installing a Java 17 runtime (found: $${v:-none})"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; \
	fi

# loadgroup: one worker runs the cluster tier, so one cluster starts (tests/conftest.py groups it).
test: install
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

demo: install
	$(PY) -m airflow_pulsar.demo $(if $(BROKER),--broker $(BROKER))

# Quick mode by default; FULL=1 for the longer, steadier run.
bench: install
	$(PY) bench/suite.py $(if $(FULL),--full)

proto: $(STAMP)
	$(PY) proto/generate.py

clean:
	rm -rf $(VENV) $(JVM_CACHE) build *.egg-info
