"""The ``airflow-pulsar`` command line."""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = """usage: airflow-pulsar COMMAND [options]

commands:
  standalone    run the embedded Pulsar broker (see: airflow-pulsar standalone --help)
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to a sub-command; each one parses its own options."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "standalone":
        from airflow_pulsar.client.standalone.server import main as standalone

        return standalone(rest)
    print(f"airflow-pulsar: unknown command {command!r}\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
