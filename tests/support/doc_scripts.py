"""Running the shell examples the docs include (docs/examples/**/*.sh) with bash, as a reader would,
the ``airflow-pulsar``, ``airflow`` and ``pip`` of this environment first on the PATH."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
READY = re.compile(r"ready: service_url=(\S+) web_service_url=(\S+)")


def included(example: Path, marker: str, comment: str = "#") -> str:
    """The text a page includes from ``example``: between its ``[START marker]`` and ``[END marker]``
    lines, ``comment`` being how the file's language starts a comment."""
    return example.read_text().split(f"{comment} [START {marker}]\n", 1)[1].split(f"{comment} [END {marker}]", 1)[0]


def script_env(**env: str) -> dict[str, str]:
    """This process's environment with its bin folder first on the PATH, and ``env`` on top."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, **env}


def run_script(script: Path, cwd: Path, **env: str) -> str:
    """``bash script`` to its end, which must succeed; its output."""
    result = subprocess.run(["bash", script], cwd=cwd, env=script_env(**env), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{script.name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout + result.stderr


def run_on_terminal(command: str, cwd: Path, answers: dict[str, str], timeout_seconds: float = 60) -> str:
    """``bash -c command`` on a terminal of its own, typing each answer after its prompt (in order);
    its terminal output. For a command that asks for a password on the terminal, as a reader types it."""
    pid, terminal = pty.fork()
    if pid == 0:  # the child: its controlling terminal is the pty, so /dev/tty is where it asks
        os.chdir(cwd)
        os.execvpe("bash", ["bash", "-c", command], script_env())
    seen, deadline = b"", time.monotonic() + timeout_seconds
    try:
        for prompt, answer in answers.items():
            while prompt.encode() not in seen:
                assert time.monotonic() < deadline, f"no prompt {prompt!r} from {command!r}: {seen.decode(errors='replace')}"
                if select.select([terminal], [], [], 1)[0]:
                    seen += os.read(terminal, 1024)
            seen = seen.split(prompt.encode(), 1)[1]
            os.write(terminal, f"{answer}\n".encode())
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(terminal)
    assert os.waitstatus_to_exitcode(status) == 0, f"{command!r} failed: {seen.decode(errors='replace')}"
    return seen.decode(errors="replace")


def sourced_variable(script: Path, name: str) -> str:
    """The value of environment variable ``name`` after ``source script`` in bash."""
    result = subprocess.run(
        ["bash", "-c", f'set -eu; source "$1"; printenv {name}', "bash", script],
        env=script_env(), capture_output=True, text=True, timeout=60, check=True,
    )
    return result.stdout.rstrip("\n")


@contextmanager
def serving(command: list[str | Path], cwd: Path, **env: str) -> Iterator[tuple[str, str]]:
    """Start ``command`` (a broker in the foreground) in a session of its own, yield the service
    and web service URLs of its ready line, then SIGTERM the session and check it stopped cleanly."""
    process = subprocess.Popen(
        command, cwd=cwd, env=script_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        match = None
        while match is None:
            line = process.stdout.readline()  # "" once the command exits instead
            assert line, f"{command} exited without a ready line:\n{process.stderr.read()[-3000:]}"
            match = READY.search(line)
        yield match.group(1), match.group(2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        code = process.wait(timeout=30)
    assert code in (0, -signal.SIGTERM, 128 + signal.SIGTERM), f"{command} stopped with {code}"
