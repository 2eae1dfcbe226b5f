"""The command-line conventions: a failure is one line and exit status 1, ``--debug`` shows the
traceback, and help shows the defaults (the commands themselves: tests/integration/test_cli_errors.py)."""

from __future__ import annotations

from typing import NoReturn

import pytest

from airflow_pulsar.cli.command_line import (
    CommandParser,
    non_negative_int,
    port_number,
    run_command,
    split_debug_flag,
)
from airflow_pulsar.client import Timeout


def failing(error: BaseException) -> NoReturn:
    raise error


def test_an_error_of_the_input_or_environment_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_command("prog", lambda: failing(FileNotFoundError(2, "No such file or directory", "/no/file"))) == 1
    assert capsys.readouterr().err == "prog: /no/file: No such file or directory\n"
    assert run_command("prog", lambda: failing(ValueError("first\n\n  second  "))) == 1
    assert capsys.readouterr().err == "prog: first; second\n"
    assert run_command("prog", lambda: failing(Timeout())) == 1
    assert capsys.readouterr().err == "prog: Timeout\n"


def test_a_bug_is_one_line_that_points_at_debug(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_command("prog", lambda: failing(KeyError("slot"))) == 1
    assert capsys.readouterr().err == "prog: internal error: KeyError: 'slot' (rerun with --debug to see the traceback)\n"
    assert run_command("prog", lambda: failing(AssertionError())) == 1
    assert capsys.readouterr().err == "prog: internal error: AssertionError (rerun with --debug to see the traceback)\n"


def test_debug_lets_every_failure_through() -> None:
    with pytest.raises(KeyError):
        run_command("prog", lambda: failing(KeyError("slot")), debug=True)
    with pytest.raises(ValueError):
        run_command("prog", lambda: failing(ValueError("bad")), debug=True)


def test_an_interrupt_exits_as_a_shell_reports_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_command("prog", lambda: failing(KeyboardInterrupt())) == 130
    assert capsys.readouterr().err == ""


def test_the_debug_flag_is_taken_from_anywhere() -> None:
    assert split_debug_flag(["--debug", "topics", "list", "--debug"]) == (True, ["topics", "list"])
    assert split_debug_flag(["topics", "list"]) == (False, ["topics", "list"])


def test_a_usage_error_is_one_line_with_exit_status_1(capsys: pytest.CaptureFixture[str]) -> None:
    parser = CommandParser(prog="prog")
    parser.add_argument("--count", type=non_negative_int)
    parser.add_argument("--port", type=port_number)
    for argv, message in [
        (["--count", "-1"], "argument --count: must be a whole number of 0 or more, got '-1'"),
        (["--count", "many"], "argument --count: must be a whole number of 0 or more, got 'many'"),
        (["--port", "65536"], "argument --port: must be a port number from 0 to 65535 (0: any free port), got '65536'"),
        (["--colour"], "unrecognized arguments: --colour"),
    ]:
        with pytest.raises(SystemExit) as exited:
            parser.parse_args(argv)
        assert exited.value.code == 1
        assert capsys.readouterr().err == f"prog: {message} (see prog --help)\n"


def test_help_shows_the_defaults_worth_showing() -> None:
    parser = CommandParser(prog="prog")
    actions = parser.add_subparsers(dest="action")
    create = actions.add_parser("create")  # sub-commands follow the same conventions
    create.add_argument("--size", type=int, default=100, help="bytes")
    create.add_argument("--name", help="a name")
    create.add_argument("--quiet", action="store_true", help="print less")
    create.add_argument("-p", action="append", default=[], help="a property")
    create.add_argument("--ca", default="", help="trusted CAs (default: the system's)")
    text = " ".join(create.format_help().split())
    assert "bytes (default: 100)" in text
    assert text.count("(default:") == 2  # --name, --quiet, -p have none worth showing; --ca says its own
    with pytest.raises(SystemExit) as exited:
        create.parse_args(["--size", "x"])
    assert exited.value.code == 1
