"""How ``airflow-pulsar`` and the embedded broker's command line report their options and failures.

A failure is one line on stderr, ``PROG: cause``, and exit status 1: a usage error, a bad option
value, or an error the input or the environment causes (the client's exceptions, ``OSError``,
``ValueError``). Anything else is a bug, and its one line says so. ``--debug`` lets any failure
through with its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

from airflow_pulsar.client.exceptions import PulsarException

Number = TypeVar("Number", int, float)

DEBUG_FLAG = "--debug"
FAILED = 1
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped with Ctrl-C

# What bad input or an unreachable, refusing or missing resource raises: reported, not debugged.
# ImportError: a missing or out-of-range dependency, which names itself.
EXPECTED_ERRORS: tuple[type[Exception], ...] = (PulsarException, OSError, ValueError, ImportError)


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: X)`` to an option's help, unless there is no default worth showing (none,
    an off flag, an empty list) or the help already speaks of it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        default = action.default
        if default is None or default is False or default == [] or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose help shows defaults and whose usage errors are one line, exit 1.

    Sub-parsers made with ``add_subparsers`` are of this class too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # ArgumentParser's own parameters, passed on
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: message`` and where to find the options, and exit 1."""
        self.exit(FAILED, f"{self.prog}: {message} (see {self.prog} --help)\n")


def non_negative_int(text: str) -> int:
    """An argparse ``type``: a whole number of 0 or more."""
    return _checked(int, text, lambda value: value >= 0, "a whole number of 0 or more")


def positive_int(text: str) -> int:
    """An argparse ``type``: a whole number greater than 0."""
    return _checked(int, text, lambda value: value > 0, "a whole number greater than 0")


def positive_float(text: str) -> float:
    """An argparse ``type``: a number greater than 0."""
    return _checked(float, text, lambda value: value > 0, "a number greater than 0")  # also refuses nan


def port_number(text: str) -> int:
    """An argparse ``type``: a TCP port, 0 to 65535 (0: the system picks a free one)."""
    return _checked(int, text, lambda value: 0 <= value <= 65535, "a port number from 0 to 65535 (0: any free port)")


def _checked(convert: Callable[[str], Number], text: str, accept: Callable[[Number], bool], wanted: str) -> Number:
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}") from None
    if not accept(value):
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
    return value


def split_debug_flag(argv: Sequence[str]) -> tuple[bool, list[str]]:
    """Whether ``--debug`` is on the line (anywhere), and the arguments without it."""
    return DEBUG_FLAG in argv, [arg for arg in argv if arg != DEBUG_FLAG]


def describe(exc: BaseException) -> str:
    """The cause an exception names, on one line ("" if it names none)."""
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename is not None else exc.strerror
    else:
        text = str(exc)
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def run_command(prog: str, command: Callable[[], int | None], *, debug: bool = False) -> int:
    """Run ``command`` and return its exit status; a failure prints one line naming the cause and
    returns 1 (with ``debug``, it propagates with its traceback instead)."""
    try:
        return int(command() or 0)
    except KeyboardInterrupt:
        if debug:
            raise
        return INTERRUPTED
    except EXPECTED_ERRORS as exc:
        if debug:
            raise
        print(f"{prog}: {describe(exc) or type(exc).__name__}", file=sys.stderr)
    except Exception as exc:
        if debug:
            raise
        detail = describe(exc)
        bug = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
        print(f"{prog}: internal error: {bug} (rerun with {DEBUG_FLAG} to see the traceback)", file=sys.stderr)
    return FAILED
