"""The ``airflow-pulsar`` command line: one module per sub-command, loaded on demand.

Every failure is one line on stderr naming its cause, with exit status 1; ``--debug`` (anywhere on
the line) shows the traceback instead (``airflow_pulsar/cli/command_line.py``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

PROG = "airflow-pulsar"  # also the name of the distribution the script comes with

# name -> (module with a ``main(argv) -> int``, one-line help). Modules import lazily so that
# ``airflow-pulsar standalone`` never pays for importing Airflow.
COMMANDS: dict[str, tuple[str, str]] = {
    "standalone": ("airflow_pulsar.broker.server", "run the embedded Pulsar broker"),
    "tokens": ("airflow_pulsar.cli.tokens", "make and check authentication tokens and secret keys"),
    "topics": ("airflow_pulsar.cli.topics", "create, list, inspect (stats) and delete topics"),
    "subscriptions": ("airflow_pulsar.cli.subscriptions", "create, list, reset (seek) and delete subscriptions"),
    "permissions": ("airflow_pulsar.cli.permissions", "list, grant and revoke permissions on namespaces, topics, subscriptions"),
    "produce": ("airflow_pulsar.cli.produce", "send messages for a quick check"),
    "consume": ("airflow_pulsar.cli.consume", "receive, print and acknowledge messages"),
    "tune": ("airflow_pulsar.cli.tune", "recommend producer settings for a workload"),
    "demo": ("airflow_pulsar.demo", "run the demo (what make demo runs)"),
}


def usage() -> str:
    """The top-level help text, listing every sub-command and the global options."""
    width = max(len(name) for name in COMMANDS)
    lines = [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    return (
        f"usage: {PROG} [--version] [--debug] COMMAND [options]\n\ncommands:\n"
        + "\n".join(lines)
        + "\n\noptions:\n"
        "  --version  print the version of airflow-pulsar\n"
        "  --debug    on a failure, show the traceback instead of one line (anywhere on the line)\n"
        f"\n{PROG} COMMAND --help describes a command's options.\n"
    )


def version() -> str:
    """The installed version of the airflow-pulsar distribution."""
    import importlib.metadata  # some 20 ms, for --version alone

    try:
        return importlib.metadata.version(PROG)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (running from a source tree that is not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to a sub-command, which parses its own options; failures are one line, exit 1."""
    try:  # the client refuses, as it loads, a dependency outside its supported range
        from airflow_pulsar.cli.command_line import FAILED, run_command, split_debug_flag
    except ImportError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    debug, args = split_debug_flag(sys.argv[1:] if argv is None else argv)
    if not args:
        print(f"{PROG}: give a command: {', '.join(COMMANDS)} (see {PROG} --help)", file=sys.stderr)
        return FAILED
    if args[0] in ("-h", "--help"):
        print(usage(), end="")
        return 0
    if args[0] == "--version":
        print(f"{PROG} {version()}")
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"{PROG}: unknown command {command!r}; the commands are {', '.join(COMMANDS)}", file=sys.stderr)
        return FAILED
    module_name = COMMANDS[command][0]
    return run_command(f"{PROG} {command}", lambda: importlib.import_module(module_name).main(rest), debug=debug)
