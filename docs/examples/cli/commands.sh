# The command line's quick checks (docs/command-line.md), run by tests/integration/test_docs_cli_examples.py
# against the broker under test: PULSAR_SERVICE_URL and PULSAR_ADMIN_URL name it, and the tenant
# acme with its namespace orders exists.
set -euo pipefail

# [START commands]
airflow-pulsar topics create events --partitions 4     # also: topics update-partitions TOPIC --partitions N | list | stats TOPIC [--json] | delete TOPIC
airflow-pulsar subscriptions create events audit       # at earliest; --position latest|ledger:entry[:partition]|2024-05-01T12:00:00Z|ms
airflow-pulsar subscriptions reset events audit --to 2024-05-01T12:00:00Z   # seek; also earliest, latest, a message id
airflow-pulsar subscriptions list events               # also: subscriptions delete events audit [--force]
airflow-pulsar permissions grant --namespace acme/orders --role loader --actions produce   # or --topic T; revoke --role R; list
airflow-pulsar permissions grant --namespace acme/orders --subscription ingest --roles loader,ops   # only these may consume it
airflow-pulsar produce events --count 100000 --size 200 --key user-1 -p source=cli
airflow-pulsar subscriptions create events check --position latest   # from here on
airflow-pulsar produce events -m hello -m world        # or --file lines.txt, --file - for stdin
airflow-pulsar consume events -s check -n 2            # hello, world: prints and acknowledges; --no-ack, --type Shared, -q
airflow-pulsar tune --message-size 1024 --partitions 4 --latency-ms 10   # producer settings from size, partitions, latency budget
# [END commands]
