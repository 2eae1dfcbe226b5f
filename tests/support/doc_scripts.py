"""Running the shell examples the docs include (docs/examples/**/*.sh) with bash, as a reader would,
the ``airflow-pulsar``, ``airflow`` and ``pip`` of this environment first on the PATH."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
READY = re.compile(r"ready: service_url=(\S+) web_service_url=(\S+)")


def script_env(**env: str) -> dict[str, str]:
    """This process's environment with its bin folder first on the PATH, and ``env`` on top."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, **env}


def run_script(script: Path, cwd: Path, **env: str) -> str:
    """``bash script`` to its end, which must succeed; its output."""
    result = subprocess.run(["bash", script], cwd=cwd, env=script_env(**env), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{script.name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout + result.stderr


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
