"""The ``airflow-pulsar`` command line: one module per sub-command, loaded on demand."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

# name -> (module with a ``main(argv) -> int``, one-line help). Modules import lazily so that
# ``airflow-pulsar standalone`` never pays for importing Airflow.
COMMANDS: dict[str, tuple[str, str]] = {
    "standalone": ("airflow_pulsar.client.standalone.server", "run the embedded Pulsar broker"),
    "tokens": ("airflow_pulsar.cli.tokens", "make and check authentication tokens and secret keys"),
    "topics": ("airflow_pulsar.cli.topics", "create, list, inspect (stats) and delete topics"),
    "subscriptions": ("airflow_pulsar.cli.subscriptions", "create, list, reset (seek) and delete subscriptions"),
    "produce": ("airflow_pulsar.cli.produce", "send messages for a quick check"),
    "consume": ("airflow_pulsar.cli.consume", "receive, print and acknowledge messages"),
    "tune": ("airflow_pulsar.cli.tune", "recommend producer settings for a workload"),
    "demo": ("airflow_pulsar.demo", "run the demo (what make demo runs)"),
}


def usage() -> str:
    """The top-level help text, listing every sub-command."""
    width = max(len(name) for name in COMMANDS)
    lines = [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    return (
        "usage: airflow-pulsar COMMAND [options]\n\ncommands:\n"
        + "\n".join(lines)
        + "\n\nairflow-pulsar COMMAND --help describes a command's options.\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to a sub-command; each one parses its own options."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage(), end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"airflow-pulsar: unknown command {command!r}\n{usage()}", end="", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    return int(module.main(rest) or 0)
