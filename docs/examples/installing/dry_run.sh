# Checking one's own pins against the provider's ranges (docs/installing.md), run by
# tests/integration/test_docs_shell_examples.py in a folder with a requirements.txt of pins this
# environment satisfies, with PIP_NO_INDEX=1 (pip then resolves against what is installed).

# [START dry run]
pip install --dry-run -r requirements.txt 'airflow-pulsar[spark]'   # what would change, or the conflict
# [END dry run]
